// librdkafka's own producer rate, the ceiling of bench/kafka, and the tool that counts what
// arrived.
//
//   sluice_kafka_produce_ceiling produce BROKERS TOPIC COUNT VALUE_BYTES [KEY_BYTES] [name=value
//   ...]
//       Produces COUNT messages (distinct {"id":N} keys padded to KEY_BYTES, values of VALUE_BYTES)
//       with the kafka destination's default producer configuration (idempotent, acks=all,
//       linger.ms=5, batch.size=1MiB, batch.num.messages=10000, queue.buffering.max.kbytes=65536,
//       lz4 compression, the destination's default; name=value pairs override), waits for every
//       delivery report and prints
//       {"messages":N,"seconds":S,"failed":F} (S: first produce to last delivery report).
//   sluice_kafka_produce_ceiling replay BROKERS FROM_TOPIC TO_TOPIC [name=value ...]
//       Reads every message of FROM_TOPIC (read_committed) into memory first, then produces them
//       to TO_TOPIC with the same producer configuration as `produce`: the very keys, values and
//       headers sluice wrote (a header set built per message, as a producer must), so the ceiling
//       pays for what sluice's messages cost the producer and the broker. Prints the same JSON.
//   sluice_kafka_produce_ceiling count BROKERS TOPIC
//       Reads the whole topic (read_committed) and prints {"messages":N,"bytes":B,"key_bytes":K}.
//   sluice_kafka_produce_ceiling delete BROKERS TOPIC...
//   sluice_kafka_produce_ceiling create BROKERS TOPIC     (1 partition; waits for its leader)
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

std::atomic<long> delivered{0}, failed{0};

void dr(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  if (m->err) ++failed;
  ++delivered;
}

rd_kafka_conf_t* conf_for(const char* brokers,
                          const std::vector<std::pair<std::string, std::string>>& props) {
  rd_kafka_conf_t* c = rd_kafka_conf_new();
  char err[512];
  auto set = [&](const std::string& k, const std::string& v) {
    if (rd_kafka_conf_set(c, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      std::fprintf(stderr, "%s: %s\n", k.c_str(), err);
      std::exit(2);
    }
  };
  set("bootstrap.servers", brokers);
  for (const auto& [k, v] : props) set(k, v);
  return c;
}

// A producer with the kafka destination's default configuration (`props` override it), counting
// delivery reports; nullptr (after a message) when it cannot be made.
rd_kafka_t* make_producer(const char* brokers,
                          const std::vector<std::pair<std::string, std::string>>& props) {
  std::vector<std::pair<std::string, std::string>> all = {{"enable.idempotence", "true"},
                                                          {"acks", "all"},
                                                          {"linger.ms", "5"},
                                                          {"batch.size", "1048576"},
                                                          {"batch.num.messages", "10000"},
                                                          {"queue.buffering.max.kbytes", "65536"},
                                                          {"compression.codec", "lz4"},
                                                          {"message.timeout.ms", "300000"}};
  for (const auto& p : props) all.push_back(p);
  rd_kafka_conf_t* c = conf_for(brokers, all);
  rd_kafka_conf_set_dr_msg_cb(c, dr);
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
  if (!rk) std::fprintf(stderr, "%s\n", err);
  return rk;
}

// Waits for COUNT delivery reports, then prints the figures; the exit status.
int finish_run(rd_kafka_t* rk, long count, std::chrono::steady_clock::time_point start) {
  while (delivered.load() < count) rd_kafka_poll(rk, 10);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"messages\":%ld,\"seconds\":%.4f,\"failed\":%ld}\n", count, s, failed.load());
  return failed.load() ? 1 : 0;
}

