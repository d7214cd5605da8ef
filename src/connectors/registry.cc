// The one explicit table of built-in connectors.
#include "connectors/builtin.h"

namespace sluice {

void register_builtin_connectors(Registry& r) {
  // (entries are added here, one line per connector)
}

}  // namespace sluice
