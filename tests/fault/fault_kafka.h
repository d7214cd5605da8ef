// The fault suite's Kafka verdict: a PostgreSQL source table against what a read_committed
// consumer sees in a topic (every snapshot row and change exactly once, check_kafka_exactly_once).
#pragma once

#include <string>

#include "fault/fault_suite.h"
#include "support/kafka.h"

namespace sluice::test::fault {

inline Checker kafka_exactly_once_checker(std::string pg_url, std::string table,
                                          std::string topic) {
  return [pg_url = std::move(pg_url), table = std::move(table), topic = std::move(topic)] {
    const TableImage source = read_pg_image(pg_url, table);
    const auto messages = consume_all(topic, 1, std::chrono::seconds(10), /*read_committed=*/true);
    const KafkaExactlyOnce k = check_kafka_exactly_once(messages, source);
    Check c;
    c.verified = k.snapshot_rows + k.changes;
    c.lost = k.lost + k.gaps + k.differing;
    c.duplicated = k.duplicated;
    if (!k.exact()) c.problem = k.str();
    return c;
  };
}

}  // namespace sluice::test::fault