int produce(const char* brokers, const char* topic, long count, size_t value_bytes,
            size_t key_bytes, std::vector<std::pair<std::string, std::string>> props) {
  rd_kafka_t* rk = make_producer(brokers, props);
  if (!rk) return 2;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic, nullptr);
  // One buffer of values, messages point into it without copying (as the destination does; keys
  // are always copied by librdkafka).
  std::string value(value_bytes, 'x');
  for (size_t i = 0; i < value_bytes; ++i) value[i] = char('a' + i % 26);
  // Warm up: metadata and the idempotent producer id, outside the timed part.
  {
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk, 0, t, &md, 30000) == RD_KAFKA_RESP_ERR_NO_ERROR)
      rd_kafka_metadata_destroy(md);
  }
  const auto start = std::chrono::steady_clock::now();
  std::string key;
  for (long i = 0; i < count; ++i) {
    key = "{\"id\":" + std::to_string(i + 1) + "}";
    if (key.size() < key_bytes) key.append(key_bytes - key.size(), ' ');
    for (;;) {
      if (rd_kafka_produce(t, RD_KAFKA_PARTITION_UA, 0, value.data(), value.size(), key.data(),
                           key.size(), nullptr) == 0)
        break;
      if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        std::fprintf(stderr, "produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
        return 1;
      }
      rd_kafka_poll(rk, 1);
    }
    rd_kafka_poll(rk, 0);
  }
  const int rc = finish_run(rk, count, start);
  rd_kafka_topic_destroy(t);
  rd_kafka_destroy(rk);
  return rc;
}

struct Stored {
  std::string key, value;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Calls `fn` with every message of `topic` (read_committed, from the beginning of every
// partition until each reports its end); an error message, or "".
std::string for_each_message(const char* brokers, const char* topic, const char* group,
                             const std::function<void(const rd_kafka_message_t*)>& fn) {
  rd_kafka_conf_t* c = conf_for(brokers, {{"group.id", group},
                                          {"enable.auto.commit", "false"},
                                          {"enable.partition.eof", "true"},
                                          {"isolation.level", "read_committed"}});
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
  if (!rk) return err;
  rd_kafka_poll_set_consumer(rk);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic, nullptr);
  int partitions = 0;
  if (rd_kafka_metadata(rk, 0, t, &md, 30000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && md->topics[0].err == 0) partitions = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(t);
  if (partitions == 0) {
    rd_kafka_destroy(rk);
    return std::string("topic ") + topic + " does not exist";
  }
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  int at_end = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  while (at_end < partitions && std::chrono::steady_clock::now() < until) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 500);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) ++at_end;
    else if (!m->err) fn(m);
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return at_end < partitions ? std::string("timed out reading ") + topic : std::string();
}

// Every message of `topic`, in memory; an error message, or "".
std::string read_all(const char* brokers, const char* topic, std::vector<Stored>& out) {
  return for_each_message(brokers, topic, "sluice-bench-replay", [&](const rd_kafka_message_t* m) {
    Stored st;
    if (m->key) st.key.assign(static_cast<const char*>(m->key), m->key_len);
    if (m->payload) st.value.assign(static_cast<const char*>(m->payload), m->len);
    rd_kafka_headers_t* hs = nullptr;
    if (rd_kafka_message_headers(m, &hs) == RD_KAFKA_RESP_ERR_NO_ERROR && hs) {
      const char* name = nullptr;
      const void* v = nullptr;
      size_t vlen = 0;
      for (size_t i = 0;
           rd_kafka_header_get_all(hs, i, &name, &v, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
        st.headers.emplace_back(name, v ? std::string(static_cast<const char*>(v), vlen) : "");
    }
    out.push_back(std::move(st));
  });
}

int replay(const char* brokers, const char* from, const char* to,
           std::vector<std::pair<std::string, std::string>> props) {
  std::vector<Stored> msgs;
  if (std::string e = read_all(brokers, from, msgs); !e.empty()) {
    std::fprintf(stderr, "%s\n", e.c_str());
    return 1;
  }
  rd_kafka_t* rk = make_producer(brokers, props);
  if (!rk) return 2;
  {
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk, to, nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk, 0, t, &md, 30000) == RD_KAFKA_RESP_ERR_NO_ERROR)
      rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
  }
  const long count = long(msgs.size());
  const auto start = std::chrono::steady_clock::now();
  for (const Stored& m : msgs) {
    for (;;) {
      rd_kafka_headers_t* hs = nullptr;
      if (!m.headers.empty()) {
        hs = rd_kafka_headers_new(m.headers.size());
        for (const auto& [k, v] : m.headers)
          rd_kafka_header_add(hs, k.data(), ssize_t(k.size()), v.data(), ssize_t(v.size()));
      }
      const rd_kafka_resp_err_t e =
          rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(to), RD_KAFKA_V_KEY(m.key.data(), m.key.size()),
                            RD_KAFKA_V_VALUE(const_cast<char*>(m.value.data()), m.value.size()),
                            RD_KAFKA_V_HEADERS(hs), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (hs) rd_kafka_headers_destroy(hs);
      if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        std::fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
        return 1;
      }
      rd_kafka_poll(rk, 1);
    }
    rd_kafka_poll(rk, 0);
  }
  const int rc = finish_run(rk, count, start);
  rd_kafka_destroy(rk);
  return rc;
}

