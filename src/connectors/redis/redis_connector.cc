// The `redis` connector: a destination (redis_destination.cc) writing rows as hashes or JSON
// strings; the source (Redis streams) joins this spec from redis_source.cc.
#include "connectors/builtin.h"
#include "connectors/redis/redis_destination.h"

namespace sluice {

namespace {
constexpr std::string_view kRedisTemplateSettings[] = {"table"};
}  // namespace

ConnectorSpec redis_connector() {
  return ConnectorSpec{
      .name = "redis",
      .summary =
          "Writes rows to Redis (hiredis) as hashes or JSON strings under "
          "<prefix><schema>.<table>:<key>, one MULTI/EXEC per batch, the position optionally in "
          "the same EXEC.",
      .source_settings = {},
      .destination_settings = redis::redis_destination_settings(),
      .make_source = nullptr,
      .make_destination = &redis::make_redis_destination,
      .template_settings = kRedisTemplateSettings,
  };
}

}  // namespace sluice
