#include "connectors/common/log_source.h"

namespace sluice {

void wait_until_or_stop(std::chrono::steady_clock::time_point until, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_until(lock, stop, until, [] { return false; });
}

}  // namespace sluice
