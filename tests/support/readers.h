// Readers of each destination: a table (or topic, or file) read back as rows of text, sorted, so
// a test compares what landed with what it expects whatever order the destination returns.
// A table that does not exist reads as nullopt (no test failure: a test may poll for it).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "support/sql.h"

namespace sluice::test {

Rows sorted(Rows rows);

// `columns` of `schema`.`table` (each cast to text), sorted.
std::optional<Rows> read_pg_table(PgClient& c, const std::string& schema, const std::string& table,
                                  const std::vector<std::string>& columns);
// `columns` of `table` in the client's database, sorted.
std::optional<Rows> read_mysql_table(MysqlClient& c, const std::string& table,
                                     const std::vector<std::string>& columns);
// `columns` of `table` in a SQLite file (values as SQLite's text of them), sorted.
std::optional<Rows> read_sqlite_table(const std::filesystem::path& file, const std::string& table,
                                      const std::vector<std::string>& columns);
// The lines of a JSON Lines file (the file destination), one column each, sorted.
Rows read_jsonl_file(const std::filesystem::path& file);
// Every message of a Kafka topic as {key, value} (nullopt: null key / tombstone), sorted; waits
// for at least `expect` messages (support/kafka.h consume_all).
Rows read_kafka_topic(const std::string& topic, size_t expect,
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Rows as "v1|v2" lines, one per line, for failure messages.
std::string show(const Rows& rows);

}  // namespace sluice::test