int count_topic(const char* brokers, const char* topic) {
  long n = 0;
  long long bytes = 0, key_bytes = 0;
  const std::string e =
      for_each_message(brokers, topic, "sluice-bench-count", [&](const rd_kafka_message_t* m) {
        ++n;
        bytes += long(m->len);
        key_bytes += long(m->key_len);
      });
  if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
  std::printf("{\"messages\":%ld,\"bytes\":%lld,\"key_bytes\":%lld}\n", n, bytes, key_bytes);
  return e.empty() ? 0 : 1;
}

int delete_topics(const char* brokers, int n, char** topics) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf_for(brokers, {}), err, sizeof err);
  if (!rk) return 2;
  std::vector<rd_kafka_DeleteTopic_t*> dt;
  for (int i = 0; i < n; ++i) dt.push_back(rd_kafka_DeleteTopic_new(topics[i]));
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteTopics(rk, dt.data(), dt.size(), nullptr, q);
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000)) rd_kafka_event_destroy(ev);
  rd_kafka_queue_destroy(q);
  rd_kafka_DeleteTopic_destroy_array(dt.data(), dt.size());
  rd_kafka_destroy(rk);
  return 0;
}

// Creates a topic (1 partition, replication 1) and waits until its partition has a leader, so a
// benchmark's first message does not pay for auto-creation.
int create_topic(const char* brokers, const char* topic) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf_for(brokers, {}), err, sizeof err);
  if (!rk) return 2;
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic, 1, 1, err, sizeof err);
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, nullptr, q);
  int rc = 0;
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000)) {
    size_t n = 0;
    const rd_kafka_topic_result_t** tr =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    for (size_t i = 0; i < n; ++i) {
      rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        std::fprintf(stderr, "create %s: %s\n", topic, rd_kafka_err2str(e));
        rc = 1;
      }
    }
    rd_kafka_event_destroy(ev);
  } else {
    std::fprintf(stderr, "create %s: timed out\n", topic);
    rc = 1;
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  for (int i = 0; rc == 0 && i < 300; ++i) {  // until the partition has a leader (≤ 30 s)
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic, nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    bool ready = rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                 md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                 md->topics[0].partition_cnt > 0 && md->topics[0].partitions[0].leader >= 0;
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    if (ready) break;
    rd_kafka_poll(rk, 100);
  }
  rd_kafka_destroy(rk);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 6 && std::strcmp(argv[1], "produce") == 0) {
    std::vector<std::pair<std::string, std::string>> props;
    size_t key_bytes = 0;
    for (int i = 6; i < argc; ++i) {
      const char* eq = std::strchr(argv[i], '=');
      if (eq) props.emplace_back(std::string(argv[i], size_t(eq - argv[i])), std::string(eq + 1));
      else key_bytes = std::strtoul(argv[i], nullptr, 10);
    }
    return produce(argv[2], argv[3], std::atol(argv[4]), std::strtoul(argv[5], nullptr, 10),
                   key_bytes, props);
  }
  if (argc >= 5 && std::strcmp(argv[1], "replay") == 0) {
    std::vector<std::pair<std::string, std::string>> props;
    for (int i = 5; i < argc; ++i)
      if (const char* eq = std::strchr(argv[i], '='))
        props.emplace_back(std::string(argv[i], size_t(eq - argv[i])), std::string(eq + 1));
    return replay(argv[2], argv[3], argv[4], std::move(props));
  }
  if (argc == 4 && std::strcmp(argv[1], "count") == 0) return count_topic(argv[2], argv[3]);
  if (argc >= 4 && std::strcmp(argv[1], "delete") == 0)
    return delete_topics(argv[2], argc - 3, argv + 3);
  if (argc == 4 && std::strcmp(argv[1], "create") == 0) return create_topic(argv[2], argv[3]);
  std::fprintf(
      stderr,
      "usage: %s produce BROKERS TOPIC COUNT VALUE_BYTES [KEY_BYTES] [name=value...] | replay BROKERS "
      "FROM_TOPIC TO_TOPIC [name=value...] | count BROKERS TOPIC | "
      "delete BROKERS TOPIC... | create BROKERS TOPIC\n",
      argv[0]);
  return 2;
}
