// The `redis` connector: a source (redis_source.cc); the destination joins here from its own
// branch.
#include "connectors/builtin.h"
#include "connectors/redis/redis_source.h"

namespace sluice {

ConnectorSpec redis_connector() {
  return ConnectorSpec{
      .name = "redis",
      .summary =
          "Reads Redis Streams through a consumer group (hiredis), entries acknowledged (XACK) "
          "only after the destination acknowledged them.",
      .source_settings = redis_source_settings(),
      .destination_settings = {},
      .make_source = &make_redis_source,
      .make_destination = nullptr,
  };
}

}  // namespace sluice
