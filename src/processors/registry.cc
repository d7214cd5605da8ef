// The one explicit table of built-in processors.
#include "processors/builtin.h"

namespace sluice {

void register_builtin_processors(Registry& r) {
  r.add(field_set_processor());
  r.add(field_rename_processor());
  r.add(field_exclude_processor());
  r.add(filter_processor());
}

}  // namespace sluice
