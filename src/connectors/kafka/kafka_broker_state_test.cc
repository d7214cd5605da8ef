// The kafka connectors' connection probe from librdkafka's statistics and error callbacks
// (kafka_common.h), on statistics documents of librdkafka 2.0.2 (captured from a producer and a
// consumer against the test broker, trimmed to the fields read plus some neighbours).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "connectors/kafka/kafka_common.h"

namespace sluice {
namespace {

// A consumer: the configured broker and the logical group coordinator.
std::string consumer_stats(const char* broker_state, const char* coordinator_state) {
  return std::string(R"({ "name": "rdkafka#consumer-1", "client_id": "rdkafka", "type": "consumer",
    "ts":11794968134, "replyq":0, "brokers":{
    "127.0.0.1:21092/1": { "name":"127.0.0.1:21092/1", "nodeid":1, "nodename":"127.0.0.1:21092",
      "source":"configured", "state":")") +
         broker_state + R"(", "stateage":890711, "outbuf_cnt":0, "tx":7,
      "rtt": { "min":0, "max":0, "avg":0 }, "toppars":{ } },
    "GroupCoordinator": { "name":"GroupCoordinator", "nodeid":1, "nodename":"127.0.0.1:21092",
      "source":"logical", "state":")" +
         coordinator_state + R"(", "stateage":590127, "tx":3 } },
    "topics":{ }, "cgrp": { "state": "up", "join_state": "steady" }, "tx":10, "rx":10 })";
}

std::string producer_stats(const char* state) {
  return std::string(R"({ "name": "rdkafka#producer-1", "type": "producer", "brokers":{
    ":0/internal": { "name":":0/internal", "nodeid":-1, "source":"internal", "state":"UP" },
    "127.0.0.1:21092/1": { "name":"127.0.0.1:21092/1", "nodeid":1, "source":"configured",
      "state":")") +
         state + R"(" } }, "topics":{ } })";
}

TEST(KafkaBrokerState, ABrokerUpIsConnected) {
  EXPECT_EQ(kafka::any_broker_up(consumer_stats("UP", "UP")), true);
  EXPECT_EQ(kafka::any_broker_up(consumer_stats("CONNECT", "UP")), true);
  EXPECT_EQ(kafka::any_broker_up(producer_stats("UP")), true);
}

TEST(KafkaBrokerState, NoBrokerUpIsDownAndTheInternalBrokerDoesNotCount) {
  EXPECT_EQ(kafka::any_broker_up(consumer_stats("DOWN", "TRY_CONNECT")), false);
  EXPECT_EQ(kafka::any_broker_up(producer_stats("CONNECT")), false);
}

TEST(KafkaBrokerState, ADocumentWithoutBrokersSaysNothing) {
  EXPECT_EQ(kafka::any_broker_up(R"({"name":"x","brokers":{}})"), std::nullopt);
  EXPECT_EQ(kafka::any_broker_up(R"({"name":"x"})"), std::nullopt);
  EXPECT_EQ(kafka::any_broker_up("not json"), std::nullopt);
}

TEST(KafkaBrokerState, TheProbeFollowsTheCallbacks) {
  ConnectionProbe probe;
  // Before any connection a document without a broker UP is no loss (and so no reconnect later).
  kafka::report_broker_stats(probe, producer_stats("CONNECT"));
  EXPECT_EQ(probe.is_connected(), 0);
  kafka::report_broker_stats(probe, producer_stats("UP"));
  EXPECT_EQ(probe.is_connected(), 1);
  EXPECT_EQ(probe.reconnects(), 0u);
  // One broker connection failing is not a loss; all of them down is, at once.
  kafka::report_broker_error(probe, RD_KAFKA_RESP_ERR__TRANSPORT);
  EXPECT_EQ(probe.is_connected(), 1);
  kafka::report_broker_error(probe, RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN);
  EXPECT_EQ(probe.is_connected(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the outage has a length
  EXPECT_GT(probe.down_seconds(), 0);
  kafka::report_broker_stats(probe, consumer_stats("DOWN", "DOWN"));
  EXPECT_EQ(probe.is_connected(), 0);
  kafka::report_broker_stats(probe, consumer_stats("UP", "UP"));
  EXPECT_EQ(probe.is_connected(), 1);
  EXPECT_EQ(probe.reconnects(), 1u);
  EXPECT_EQ(probe.down_seconds(), 0);
  // A loss seen only in the statistics (no error callback in between) counts too.
  kafka::report_broker_stats(probe, producer_stats("DOWN"));
  EXPECT_EQ(probe.is_connected(), 0);
  kafka::report_broker_stats(probe, producer_stats("UP"));
  EXPECT_EQ(probe.reconnects(), 2u);
}

}  // namespace
}  // namespace sluice
