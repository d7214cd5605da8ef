// The one explicit table of built-in connectors.
#include "connectors/builtin.h"

namespace sluice {

void register_builtin_connectors(Registry& r) {
  // (entries are added here, one line per connector)
  r.add(generator_connector());
  r.add(discard_connector());
  r.add(file_connector());
  r.add(sqlite_connector());
  r.add(postgres_connector());
  r.add(mysql_connector());
  r.add(kafka_connector());
}

}  // namespace sluice
