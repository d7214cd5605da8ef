// The Kafka test server by kind (scripts/services start kafka, SLUICE_TEST_KAFKA_BROKERS): unique
// topic names, topic creation, producing, and the reader of the kafka destination: consuming whole
// topics with librdkafka. Used by integration, fault, serial and conformance tests.
#pragma once

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::test {

inline std::string kafka_brokers() {
  const char* b = std::getenv("SLUICE_TEST_KAFKA_BROKERS");
  if (!b || !*b) {
    ADD_FAILURE()
        << "SLUICE_TEST_KAFKA_BROKERS is not set: run `eval \"$(scripts/services start kafka)\"` "
           "(make test does)";
    return "127.0.0.1:1";
  }
  return b;
}

// A topic name no other test (or earlier run) uses.
inline std::string unique_topic(std::string_view prefix) {
  static std::atomic<int> n{0};
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::string(prefix) + "_" + std::to_string(getpid()) + "_" +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count() %
                        100000000) +
         "_" + std::to_string(n++);
}

struct KafkaMessage {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;    // nullopt: null key
  std::optional<std::string> value;  // nullopt: tombstone
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = -1;  // -1: none
  bool create_time = false;   // the timestamp is the producer's (CreateTime)
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

namespace detail {
inline rd_kafka_t* make_client(rd_kafka_type_t type,
                               const std::map<std::string, std::string>& props) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  auto set = [&](const std::string& k, const std::string& v) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
      ADD_FAILURE() << "kafka test client: " << k << ": " << err;
  };
  set("bootstrap.servers", kafka_brokers());
  for (const auto& [k, v] : props) set(k, v);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (!rk) ADD_FAILURE() << "kafka test client: " << err;
  return rk;
}
}  // namespace detail

// Creates a topic (replication factor 1); an existing topic is fine.
inline void create_topic(const std::string& topic, int partitions = 1,
                         const std::map<std::string, std::string>& configs = {}) {
  rd_kafka_t* rk = detail::make_client(RD_KAFKA_PRODUCER, {});
  ASSERT_NE(rk, nullptr);
  char err[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  ASSERT_NE(nt, nullptr) << err;
  for (const auto& [k, v] : configs) rd_kafka_NewTopic_set_config(nt, k.c_str(), v.c_str());
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  ASSERT_NE(ev, nullptr) << "CreateTopics timed out";
  const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
  size_t n = 0;
  const rd_kafka_topic_result_t** tr = rd_kafka_CreateTopics_result_topics(res, &n);
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
      ADD_FAILURE() << "create topic " << topic << ": " << rd_kafka_err2str(e);
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_destroy(rk);
}

struct ProduceMessage {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers = {};
  int32_t partition = RD_KAFKA_PARTITION_UA;
};

// Produces the messages in order and waits until every one is acknowledged by the broker.
inline void produce(const std::string& topic, const std::vector<ProduceMessage>& messages) {
  rd_kafka_t* rk =
      detail::make_client(RD_KAFKA_PRODUCER, {{"enable.idempotence", "true"}, {"linger.ms", "5"}});
  ASSERT_NE(rk, nullptr);
  for (const auto& m : messages) {
    rd_kafka_headers_t* hdrs = rd_kafka_headers_new(m.headers.size());
    for (const auto& [k, v] : m.headers)
      rd_kafka_header_add(hdrs, k.data(), k.size(), v.data(), v.size());
    for (;;) {
      rd_kafka_resp_err_t e = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(m.partition),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY((m.key ? m.key->data() : nullptr), (m.key ? m.key->size() : 0)),
          RD_KAFKA_V_VALUE((m.value ? const_cast<char*>(m.value->data()) : nullptr),
                           (m.value ? m.value->size() : 0)),
          RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 100);
        continue;
      }
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(hdrs);
        ADD_FAILURE() << "produce to " << topic << ": " << rd_kafka_err2str(e);
      }
      break;
    }
  }
  EXPECT_EQ(rd_kafka_flush(rk, 60000), RD_KAFKA_RESP_ERR_NO_ERROR) << "produce: flush timed out";
  rd_kafka_destroy(rk);
}

