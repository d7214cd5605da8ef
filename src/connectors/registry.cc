// The one explicit table of built-in connectors.
#include "connectors/build_options.h"  // generated: SLUICE_WITH_<NAME> (CMake options)
#include "connectors/builtin.h"

namespace sluice {

void register_builtin_connectors(Registry& r) {
  // (entries are added here, one line per connector; optional ones behind their build option)
  r.add(generator_connector());
  r.add(discard_connector());
  r.add(file_connector());
#if SLUICE_WITH_SQLITE
  r.add(sqlite_connector());
#endif
#if SLUICE_WITH_POSTGRES
  r.add(postgres_connector());
#endif
#if SLUICE_WITH_MYSQL
  r.add(mysql_connector());
#endif
#if SLUICE_WITH_KAFKA
  r.add(kafka_connector());
#endif
#if SLUICE_WITH_REDIS
  r.add(redis_connector());
#endif
}

}  // namespace sluice
