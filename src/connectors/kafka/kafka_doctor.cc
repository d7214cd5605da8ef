// Read-only cluster questions for `sluice doctor` (the topics, a topic's configuration, a
// consumer group), shared by the kafka source's and destination's checks.
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "connectors/kafka/kafka_common.h"

namespace sluice::kafka {

namespace {

// Runs one admin request on a private queue and hands its result event to `read`.
template <class Start, class Read>
auto admin_call(rd_kafka_t* rk, std::chrono::milliseconds timeout, std::string_view what,
                Start start, Read read) -> decltype(read(nullptr)) {
  char err[512];
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_ANY);
  (void)rd_kafka_AdminOptions_set_request_timeout(opts, int(timeout.count()), err, sizeof err);
  start(opts, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, int(timeout.count()) + 5000);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_queue_destroy(q);
  if (!ev)
    return Error(Errc::timeout, fmt::format("{}: no answer within {} ms", what, timeout.count()),
                 true);
  struct Destroy {
    rd_kafka_event_t* ev;
    ~Destroy() { rd_kafka_event_destroy(ev); }
  } destroy{ev};
  if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return error_from(rd_kafka_event_error(ev), fmt::format("{}: ", what));
  return read(ev);
}

}  // namespace

Result<ClusterTopics> list_topics(rd_kafka_t* rk, std::chrono::milliseconds timeout) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t e =
      rd_kafka_metadata(rk, /*all_topics=*/1, nullptr, &md, int(timeout.count()));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) return error_from(e, "cannot list the topics: ");
  ClusterTopics out;
  for (int i = 0; i < md->topic_cnt; ++i) out.topics[md->topics[i].topic] = md->topics[i].err;
  if (md->broker_cnt > 0) out.broker = md->brokers[0].id;
  rd_kafka_metadata_destroy(md);
  return out;
}

Result<std::map<std::string, std::string>> describe_config(rd_kafka_t* rk,
                                                           rd_kafka_ResourceType_t type,
                                                           const std::string& name,
                                                           std::chrono::milliseconds timeout) {
  rd_kafka_ConfigResource_t* res = rd_kafka_ConfigResource_new(type, name.c_str());
  const std::string what =
      fmt::format("describing {} '{}'", type == RD_KAFKA_RESOURCE_TOPIC ? "topic" : "broker", name);
  auto out = admin_call(
      rk, timeout, what,
      [&](rd_kafka_AdminOptions_t* o, rd_kafka_queue_t* q) {
        rd_kafka_DescribeConfigs(rk, &res, 1, o, q);
      },
      [&](rd_kafka_event_t* ev) -> Result<std::map<std::string, std::string>> {
        const rd_kafka_DescribeConfigs_result_t* r = rd_kafka_event_DescribeConfigs_result(ev);
        size_t n = 0;
        const rd_kafka_ConfigResource_t** rs =
            r ? rd_kafka_DescribeConfigs_result_resources(r, &n) : nullptr;
        if (n != 1) return Error(Errc::internal, "DescribeConfigs: no resource in the answer");
        if (rd_kafka_resp_err_t e = rd_kafka_ConfigResource_error(rs[0]))
          return error_from(e, what + ": ");
        std::map<std::string, std::string> config;
        size_t m = 0;
        const rd_kafka_ConfigEntry_t** es = rd_kafka_ConfigResource_configs(rs[0], &m);
        for (size_t i = 0; i < m; ++i) {
          const char* k = rd_kafka_ConfigEntry_name(es[i]);
          const char* v = rd_kafka_ConfigEntry_value(es[i]);
          if (k) config[k] = v ? v : "";
        }
        return config;
      });
  rd_kafka_ConfigResource_destroy(res);
  return out;
}

namespace {

Result<GroupState> describe_group_once(rd_kafka_t* rk, const std::string& group,
                                       std::chrono::milliseconds timeout) {
  const char* groups[] = {group.c_str()};
  return admin_call(
      rk, timeout, fmt::format("describing group '{}'", group),
      [&](rd_kafka_AdminOptions_t* o, rd_kafka_queue_t* q) {
        rd_kafka_DescribeConsumerGroups(rk, groups, 1, o, q);
      },
      [&](rd_kafka_event_t* ev) -> Result<GroupState> {
        const rd_kafka_DescribeConsumerGroups_result_t* r =
            rd_kafka_event_DescribeConsumerGroups_result(ev);
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t** gs =
            r ? rd_kafka_DescribeConsumerGroups_result_groups(r, &n) : nullptr;
        if (n != 1) return Error(Errc::internal, "DescribeConsumerGroups: no group in the answer");
        if (const rd_kafka_error_t* e = rd_kafka_ConsumerGroupDescription_error(gs[0]))
          return error_from(rd_kafka_error_code(e), fmt::format("describing group '{}': ", group));
        return GroupState{
            rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(gs[0])),
            rd_kafka_ConsumerGroupDescription_member_count(gs[0])};
      });
}

}  // namespace

Result<GroupState> describe_group(rd_kafka_t* rk, const std::string& group,
                                  std::chrono::milliseconds timeout) {
  // A group nobody used yet has no coordinator at first: the brokers answer NOT_COORDINATOR /
  // COORDINATOR_LOAD_IN_PROGRESS until one is elected; asked again, within `timeout`.
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(100);;
       pause = std::min(pause * 2, std::chrono::milliseconds(1000))) {
    auto g = describe_group_once(rk, group, timeout);
    if (g.ok() || !g.error().retriable() || std::chrono::steady_clock::now() + pause >= until)
      return g;
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace sluice::kafka
