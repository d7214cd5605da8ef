// The kafka source: one consumer-group member subscribed to the pipeline's topics (names or
// regexes), decoding messages with kafka_source_formats. Offsets are never committed by librdkafka
// on its own (enable.auto.commit=false, enable.auto.offset.store=false): ack() commits the
// position the runtime acknowledged — after the destination wrote it and the checkpoint was saved.
//
// Position (the checkpoint): the next offset to read of every topic-partition read so far,
//   topic:partition=offset,partition=offset;topic:...   e.g.  orders:0=120,1=98;users:0=7
// Topic names are [a-zA-Z0-9._-], so the separators are unambiguous. On assignment a partition the
// position knows starts there (exact resume); others follow `start`.
#include "connectors/kafka/kafka_source.h"

#include <fmt/format.h>
#include <regex.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "connectors/common/message_formats.h"
#include "connectors/kafka/kafka_common.h"

namespace sluice {

namespace {

using Clock = std::chrono::steady_clock;
using kafka::encode_position;
using kafka::Format;
using kafka::Offsets;
using kafka::parse_position;

// The source's options: filled from the settings table below by bind_settings (defaults written
// there, once), then checked and completed by finalize().
struct Options {
  std::string brokers;
  std::vector<std::string> topics;
  std::string group;
  std::string start;
  std::string format;
  Format decoder = Format::opencdc;  // derived by finalize from `format`
  std::chrono::milliseconds connect_timeout{};
  std::chrono::milliseconds socket_timeout{};
  std::string tls_mode, tls_ca, tls_cert, tls_key, tls_key_password;
  std::map<std::string, std::string> rdkafka;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::brokers>("brokers", "Bootstrap brokers, host:port[,host:port...].")
        .mandatory(),
    setting<&Options::topics>(
        "topics",
        "Topics to read. An entry starting with ^ is a regular expression (librdkafka subscribes to every "
        "matching topic, new ones included after the next metadata refresh). A named topic must exist.")
        .mandatory(),
    setting<&Options::group>(
        "group",
        "Consumer group id. Default: sluice-<pipeline id>. Offsets are committed to it only after the "
        "destination acknowledged (and the checkpoint was saved)."),
    setting<&Options::start>(
        "start",
        "Where to begin when the pipeline has no checkpoint of its own. committed: the group's committed "
        "offsets (partitions without one from the earliest); earliest: every partition from its "
        "beginning; latest: only messages produced after the partition was assigned. With a checkpoint, "
        "its offsets always win (exact resume).")
        .one_of("committed,earliest,latest")
        .with_default("committed"),
    setting<&Options::format>(
        "format",
        "How message values become records. opencdc: one OpenCDC JSON record (sluice's kafka destination "
        "default); debezium: a Debezium change event, with or without the JsonConverter schema wrapper; "
        "raw: key = {key: message key}, after = {value: message value}, table = the topic.")
        .one_of("opencdc,debezium,raw")
        .with_default("opencdc"),
    setting<&Options::connect_timeout>(
        "connect_timeout", "How long open may wait for the brokers' metadata before failing.")
        .with_default("10s"),
    setting<&Options::socket_timeout>(
        "socket_timeout",
        "How long a request to a broker may wait for its answer before librdkafka takes the connection for dead (a partition, a broker that stopped answering but keeps TCP open), closes it and reconnects (socket.timeout.ms); TCP keepalives are on (socket.keepalive.enable). Fetches resume on the new connection from the last offset read.")
        .with_default("30s")
        .at_least(10),
    setting<&Options::tls_mode>("tls.mode", kafka::kTlsModeDoc)
        .one_of(kafka::kTlsModeChoices)
        .with_default("disabled"),
    setting<&Options::tls_ca>("tls.ca", kTlsCaDoc).file_path(),
    setting<&Options::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&Options::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&Options::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc).secret_value(),
    setting<&Options::rdkafka>(
        "rdkafka.*",
        "Any librdkafka consumer property (CONFIGURATION.md), e.g. rdkafka.security.protocol: SASL_SSL, "
        "rdkafka.fetch.max.bytes. enable.auto.commit and enable.auto.offset.store stay false."));

// The cross-setting checks, in one place; derives the decoder's format.
// Everything `open` would refuse before connecting is checked here, so `sluice validate` says it
// too: no topic, a topic regex that does not compile, a librdkafka property it does not know.
Status finalize(Options& o) {
  if (!kafka::parse_format(o.format, &o.decoder))
    return Error(Errc::config, "setting 'format': expected opencdc, debezium or raw");
  if (o.topics.empty()) return Error(Errc::config, "setting 'topics' lists no topic");
  for (const auto& t : o.topics) {
    if (t.empty()) return Error(Errc::config, "setting 'topics': an empty topic name (remove it)");
    if (t[0] != '^') continue;
    regex_t re;
    if (int rc = regcomp(&re, t.c_str(), REG_EXTENDED | REG_NOSUB); rc != 0) {
      char why[256];
      regerror(rc, &re, why, sizeof why);
      return Error(
          Errc::config,
          fmt::format("setting 'topics': {} is not a valid regular expression ({}); fix it, "
                      "or list the topic without a leading ^",
                      quote_user_text(t), why));
    }
    regfree(&re);
  }
  SLUICE_TRY(kafka::apply_tls({o.tls_mode, o.tls_ca, o.tls_cert, o.tls_key, o.tls_key_password},
                              o.rdkafka));
  // librdkafka itself judges names and values, on a scratch configuration nothing uses.
  auto scratch = kafka::make_conf(o.brokers, "kafka source", {}, o.rdkafka);
  if (!scratch.ok()) return std::move(scratch).error();
  return ok_status();
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + ("'" + s + "'");
  return out;
}

class KafkaSource;
// The source whose reader thread is inside a librdkafka call that serves callbacks
// (consumer_poll, consumer_close): rebalance and commit callbacks find it here.
thread_local KafkaSource* t_current = nullptr;

struct CurrentScope {
  explicit CurrentScope(KafkaSource* s) : prev(t_current) { t_current = s; }
  ~CurrentScope() { t_current = prev; }
  KafkaSource* prev;
};

class KafkaSource final : public Source {
 public:
  explicit KafkaSource(Options o)
      : brokers_(std::move(o.brokers)),
        topics_(std::move(o.topics)),
        group_setting_(std::move(o.group)),
        start_(std::move(o.start)),
        connect_timeout_(o.connect_timeout),
        socket_timeout_(o.socket_timeout),
        properties_(std::move(o.rdkafka)),
        decoder_(o.decoder) {}
  ~KafkaSource() override { close(); }

  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override;
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view position) override;
  void close() noexcept override;
  Status cleanup(const ConnectorContext& ctx) override;
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::optional<std::string>& checkpoint) override;

  // Callbacks (reader thread, inside consumer_poll / consumer_close).
  void on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts);
  void on_commit(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets);
  void on_error(rd_kafka_resp_err_t err, const char* reason);
  void on_stats(std::string_view json) { kafka::report_broker_stats(probe_, json); }

 private:
  Status handle_message(const rd_kafka_message_t& m, Batch& batch);
  Status handle_error(const rd_kafka_message_t& m);
  bool should_warn(rd_kafka_resp_err_t err);

  // settings
  std::string brokers_;
  std::vector<std::string> topics_;
  std::string group_setting_, start_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds socket_timeout_;
  std::map<std::string, std::string> properties_;

  ConnectorContext ctx_;
  std::string group_;
  kafka::Handle rk_;
  kafka::MessageDecoder decoder_;
  bool had_checkpoint_ = false;

  // reader thread
  Offsets offsets_;             // next offset to read, per topic-partition
  bool offsets_dirty_ = false;  // changed without a record (assignment at `latest`, tombstones)
  std::string last_position_;   // last position given to a batch
  struct Slot {
    rd_kafka_topic_t* rkt;
    int32_t partition;
    int64_t* next;
    bool* eof;  // in assigned_, or nullptr
  };
  // Assigned partitions → reached their end since their last message (EOF event).
  std::map<std::pair<std::string, int32_t>, bool> assigned_;
  size_t not_at_end_ = 0;  // assigned partitions not at their end
  void set_eof(bool* eof, bool value) {
    if (eof == nullptr || *eof == value) return;
    *eof = value;
    if (value) --not_at_end_;
    else ++not_at_end_;
  }
  std::vector<Slot> slots_;  // (topic handle, partition) → &offsets_[..][..]
  std::vector<std::pair<std::string_view, std::string_view>> headers_;
  std::unordered_map<int, Clock::time_point> last_warned_;
  std::optional<Error> callback_error_;
  // From subscribe (or a revocation) until partitions are assigned: not idle, since what there
  // is to read is not known yet (keeps --idle-exit from stopping before the group was joined).
  bool assignment_pending_ = true;
  int64_t newest_timestamp_ms_ = -1;  // of the last message read (lag)

  // acker thread (and close)
  std::mutex commit_mu_;
  Offsets committed_;  // what was last sent to the group
  std::string last_acked_;
  bool closed_ = false;

  // sluice_source_connected{…,connector="kafka"}, …: from check_reachable in open(), then from
  // the error and statistics callbacks (kafka_common.h). No phase series: there is no snapshot.
  ConnectionProbe probe_;
};

