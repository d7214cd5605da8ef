// Server addresses of the test servers (scripts/services) and names unique to one test, so tests
// of one binary or of several binaries can run in parallel against the same servers.
#pragma once

#include <string>
#include <string_view>

namespace sluice::test {

// The value of `var`, or "" after failing the current test (ADD_FAILURE, never a skip) with how to
// start `service`.
std::string required_env(const char* var, const char* service);

// By kind: the variables scripts/services exports.
inline std::string pg_url() { return required_env("SLUICE_TEST_PG_URL", "postgres"); }
inline std::string pg_nological_url() {
  return required_env("SLUICE_TEST_PG_NOLOGICAL_URL", "postgres-replica");
}
inline std::string mysql_url() { return required_env("SLUICE_TEST_MYSQL_URL", "mariadb"); }
inline std::string mysql_nobinlog_url() {
  return required_env("SLUICE_TEST_MYSQL_NOBINLOG_URL", "mariadb-nobinlog");
}

// `prefix`_<pid>_<counter>_<random>: lower-case letters, digits and '_' only, at most `max_len`
// characters (63 fits PostgreSQL identifiers and replication slots, 64 MySQL databases).
std::string unique_name(std::string_view prefix, size_t max_len = 63);

// The running gtest's suite and test name, lower-cased and reduced to [a-z0-9_] ("" outside a
// test).
std::string current_test_slug();

}  // namespace sluice::test
