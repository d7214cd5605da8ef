#include "sluice/registry.h"

namespace sluice {

const Registry& Registry::builtin() {
  static const Registry registry = [] {
    Registry r;
    register_builtin_connectors(r);
    register_builtin_processors(r);
    return r;
  }();
  return registry;
}

}  // namespace sluice
