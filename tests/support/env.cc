#include "support/env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <random>

namespace sluice::test {

std::string required_env(const char* var, const char* service) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') {
    ADD_FAILURE() << var << " is not set: start the server with `eval \"$(scripts/services start "
                  << service << ")\"` (or run `make test`), then run the tests again";
    return "";
  }
  return v;
}

namespace {
std::string slug(std::string_view s) {
  std::string out;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? char(std::tolower(u)) : '_';
  }
  return out;
}
}  // namespace

std::string unique_name(std::string_view prefix, size_t max_len) {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = std::random_device{}() % 100000;
  const std::string tail = "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
                           "_" + std::to_string(salt);
  std::string head = slug(prefix);
  if (head.size() + tail.size() > max_len)
    head.resize(max_len > tail.size() ? max_len - tail.size() : 0);
  return head + tail;
}

std::string current_test_slug() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "";
  return slug(std::string(info->test_suite_name()) + "_" + info->name());
}

}  // namespace sluice::test