// Reads `topic` from the beginning of every partition until at least `expect` messages arrived and
// every partition reached its end (so extra messages are seen too), or `timeout` passed.
// read_committed (default) hides messages of aborted or open transactions.
inline std::vector<KafkaMessage> consume_all(
    const std::string& topic, size_t expect,
    std::chrono::milliseconds timeout = std::chrono::seconds(60), bool read_committed = true) {
  std::vector<KafkaMessage> out;
  rd_kafka_t* rk = detail::make_client(
      RD_KAFKA_CONSUMER,
      {{"group.id", unique_topic("test-reader")},
       {"enable.partition.eof", "true"},
       {"enable.auto.commit", "false"},
       {"isolation.level", read_committed ? "read_committed" : "read_uncommitted"}});
  if (!rk) return out;
  rd_kafka_poll_set_consumer(rk);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  int partitions = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (partitions == 0 && std::chrono::steady_clock::now() < deadline) {
    if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
        partitions = md->topics[0].partition_cnt;
      rd_kafka_metadata_destroy(md);
    }
    if (partitions == 0) usleep(200000);
  }
  rd_kafka_topic_destroy(t);
  if (partitions == 0) {
    ADD_FAILURE() << "topic " << topic << " does not exist";
    rd_kafka_destroy(rk);
    return out;
  }
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(parts, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  std::vector<bool> at_end(partitions, false);
  while (std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 200);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      at_end[m->partition] = true;
    } else if (m->err) {
      // transient (broker restarting); keep polling
    } else {
      if (m->partition >= 0 && m->partition < partitions) at_end[m->partition] = false;
      KafkaMessage km;
      km.topic = topic;
      km.partition = m->partition;
      km.offset = m->offset;
      rd_kafka_timestamp_type_t tstype = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
      km.timestamp_ms = rd_kafka_message_timestamp(m, &tstype);
      km.create_time = tstype == RD_KAFKA_TIMESTAMP_CREATE_TIME;
      if (m->key) km.key = std::string(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) km.value = std::string(static_cast<const char*>(m->payload), m->len);
      rd_kafka_headers_t* h = nullptr;
      if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* val;
        size_t size;
        for (size_t i = 0;
             rd_kafka_header_get_all(h, i, &name, &val, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
          km.headers.emplace_back(
              name, val ? std::string(static_cast<const char*>(val), size) : std::string());
      }
      out.push_back(std::move(km));
    }
    rd_kafka_message_destroy(m);
    bool all_end = true;
    for (bool e : at_end) all_end = all_end && e;
    if (all_end && out.size() >= expect) break;
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

// The integer of a message key {"id":N} (nullopt for another shape).
inline std::optional<int64_t> key_id(const KafkaMessage& m) {
  if (!m.key) return std::nullopt;
  const std::string& k = *m.key;
  const std::string lead = "{\"id\":";
  if (k.rfind(lead, 0) != 0 || k.back() != '}') return std::nullopt;
  try {
    return std::stoll(k.substr(lead.size(), k.size() - lead.size() - 1));
  } catch (...) {
    return std::nullopt;
  }
}

// Deletes topics (test cleanup); errors are ignored.
inline void delete_topics(const std::vector<std::string>& topics) {
  if (topics.empty()) return;
  rd_kafka_t* rk = detail::make_client(RD_KAFKA_PRODUCER, {});
  if (!rk) return;
  std::vector<rd_kafka_DeleteTopic_t*> dt;
  for (const auto& t : topics) dt.push_back(rd_kafka_DeleteTopic_new(t.c_str()));
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteTopics(rk, dt.data(), dt.size(), nullptr, q);
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000)) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_DeleteTopic_destroy_array(dt.data(), dt.size());
  rd_kafka_destroy(rk);
}

