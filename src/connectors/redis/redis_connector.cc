// The `redis` connector: a source (redis_source.cc: Redis Streams through a consumer group, or the
// keyspace mode) and a destination (redis_destination.cc: rows as hashes or JSON strings, or
// changes appended to streams), sharing redis_common.
#include "connectors/builtin.h"
#include "connectors/redis/redis_destination.h"
#include "connectors/redis/redis_source.h"

namespace sluice {

namespace {
constexpr std::string_view kRedisTemplateSettings[] = {"table"};
}  // namespace

ConnectorSpec redis_connector() {
  return ConnectorSpec{
      .name = "redis",
      .summary =
          "Reads Redis Streams through a consumer group, entries acknowledged (XACK) only after "
          "the destination acknowledged them (raw, OpenCDC or Debezium entries), or snapshots "
          "keys and follows keyspace notifications (mode keyspace); writes rows as hashes or JSON "
          "strings under <prefix><schema>.<table>:<key>, or appends each change to a stream (mode "
          "stream), one MULTI/EXEC per batch, the position optionally in the same EXEC (hiredis).",
      .source_settings = redis_source_settings(),
      .destination_settings = redis::redis_destination_settings(),
      .make_source = &make_redis_source,
      .make_destination = &redis::make_redis_destination,
      .template_settings = kRedisTemplateSettings,
  };
}

}  // namespace sluice
