// Fail points for the sluice processes a test starts (src/support/failpoint.h,
// docs/development/testing.md): SLUICE_FAILPOINTS is set while the object lives, and every child
// started meanwhile copies it from the environment.
#pragma once

#include <stdlib.h>

#include <string>

namespace sluice::test {

class ArmedFailPoints {
 public:
  explicit ArmedFailPoints(const std::string& spec) {
    ::setenv("SLUICE_FAILPOINTS", spec.c_str(), 1);
  }
  ~ArmedFailPoints() { ::unsetenv("SLUICE_FAILPOINTS"); }
  ArmedFailPoints(const ArmedFailPoints&) = delete;
  ArmedFailPoints& operator=(const ArmedFailPoints&) = delete;
};

}  // namespace sluice::test