// Deletes the listed topics when the test ends.
class TopicsCleanup {
 public:
  explicit TopicsCleanup(std::vector<std::string> topics) : topics_(std::move(topics)) {}
  ~TopicsCleanup() { delete_topics(topics_); }
  void add(std::string t) { topics_.push_back(std::move(t)); }

 private:
  std::vector<std::string> topics_;
};

// The consumer group's committed offset of each partition 0..partitions-1 of `topic` (-1 when
// none).
inline std::vector<int64_t> committed_offsets(const std::string& group, const std::string& topic,
                                              int partitions = 1) {
  std::vector<int64_t> out(size_t(partitions), -1);
  rd_kafka_t* rk = detail::make_client(RD_KAFKA_CONSUMER,
                                       {{"group.id", group}, {"enable.auto.commit", "false"}});
  if (!rk) return out;
  rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(l, topic.c_str(), p);
  rd_kafka_resp_err_t e = rd_kafka_committed(rk, l, 30000);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    ADD_FAILURE() << "committed offsets of group " << group << ": " << rd_kafka_err2str(e);
  for (int i = 0; i < l->cnt; ++i)
    if (l->elems[i].partition >= 0 && l->elems[i].partition < partitions)
      out[size_t(l->elems[i].partition)] = l->elems[i].offset;
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_destroy(rk);
  return out;
}

// Commits `offset` for partition `partition` of `topic` in `group` (as another member would).
inline void commit_offset(const std::string& group, const std::string& topic, int32_t partition,
                          int64_t offset) {
  rd_kafka_t* rk = detail::make_client(RD_KAFKA_CONSUMER,
                                       {{"group.id", group}, {"enable.auto.commit", "false"}});
  ASSERT_NE(rk, nullptr);
  rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic.c_str(), partition)->offset = offset;
  rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
  EXPECT_EQ(e, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(e);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_destroy(rk);
}

// Deletes consumer groups (test cleanup); errors are ignored.
inline void delete_groups(const std::vector<std::string>& groups) {
  if (groups.empty()) return;
  rd_kafka_t* rk = detail::make_client(RD_KAFKA_PRODUCER, {});
  if (!rk) return;
  std::vector<rd_kafka_DeleteGroup_t*> dg;
  for (const auto& g : groups) dg.push_back(rd_kafka_DeleteGroup_new(g.c_str()));
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteGroups(rk, dg.data(), dg.size(), nullptr, q);
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000)) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_DeleteGroup_destroy_array(dg.data(), dg.size());
  rd_kafka_destroy(rk);
}

// An OpenCDC JSON record of table `table`: key {"id":id}; after {"id":id,"v":v} (no after for
// "delete").
inline std::string opencdc_json(const std::string& op, const std::string& table, int64_t id,
                                const std::string& v = "") {
  std::string s = "{\"operation\":\"" + op + "\",\"metadata\":{\"table\":\"" + table +
                  "\"},\"key\":{\"id\":" + std::to_string(id) + "},\"payload\":{";
  if (op != "delete") s += "\"after\":{\"id\":" + std::to_string(id) + ",\"v\":\"" + v + "\"}";
  return s + "}}";
}

// Topics and consumer groups a test uses, deleted when it ends; topic() creates a unique one.
struct KafkaScope {
  std::vector<std::string> topics, groups;
  KafkaScope() = default;
  KafkaScope(const KafkaScope&) = delete;
  KafkaScope& operator=(const KafkaScope&) = delete;
  ~KafkaScope() {
    delete_topics(topics);
    delete_groups(groups);
  }
  std::string topic(const std::string& prefix, int partitions = 1) {
    topics.push_back(unique_topic(prefix));
    create_topic(topics.back(), partitions);
    return topics.back();
  }
};

}  // namespace sluice::test