void rebalance_cb(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                  void*) {
  if (t_current != nullptr) return t_current->on_rebalance(err, parts);
  // Not expected (callbacks are served by the reader thread); keep librdkafka's default behaviour.
  const bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
  rd_kafka_error_t* e = nullptr;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (cooperative) e = rd_kafka_incremental_assign(rk, parts);
    else rd_kafka_assign(rk, parts);
  } else {
    if (cooperative) e = rd_kafka_incremental_unassign(rk, parts);
    else rd_kafka_assign(rk, nullptr);
  }
  if (e != nullptr) rd_kafka_error_destroy(e);
}

void error_cb(rd_kafka_t*, int err, const char* reason, void*) {
  if (t_current != nullptr) t_current->on_error(rd_kafka_resp_err_t(err), reason);
}

int stats_cb(rd_kafka_t*, char* json, size_t json_len, void*) {
  if (t_current != nullptr) t_current->on_stats(std::string_view(json, json_len));
  return 0;  // librdkafka frees the document
}

void commit_cb(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets,
               void*) {
  if (t_current != nullptr) t_current->on_commit(err, offsets);
}

void KafkaSource::on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
  rd_kafka_t* rk = rk_.get();
  const bool cooperative = std::string_view(rd_kafka_rebalance_protocol(rk)) == "COOPERATIVE";
  if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
      spdlog::warn("pipeline {}: kafka rebalance error: {}", ctx_.pipeline_id,
                   rd_kafka_err2str(err));
    spdlog::info("pipeline {}: {} partition(s) revoked from group '{}'", ctx_.pipeline_id,
                 parts->cnt, group_);
    slots_.clear();
    if (cooperative) {
      for (int i = 0; i < parts->cnt; ++i) {
        auto it = assigned_.find({parts->elems[i].topic, parts->elems[i].partition});
        if (it == assigned_.end()) continue;
        if (!it->second) --not_at_end_;
        assigned_.erase(it);
      }
      if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts)) rd_kafka_error_destroy(e);
    } else {
      assigned_.clear();
      not_at_end_ = 0;
      rd_kafka_assign(rk, nullptr);
      assignment_pending_ = true;
    }
    return;
  }
  int from_position = 0, from_start = 0;
  for (int i = 0; i < parts->cnt; ++i) {
    rd_kafka_topic_partition_t& tp = parts->elems[i];
    auto t = offsets_.find(std::string_view(tp.topic));
    if (t != offsets_.end()) {
      auto p = t->second.find(tp.partition);
      if (p != t->second.end()) {
        tp.offset = p->second;
        ++from_position;
        continue;
      }
    }
    ++from_start;
    if (had_checkpoint_) {
      // A partition the checkpoint does not know (a new topic or partition): all of it.
      tp.offset = start_ == "committed" ? RD_KAFKA_OFFSET_INVALID : RD_KAFKA_OFFSET_BEGINNING;
    } else if (start_ == "earliest") {
      tp.offset = RD_KAFKA_OFFSET_BEGINNING;
    } else if (start_ == "latest") {
      // Resolve the end now, so that what is produced after the assignment is never skipped.
      int64_t low = 0, high = 0;
      rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
          rk, tp.topic, tp.partition, &low, &high, int(connect_timeout_.count()));
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
        tp.offset = high;
        offsets_[tp.topic][tp.partition] = high;
        offsets_dirty_ = true;
      } else {
        spdlog::warn(
            "pipeline {}: cannot read the end offset of '{}' partition {}: {} (starting at its end)",
            ctx_.pipeline_id, tp.topic, tp.partition, rd_kafka_err2str(e));
        tp.offset = RD_KAFKA_OFFSET_END;
      }
    } else {
      tp.offset =
          RD_KAFKA_OFFSET_INVALID;  // the group's committed offset, else auto.offset.reset=earliest
    }
  }
  slots_.clear();
  if (cooperative) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts)) {
      callback_error_ = Error(
          Errc::internal, fmt::format("cannot assign partitions: {}", rd_kafka_error_string(e)));
      rd_kafka_error_destroy(e);
      return;
    }
  } else if (rd_kafka_resp_err_t e = rd_kafka_assign(rk, parts); e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    callback_error_ = kafka::error_from(e, "cannot assign partitions: ");
    return;
  }
  if (!cooperative) {
    assigned_.clear();
    not_at_end_ = 0;
  }
  for (int i = 0; i < parts->cnt; ++i) {
    auto [it, fresh] =
        assigned_.try_emplace({parts->elems[i].topic, parts->elems[i].partition}, false);
    if (fresh) ++not_at_end_;
  }
  assignment_pending_ = false;
  spdlog::info(
      "pipeline {}: assigned {} partition(s) of group '{}' ({} at a known offset, {} from start: {})",
      ctx_.pipeline_id, parts->cnt, group_, from_position, from_start,
      had_checkpoint_ ? "new partition" : start_);
}

