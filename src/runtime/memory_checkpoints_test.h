// Test-only (the runtime's and the engine's unit tests): a CheckpointStore in memory that keeps
// every save in order, so a test can read what the acker stored and when.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/checkpoint.h"

namespace sluice::test {

class MemoryCheckpoints final : public CheckpointStore {
 public:
  Result<std::optional<std::string>> load(std::string_view id) override {
    std::lock_guard l(mu);
    auto it = saved.find(std::string(id));
    if (it == saved.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }
  Status save(std::string_view id, std::string_view pos) override {
    std::lock_guard l(mu);
    saved[std::string(id)] = std::string(pos);
    history.emplace_back(pos);
    return ok_status();
  }
  Status erase(std::string_view id) override {
    std::lock_guard l(mu);
    saved.erase(std::string(id));
    return ok_status();
  }
  // The position saved under `id` ("" when none), read under the lock: a running pipeline's acker
  // may be saving meanwhile.
  std::string value(const std::string& id) {
    std::lock_guard l(mu);
    auto it = saved.find(id);
    return it == saved.end() ? std::string() : it->second;
  }
  bool has(const std::string& id) {
    std::lock_guard l(mu);
    return saved.count(id) != 0;
  }
  // Every position saved so far, in order (any pipeline id).
  std::vector<std::string> saves() {
    std::lock_guard l(mu);
    return history;
  }
  std::mutex mu;
  std::map<std::string, std::string> saved;
  std::vector<std::string> history;
};

}  // namespace sluice::test
