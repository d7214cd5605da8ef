// The one explicit table of built-in processors.
#include "processors/builtin.h"

namespace sluice {

void register_builtin_processors(Registry& r) {
  // (entries are added here, one line per processor)
}

}  // namespace sluice