void KafkaSource::on_commit(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR__NO_OFFSET) return;
  {
    std::lock_guard lk(commit_mu_);
    committed_.clear();  // commit everything again with the next ack
  }
  if (should_warn(err))
    spdlog::warn(
        "pipeline {}: committing offsets to group '{}' failed: {} (retried with the next acknowledgement)",
        ctx_.pipeline_id, group_, rd_kafka_err2str(err));
}

void KafkaSource::on_error(rd_kafka_resp_err_t err, const char* reason) {
  kafka::report_broker_error(probe_, err);
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char buf[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk_.get(), buf, sizeof buf);
    callback_error_ = kafka::error_from(orig, fmt::format("fatal consumer error ({}): ", buf));
    return;
  }
  // Brokers down or restarting, connections refused: librdkafka reconnects on its own.
  if (should_warn(err))
    spdlog::warn("pipeline {}: kafka: {} (still polling; librdkafka reconnects)", ctx_.pipeline_id,
                 reason);
}

bool KafkaSource::should_warn(rd_kafka_resp_err_t err) {
  const auto now = Clock::now();
  auto [it, fresh] = last_warned_.try_emplace(int(err), now);
  if (fresh) return true;
  if (now - it->second < std::chrono::seconds(10)) return false;
  it->second = now;
  return true;
}

