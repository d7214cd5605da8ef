// The `redis` connector: a source (redis_source.cc: Redis Streams through a consumer group) and a
// destination (redis_destination.cc: rows as hashes or JSON strings), sharing redis_common.
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
          "the destination acknowledged them; writes rows as hashes or JSON strings under "
          "<prefix><schema>.<table>:<key>, one MULTI/EXEC per batch, the position optionally in "
          "the same EXEC (hiredis).",
      .source_settings = redis_source_settings(),
      .destination_settings = redis::redis_destination_settings(),
      .make_source = &make_redis_source,
      .make_destination = &redis::make_redis_destination,
      .template_settings = kRedisTemplateSettings,
  };
}

}  // namespace sluice