Status KafkaSource::open(const ConnectorContext& ctx,
                         const std::optional<std::string>& checkpoint) {
  ctx_ = ctx;
  group_ = group_setting_.empty() ? "sluice-" + ctx.pipeline_id : group_setting_;
  // topics (and their regexes) were checked by finalize.
  if (checkpoint && !checkpoint->empty()) {
    auto p = parse_position(*checkpoint);
    if (!p)
      return Error(
          Errc::data,
          fmt::format("checkpoint {} is not a kafka position; run `sluice cleanup` to start over",
                      quote_user_text(*checkpoint)));
    offsets_ = std::move(*p);
    had_checkpoint_ = true;
  }
  const std::map<std::string, std::string> defaults = {
      {"group.id", group_},
      {"client.id", "sluice"},
      {"auto.offset.reset", "earliest"},
      // Bounded prefetch: at most this much per partition is queued locally.
      {"queued.max.messages.kbytes", "16384"},
      {"topic.metadata.refresh.interval.ms", "30000"},
      // Connection failures reach the error callback (rate-limited warnings), not one error line
      // per attempt; rdkafka.log_level: 7 (with rdkafka.debug) shows everything.
      {"log_level", "2"},
      // After a crash the group waits for the dead member's session to expire before it assigns
      // the partitions again: keep that short (the broker's minimum is 6 s by default).
      {"session.timeout.ms", "10000"},
      {"statistics.interval.ms", kafka::kBrokerStatsInterval},  // broker state for the probe
      // A dead connection (no answer, TCP still open) is closed and reconnected.
      {"socket.timeout.ms", std::to_string(socket_timeout_.count())},
      {"socket.keepalive.enable", "true"},
  };
  auto conf = kafka::make_conf(brokers_, "kafka source", defaults, properties_);
  if (!conf.ok()) return std::move(conf).error();
  for (const char* k : {"enable.auto.commit", "enable.auto.offset.store"}) {
    if (properties_.count(k))
      spdlog::warn(
          "pipeline {}: rdkafka.{} is ignored: the kafka source commits offsets itself, after the "
          "destination acknowledged",
          ctx_.pipeline_id, k);
    if (Status st = kafka::set_property(conf->get(), k, "false"); !st.ok()) return st;
  }
  // End-of-partition events tell when every assigned partition is caught up (idle).
  if (Status st = kafka::set_property(conf->get(), "enable.partition.eof", "true"); !st.ok())
    return st;
  rd_kafka_conf_set_rebalance_cb(conf->get(), &rebalance_cb);
  rd_kafka_conf_set_offset_commit_cb(conf->get(), &commit_cb);
  rd_kafka_conf_set_error_cb(conf->get(), &error_cb);
  rd_kafka_conf_set_stats_cb(conf->get(), &stats_cb);
  probe_.register_into(ctx, "source", /*with_phase=*/false);
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf->get(), err, sizeof err);
  if (rk == nullptr)
    return Error(Errc::invalid_argument, fmt::format("cannot create the Kafka consumer: {}", err));
  (void)conf->release();  // owned by rk now
  rk_.reset(rk);

  if (Status st = kafka::check_reachable(rk, brokers_, connect_timeout_); !st.ok()) return st;
  probe_.connected();

  // Named topics must exist (a regex may match nothing yet).
  std::vector<std::string> named;
  for (const auto& t : topics_)
    if (t.empty() || t[0] != '^') named.push_back(t);
  if (!named.empty()) {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t e =
        rd_kafka_metadata(rk, /*all_topics=*/1, nullptr, &md, int(connect_timeout_.count()));
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      return kafka::error_from(e, fmt::format("cannot list the topics on {}: ", brokers_));
    std::optional<Error> problem;
    for (const auto& name : named) {
      bool found = false;
      for (int i = 0; i < md->topic_cnt && !found; ++i) {
        if (name != md->topics[i].topic) continue;
        found = true;
        if (md->topics[i].err != RD_KAFKA_RESP_ERR_NO_ERROR && !problem)
          problem = kafka::error_from(md->topics[i].err, fmt::format("topic '{}': ", name));
      }
      if (!found && !problem)
        problem =
            Error(Errc::not_found,
                  fmt::format("topic '{}' does not exist on {}: create it, or fix `topics` (a "
                              "regular expression starts with ^)",
                              name, brokers_));
    }
    rd_kafka_metadata_destroy(md);
    if (problem) return *problem;
  }

  rd_kafka_poll_set_consumer(rk);
  kafka::PartitionList subs(rd_kafka_topic_partition_list_new(int(topics_.size())));
  for (const auto& t : topics_)
    rd_kafka_topic_partition_list_add(subs.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  if (rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, subs.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return kafka::error_from(e, fmt::format("cannot subscribe to {}: ", join(topics_)));
  last_position_ = had_checkpoint_ ? *checkpoint : std::string();
  spdlog::info("pipeline {}: consuming {} as group '{}' ({})", ctx_.pipeline_id, join(topics_),
               group_, had_checkpoint_ ? "resuming from the checkpoint" : "start: " + start_);
  return ok_status();
}

// `sluice doctor`: a consumer that neither subscribes nor joins the group asks the cluster for the
// topics and the group's state.
Result<std::vector<DoctorCheck>> KafkaSource::doctor(const ConnectorContext& ctx,
                                                     const std::optional<std::string>& checkpoint) {
  using O = DoctorCheck::Outcome;
  std::vector<DoctorCheck> out;
  const std::string group = group_setting_.empty() ? "sluice-" + ctx.pipeline_id : group_setting_;
  auto conf = kafka::make_conf(brokers_, "kafka source",
                               {{"group.id", group},
                                {"log_level", "2"},
                                {"socket.timeout.ms", std::to_string(socket_timeout_.count())}},
                               properties_);
  if (!conf.ok()) return std::move(conf).error();
  char err[512];
  kafka::Handle rk(rd_kafka_new(RD_KAFKA_CONSUMER, conf->get(), err, sizeof err));
  if (!rk) return Error(Errc::invalid_argument, fmt::format("cannot create a consumer: {}", err));
  (void)conf->release();
  const std::string reach = "the brokers answer";
  if (Status st = kafka::check_reachable(rk.get(), brokers_, connect_timeout_); !st.ok()) {
    out.push_back({O::fail, reach, st.error().message(),
                   "check `brokers`, the tls.* settings and that Kafka is running"});
    return out;
  }
  out.push_back({O::pass, reach, brokers_, {}});
  auto cluster = kafka::list_topics(rk.get(), connect_timeout_);
  if (!cluster.ok()) {
    out.push_back({O::fail, "the topics can be listed", cluster.error().message(),
                   "grant the principal DESCRIBE on the topics"});
    return out;
  }
  for (const std::string& t : topics_) {
    if (!t.empty() && t[0] == '^') {
      regex_t re;  // as librdkafka matches a subscription: POSIX extended, the ^ included
      if (regcomp(&re, t.c_str(), REG_EXTENDED | REG_NOSUB) != 0) continue;  // finalize refuses it
      size_t n = 0;
      for (const auto& [name, e] : cluster.value().topics)
        if (!name.starts_with("__") && regexec(&re, name.c_str(), 0, nullptr, 0) == 0) ++n;
      regfree(&re);
      const std::string check = fmt::format("topics matching {} exist", t);
      if (n) out.push_back({O::pass, check, fmt::format("{} topic{}", n, n == 1 ? "" : "s"), {}});
      else
        out.push_back({O::warn, check, "no topic matches it yet",
                       "create the topics, or fix the regular expression in `topics`"});
      continue;
    }
    const std::string check = fmt::format("topic '{}' exists", t);
    auto it = cluster.value().topics.find(t);
    if (it == cluster.value().topics.end())
      out.push_back({O::fail, check, "no such topic",
                     fmt::format("create it (kafka-topics.sh --bootstrap-server {} --create "
                                 "--topic {}), or fix `topics`",
                                 brokers_, t)});
    else if (it->second != RD_KAFKA_RESP_ERR_NO_ERROR)
      out.push_back({O::fail, check, rd_kafka_err2str(it->second),
                     "grant the principal READ and DESCRIBE on the topic"});
    else out.push_back({O::pass, check, "it exists", {}});
  }
  const std::string gcheck = fmt::format("consumer group '{}' is free for this pipeline", group);
  auto g = kafka::describe_group(rk.get(), group, connect_timeout_);
  if (!g.ok())
    out.push_back({O::fail, gcheck, g.error().message(),
                   "grant the principal READ and DESCRIBE on the group"});
  else if (g.value().members > 0)
    out.push_back({O::warn, gcheck,
                   fmt::format("state {}, {} member{} consuming now", g.value().state,
                               g.value().members, g.value().members == 1 ? "" : "s"),
                   "a running pipeline, or another consumer sharing the partitions: give this "
                   "pipeline its own `group`"});
  else
    out.push_back({O::pass,
                   gcheck,
                   g.value().state == "Dead" ? std::string("not created yet")
                                             : fmt::format("state {}, no member", g.value().state),
                   {}});
  if (checkpoint && !checkpoint->empty() && !parse_position(*checkpoint))
    out.push_back({O::fail, "the checkpoint is a kafka position", "it is not",
                   "run `sluice cleanup` to start over"});
  return out;
}

Status KafkaSource::handle_error(const rd_kafka_message_t& m) {
  const rd_kafka_resp_err_t err = m.err;
  if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
    if (m.rkt) {
      auto it = assigned_.find({rd_kafka_topic_name(m.rkt), m.partition});
      if (it != assigned_.end()) set_eof(&it->second, true);
    }
    return ok_status();
  }
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char buf[512];
    rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk_.get(), buf, sizeof buf);
    return kafka::error_from(orig, fmt::format("fatal consumer error ({}): ", buf));
  }
  Error e = kafka::error_from(err, "");
  if (e.code() == Errc::auth || e.code() == Errc::permission) return e;
  // Transport errors, a broker restarting, a topic briefly unknown: librdkafka recovers on its own.
  if (should_warn(err)) {
    const char* topic = m.rkt ? rd_kafka_topic_name(m.rkt) : nullptr;
    spdlog::warn("pipeline {}: kafka consumer: {}{} (still polling)", ctx_.pipeline_id,
                 topic ? fmt::format("topic '{}': ", topic) : std::string(),
                 rd_kafka_message_errstr(&m));
  }
  return ok_status();
}

Status KafkaSource::handle_message(const rd_kafka_message_t& m, Batch& batch) {
  // The partition's slot in offsets_.
  int64_t* next = nullptr;
  bool* eof = nullptr;
  for (const Slot& s : slots_) {
    if (s.rkt == m.rkt && s.partition == m.partition) {
      next = s.next;
      eof = s.eof;
      break;
    }
  }
  const char* topic = rd_kafka_topic_name(m.rkt);
  if (next == nullptr) {
    next = &offsets_[topic][m.partition];
    auto it = assigned_.find({topic, m.partition});
    eof = it == assigned_.end() ? nullptr : &it->second;
    slots_.push_back({m.rkt, m.partition, next, eof});
  }
  set_eof(eof, false);
  if (m.offset < *next) return ok_status();  // already read (a fetch replayed after a reassignment)

  kafka::MessageView v;
  v.topic = topic;
  v.partition = m.partition;
  v.offset = m.offset;
  if (m.key) v.key = std::string_view(static_cast<const char*>(m.key), m.key_len);
  if (m.payload) v.value = std::string_view(static_cast<const char*>(m.payload), m.len);
  rd_kafka_timestamp_type_t tstype;
  v.timestamp_ms = rd_kafka_message_timestamp(&m, &tstype);
  headers_.clear();
  rd_kafka_headers_t* h = nullptr;
  if (rd_kafka_message_headers(&m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0;
         rd_kafka_header_get_all(h, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
      headers_.emplace_back(name, value ? std::string_view(static_cast<const char*>(value), size)
                                        : std::string_view());
  }
  v.headers = headers_;
  if (Status st = decoder_.decode(v, batch); !st.ok()) return st;
  *next = m.offset + 1;
  offsets_dirty_ = true;
  if (v.timestamp_ms >= 0) newest_timestamp_ms_ = v.timestamp_ms;
  return ok_status();
}

Result<ReadStatus> KafkaSource::read(Batch& batch, const ReadRequest& req, std::stop_token stop) {
  CurrentScope scope(this);
  rd_kafka_t* rk = rk_.get();
  const auto started = Clock::now();
  Clock::time_point first{}, last{};
  bool idle = false, drained = false;
  while (batch.size() < req.max_records && batch.bytes() < req.max_bytes &&
         !stop.stop_requested()) {
    if (callback_error_) return *std::exchange(callback_error_, std::nullopt);
    int wait_ms = 0;
    if (drained) {
      const auto deadline = batch.empty() ? started + req.poll : req.linger_deadline(first, last);
      const auto now = Clock::now();
      if (now >= deadline) {
        idle = true;
        break;
      }
      wait_ms = int(std::min<int64_t>(
          100, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
    }
    kafka::Message m(rd_kafka_consumer_poll(rk, wait_ms));
    if (!m) {
      drained = true;
      continue;
    }
    drained = false;
    last = Clock::now();
    if (m->err) {
      if (Status st = handle_error(*m); !st.ok()) return st.error();
      continue;
    }
    const size_t before = batch.size();
    if (Status st = handle_message(*m, batch); !st.ok()) return st.error();
    if (before == 0 && batch.size() > 0) first = Clock::now();
  }
  if (callback_error_) return *std::exchange(callback_error_, std::nullopt);
  if (ctx_.stats && newest_timestamp_ms_ >= 0 && !batch.empty()) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    ctx_.stats->lag_ms.store(std::max<int64_t>(0, now_ms - newest_timestamp_ms_),
                             std::memory_order_relaxed);
  }
  if (offsets_dirty_) {
    std::string position = encode_position(offsets_);
    if (!batch.empty() || position != last_position_) {
      batch.set_position(position);
      last_position_ = std::move(position);
    }
    offsets_dirty_ = false;
  }
  // Idle only once the group assigned partitions and every one of them reached its end.
  return idle && !assignment_pending_ && not_at_end_ == 0 ? ReadStatus::idle : ReadStatus::more;
}

void KafkaSource::ack(std::string_view position) {
  auto acked = parse_position(position);
  if (!acked) return;
  std::lock_guard lk(commit_mu_);
  if (closed_ || !rk_) return;
  last_acked_.assign(position);
  kafka::PartitionList list(rd_kafka_topic_partition_list_new(8));
  for (const auto& [topic, parts] : *acked) {
    auto& done = committed_[topic];
    for (const auto& [p, o] : parts) {
      auto it = done.find(p);
      if (it != done.end() && it->second == o) continue;
      done[p] = o;
      rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = o;
    }
  }
  if (list->cnt == 0) return;
  if (rd_kafka_resp_err_t e = rd_kafka_commit(rk_.get(), list.get(), /*async=*/1);
      e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    committed_.clear();
    spdlog::warn(
        "pipeline {}: committing offsets to group '{}' failed: {} (retried with the next acknowledgement)",
        ctx_.pipeline_id, group_, rd_kafka_err2str(e));
  }
}

void KafkaSource::close() noexcept {
  std::unique_lock lk(commit_mu_);
  if (closed_ || !rk_) return;
  closed_ = true;
  // A final synchronous commit of what was acknowledged last (an async one may still be in flight).
  if (auto acked = parse_position(last_acked_); acked && !acked->empty()) {
    kafka::PartitionList list(rd_kafka_topic_partition_list_new(8));
    for (const auto& [topic, parts] : *acked)
      for (const auto& [p, o] : parts)
        rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = o;
    if (rd_kafka_resp_err_t e = rd_kafka_commit(rk_.get(), list.get(), 0);
        e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
      spdlog::warn("pipeline {}: final offset commit to group '{}' failed: {}", ctx_.pipeline_id,
                   group_, rd_kafka_err2str(e));
  }
  lk.unlock();
  {
    CurrentScope scope(this);
    rd_kafka_consumer_close(rk_.get());
  }
  std::lock_guard relock(commit_mu_);
  rk_.reset();
  probe_.unregister();
}

// Deletes the consumer group when sluice named it (sluice-<pipeline id>); a group given in `group`
// may be shared and is kept.
Status KafkaSource::cleanup(const ConnectorContext& ctx) {
  if (!group_setting_.empty()) {
    spdlog::info("kept consumer group '{}': it was given in `group`", group_setting_);
    return ok_status();
  }
  const std::string group = "sluice-" + ctx.pipeline_id;
  auto conf = kafka::make_conf(brokers_, "kafka source", {}, properties_);
  if (!conf.ok()) return std::move(conf).error();
  char err[512];
  rd_kafka_t* raw = rd_kafka_new(RD_KAFKA_PRODUCER, conf->get(), err, sizeof err);
  if (raw == nullptr)
    return Error(Errc::invalid_argument, fmt::format("cannot create a Kafka client: {}", err));
  (void)conf->release();
  kafka::Handle rk(raw);
  if (Status st = kafka::check_reachable(rk.get(), brokers_, connect_timeout_); !st.ok()) return st;
  rd_kafka_DeleteGroup_t* dg = rd_kafka_DeleteGroup_new(group.c_str());
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk.get());
  rd_kafka_DeleteGroups(rk.get(), &dg, 1, nullptr, q);
  rd_kafka_event_t* ev =
      rd_kafka_queue_poll(q, int(std::max<int64_t>(connect_timeout_.count(), 10000)));
  rd_kafka_resp_err_t result = RD_KAFKA_RESP_ERR__TIMED_OUT;
  if (ev != nullptr) {
    result = rd_kafka_event_error(ev);
    if (const rd_kafka_DeleteGroups_result_t* res = rd_kafka_event_DeleteGroups_result(ev)) {
      size_t n = 0;
      const rd_kafka_group_result_t** groups = rd_kafka_DeleteGroups_result_groups(res, &n);
      if (n == 1 && rd_kafka_group_result_error(groups[0]) != nullptr)
        result = rd_kafka_error_code(rd_kafka_group_result_error(groups[0]));
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_DeleteGroup_destroy(dg);
  if (result == RD_KAFKA_RESP_ERR_NO_ERROR) {
    spdlog::info("deleted consumer group '{}'", group);
  } else if (result == RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) {
    spdlog::info("consumer group '{}' does not exist", group);
  } else if (result == RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP) {
    return Error(
        Errc::conflict,
        fmt::format("consumer group '{}' has active members: stop the pipeline first", group));
  } else {
    return kafka::error_from(result, fmt::format("cannot delete consumer group '{}': ", group));
  }
  return ok_status();
}

}  // namespace

namespace kafka {

std::string encode_position(const Offsets& offsets) {
  std::string out;
  for (const auto& [topic, parts] : offsets) {
    if (parts.empty()) continue;
    if (!out.empty()) out += ';';
    out += topic;
    out += ':';
    bool first = true;
    for (const auto& [p, o] : parts) {
      if (!first) out += ',';
      first = false;
      fmt::format_to(std::back_inserter(out), "{}={}", p, o);
    }
  }
  return out;
}

std::optional<Offsets> parse_position(std::string_view text) {
  Offsets out;
  if (text.empty()) return out;
  auto num = [](std::string_view s, auto* v) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(start, end - start);
    const size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    auto& parts = out[std::string(entry.substr(0, colon))];
    std::string_view list = entry.substr(colon + 1);
    size_t s = 0;
    while (s <= list.size()) {
      size_t e = list.find(',', s);
      if (e == std::string_view::npos) e = list.size();
      std::string_view item = list.substr(s, e - s);
      const size_t eq = item.find('=');
      int32_t p;
      int64_t o;
      if (eq == std::string_view::npos || !num(item.substr(0, eq), &p) ||
          !num(item.substr(eq + 1), &o) || o < 0)
        return std::nullopt;
      parts[p] = o;
      s = e + 1;
    }
    start = end + 1;
  }
  return out;
}

}  // namespace kafka

std::span<const SettingSpec> kafka_source_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Source>> make_kafka_source(const Settings& settings) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, settings));
  SLUICE_TRY(finalize(o));
  return std::unique_ptr<Source>(std::make_unique<KafkaSource>(std::move(o)));
}

}  // namespace sluice
