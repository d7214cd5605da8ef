// The kafka destination. write() encodes the whole batch first (a record that cannot become a
// message fails the batch synchronously with a data error, before anything is produced, so the
// runtime can isolate it), then produces every message without copying (the batch's encoded
// buffer lives until its last delivery report). A poller thread serves delivery reports; the batch
// completes when every message of it is acknowledged by the broker, up to four batches overlap.
// With `transactions: true` each batch is one Kafka transaction that also carries the batch's
// source position to `positions.topic`.
#include "connectors/kafka/kafka_destination.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include "connectors/common/debezium_json.h"
#include "connectors/kafka/kafka_common.h"
#include "connectors/kafka/kafka_compression.h"
#include "connectors/record_template.h"
#include "sluice/json.h"
#include "sluice/log_context.h"

namespace sluice {

namespace {

using namespace std::chrono_literals;

// Wall-clock milliseconds since the epoch: Debezium's ts_ms and the messages' CreateTime.
int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

#ifndef SLUICE_VERSION_TEXT
#define SLUICE_VERSION_TEXT "sluice"
#endif

// The destination's options: filled from the settings table below by bind_settings (defaults are
// written there, once), then checked as a whole by finalize().
struct Options {
  std::string brokers;
  std::string topic;
  std::string topic_prefix;
  std::string format;
  bool debezium = false;  // derived by finalize: format is debezium
  std::string compression;
  bool compression_size_check = true;
  int compression_level = -1;  // derived by finalize: rdkafka.compression.level, or the default
  std::string acks;
  std::chrono::milliseconds linger{};
  uint64_t batch_size = 0;
  int64_t batch_num_messages = 0;
  std::chrono::milliseconds delivery_timeout{};
  std::chrono::milliseconds socket_timeout{};
  bool headers = false;
  bool tombstones = false;
  bool transactions = false;
  std::string transactional_id;
  std::string positions_topic;
  std::string tls_mode, tls_ca, tls_cert, tls_key, tls_key_password;
  std::map<std::string, std::string> rdkafka;
};

constexpr auto kSettings = settings_table<Options>(
    setting<&Options::brokers>("brokers", "Bootstrap brokers, host:port[,host:port...].")
        .mandatory(),
    setting<&Options::topic>(
        "topic",
        "Topic of each record: a template where {{schema}}, {{table}} and any {{metadata-key}} are replaced "
        "from the record's metadata. Default, like Debezium: <topic.prefix>.<schema>.<table>, or "
        "<topic.prefix>.<table> when the record has no schema. Characters Kafka does not allow in topic names "
        "become '_'. Missing topics are created by the broker (auto.create.topics.enable)."),
    setting<&Options::topic_prefix>("topic.prefix",
                                    "Prefix of the default topic names. Default: the pipeline id."),
    setting<&Options::format>(
        "format",
        "Message value. opencdc: the OpenCDC JSON record; debezium: the Debezium change-event envelope as "
        "Debezium's JsonConverter writes it with schemas.enable=false (before, after, source, op, ts_ms).")
        .one_of("opencdc,debezium")
        .with_default("opencdc"),
    setting<&Options::compression>(
        "compression",
        "Compression of message batches. lz4 by default: measured against none (1 M rows, "
        "2026-12-04) it cut the broker's CPU by about two thirds and sluice's by a quarter, at the "
        "same or a higher rate.")
        .one_of("none,lz4,zstd,snappy,gzip")
        .with_default("lz4"),
    setting<&Options::compression_size_check>(
        "compression.size_check",
        "With compression: a message above a topic's max.message.bytes before compression is "
        "compressed on its own with the topic's codec (as librdkafka would, "
        "rdkafka.compression.level included), and one still above the limit by more than 32 bytes "
        "is refused before producing (a data error: the dead-letter queue with on_error: dlq); "
        "false: the broker decides (each message it refuses costs the idempotent producer an epoch "
        "bump, and a transaction its abort).")
        .with_default("true"),
    setting<&Options::acks>(
        "acks",
        "Acknowledgements the leader waits for. all: every in-sync replica (with the idempotent producer: no "
        "loss, no duplicates, order kept per partition across retries); 1: the leader only; 0: none (may lose "
        "messages).")
        .one_of("all,1,0")
        .with_default("all"),
    setting<&Options::linger>("linger",
                              "How long the producer waits to fill a message batch (linger.ms).")
        .with_default("5ms"),
    setting<&Options::batch_size>("batch.size",
                                  "Largest message batch per partition, in bytes (batch.size). "
                                  "Lowered to just below a topic's max.message.bytes when that "
                                  "is smaller (the broker refuses larger record batches).")
        .with_default("1MiB"),
    setting<&Options::batch_num_messages>(
        "batch.num.messages", "Most messages in one message batch (batch.num.messages).")
        .with_default("10000")
        .at_least(1),
    setting<&Options::delivery_timeout>(
        "delivery.timeout",
        "How long a message may wait for its acknowledgement, retries included (message.timeout.ms); broker "
        "restarts shorter than this are absorbed by the producer's own in-order retries, longer outages stop "
        "the pipeline (a restart re-sends from the checkpoint).")
        .with_default("300s"),
    setting<&Options::socket_timeout>(
        "socket_timeout",
        "How long a request to a broker may wait for its answer before librdkafka takes the connection for dead (a partition, a broker that stopped answering but keeps TCP open), closes it and reconnects (socket.timeout.ms); TCP keepalives are on (socket.keepalive.enable). Messages in flight are retried on the new connection (idempotent producer, in order); "
        "with transactions on, a transaction the broker aborts meanwhile fails the batch, which is "
        "written again in a new transaction.")
        .with_default("30s")
        .at_least(10),
    setting<&Options::headers>(
        "headers",
        "Write the record's metadata as message headers (one header per metadata key). Default: "
        "true with format opencdc, false with format debezium (Debezium writes none)."),
    setting<&Options::tombstones>(
        "debezium.tombstones",
        "format debezium: after each delete, a tombstone (same key, null value) so log compaction can drop "
        "the key, like Debezium's tombstones.on.delete.")
        .with_default("true"),
    setting<&Options::transactions>(
        "transactions",
        "Exactly once: one Kafka transaction per batch, committed together with the batch's source position "
        "(in positions.topic); a restart resumes exactly after the last committed batch. Consumers must read "
        "with isolation.level=read_committed.")
        .with_default("false"),
    setting<&Options::transactional_id>(
        "transactional.id",
        "transactions: the producer's transactional.id; a new incarnation fences the previous one and aborts "
        "its open transaction. Default: sluice-<pipeline id>."),
    setting<&Options::positions_topic>(
        "positions.topic",
        "transactions: the compacted topic (1 partition, created if missing) holding each pipeline's last "
        "committed source position, keyed by the pipeline id.")
        .with_default("sluice_positions"),
    setting<&Options::tls_mode>("tls.mode", kafka::kTlsModeDoc)
        .one_of(kafka::kTlsModeChoices)
        .with_default("disabled"),
    setting<&Options::tls_ca>("tls.ca", kTlsCaDoc).file_path(),
    setting<&Options::tls_cert>("tls.cert", kTlsCertDoc).file_path(),
    setting<&Options::tls_key>("tls.key", kTlsKeyDoc).file_path(),
    setting<&Options::tls_key_password>("tls.key_password", kTlsKeyPasswordDoc).secret_value(),
    setting<&Options::rdkafka>(
        "rdkafka.*",
        "Any librdkafka producer property, passed through (rdkafka.security.protocol: "
        "SASL_SSL, rdkafka.message.max.bytes: 2000000, ...); wins over the settings "
        "above."));

// Kafka topic names: [a-zA-Z0-9._-], at most 249 characters.
void sanitize_topic(std::string& t) {
  for (char& c : t) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (t.size() > 249) t.resize(249);
}

// A record batch of one message: the batch header (61 bytes) and the record's framing (length,
// attributes, timestamp and offset deltas, key and value lengths, header count and lengths).
constexpr size_t kRecordBatchOverhead = 61 + 40;

// A compressed record batch of one message: the batch header, outside the compressed part; the
// record's own framing (a few varints) is inside it. A message is refused before producing only
// when its batch, estimated without that framing, is above the topic's limit by more than the
// margin, so an estimate a few bytes off never refuses a message the broker would take.
constexpr size_t kCompressedBatchHeader = 61;
constexpr size_t kCompressedMargin = 32;

// Encoded messages live in 1 MiB chunks; a chunk is freed as soon as the last message in it is
// delivered, so a batch's memory shrinks while the broker acknowledges it.
struct Chunk {
  static constexpr size_t kSize = 1 << 20;
  std::unique_ptr<char[]> data;
  size_t cap = 0, used = 0;
  std::atomic<uint32_t> pending{0};  // messages pointing into it, not yet delivered
};

struct BatchState;

// One message of a batch; librdkafka's opaque for its delivery report.
struct Msg {
  BatchState* st;
  Chunk* chunk;  // nullptr: the position message (copied by librdkafka)
  rd_kafka_topic_t* topic;
  const char* key;  // nullptr: null key
  char* value;      // nullptr: null value (tombstone)
  uint32_t key_len, value_len;
  uint32_t rec;  // record index (headers)
};

// The producer handle's opaque: what its callbacks report to the destination.
struct ProducerEvents {
  ConnectionProbe* probe = nullptr;
  // Times librdkafka put the current transaction in its abortable error state (its TXNERR log
  // line, the only sign of it: a message behind a refused one may never get a delivery report
  // before the abort).
  std::atomic<uint64_t> txn_errors{0};
};

// librdkafka's own log: connection failures it retries by itself are warnings (a delivery that
// finally fails stops the pipeline with one error line); during open() only critical lines show,
// so unreachable brokers give exactly one error, from check_reachable.
void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  if (std::strcmp(fac, "TXNERR") == 0)
    if (auto* ev = static_cast<ProducerEvents*>(rd_kafka_opaque(rk)))
      ev->txn_errors.fetch_add(1, std::memory_order_acq_rel);
  if (level <= 4) spdlog::warn("kafka destination: librdkafka {}: {}", fac, buf);
  else if (level <= 6) spdlog::info("kafka destination: librdkafka {}: {}", fac, buf);
  else spdlog::debug("kafka destination: librdkafka {}: {}", fac, buf);
}
// The handle's opaque is the destination's ProducerEvents: its connection probe (kafka_common.h:
// what librdkafka's error and statistics callbacks say about the brokers), served by the poller
// thread, and the transaction errors log_cb counts.
void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  if (opaque != nullptr)
    kafka::report_broker_error(*static_cast<ProducerEvents*>(opaque)->probe, err);
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char why[512];
    rd_kafka_fatal_error(rk, why, sizeof why);
    spdlog::warn("kafka destination: producer fatal error: {}", why);
    return;
  }
  spdlog::debug("kafka destination: {} ({})", reason, rd_kafka_err2name(rd_kafka_resp_err_t(err)));
}

int stats_cb(rd_kafka_t*, char* json, size_t json_len, void* opaque) {
  if (opaque != nullptr)
    kafka::report_broker_stats(*static_cast<ProducerEvents*>(opaque)->probe,
                               std::string_view(json, json_len));
  return 0;  // librdkafka frees the document
}

class KafkaDestination;

// The delivery state of one batch, freed when its last delivery report arrived.
struct BatchState {
  KafkaDestination* owner = nullptr;
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::vector<Msg> msgs;
  Msg position_msg{};
  std::atomic<size_t> outstanding{0};
  std::mutex mu;
  std::optional<Error> error;
  // The first message the broker refused (a data error): what the batch reports, ahead of errors
  // that followed from it (a transaction's purged messages), so the runtime can isolate it.
  std::optional<Error> refusal;
  // Set at the first refused message, for a transaction's writer: the messages behind a refused
  // one stay queued (their sequence cannot follow it) until an abort purges them, so a commit,
  // or waiting for their reports, would last until delivery.timeout.
  std::shared_ptr<std::atomic<bool>> refused_flag = std::make_shared<std::atomic<bool>>(false);
  // write_isolating: a record's own delivery failure (the broker refused its message) is kept
  // here, by record index, instead of failing the batch.
  bool isolate = false;
  std::vector<RejectedRecord> refused;
  std::vector<RejectedRecord>* refused_sink = nullptr;  // where finish() moves them
  WriteDone done;
};

class KafkaDestination final : public Destination {
 public:
  explicit KafkaDestination(Options o) : o_(std::move(o)) {}
  ~KafkaDestination() override { close(); }

  Status open(const ConnectorContext& ctx) override;
  Result<std::vector<DoctorCheck>> doctor(const ConnectorContext& ctx,
                                          const std::vector<SourceTable>& tables) override;
  void write(Batch& batch, WriteDone done) override;
  // Four batches in flight, not two: the last messages of a batch wait linger.ms in librdkafka
  // before they are sent, so with two batches of 1,000 the writer spent much of its time waiting
  // for acknowledgements. Measured 2026-12-06 (1 M rows, this 2-core machine): generator → Kafka
  // 1.28–1.50 s against 1.83–1.85 s, MySQL snapshot → Kafka 52 % of the producer ceiling against
  // 40 %, for 2–5 MB more peak RSS (PostgreSQL CDC → Kafka 38.2 MB against 36.6 MB). Six or eight
  // were no faster and held more memory.
  size_t max_in_flight() const noexcept override { return o_.transactions ? 1 : 4; }
  // librdkafka batches messages on its own (batch.num.messages, linger), so the runtime's batches
  // only hold memory: 1,000 records keep the rate of 5,000 at a little over half the peak RSS and
  // less CPU (PostgreSQL CDC 1 M rows → Kafka: 35–37 MB vs 67 MB; generator: 30 MB vs 55 MB, 2.9
  // vs 4.8 CPU-s). With transactions each batch is a commit that waits for the broker: 5,000.
  size_t preferred_max_records() const noexcept override { return o_.transactions ? 5000 : 1000; }
  Status flush(std::chrono::milliseconds timeout) override;
  void close() noexcept override;
  bool stores_positions() const noexcept override { return o_.transactions; }
  Result<std::optional<std::string>> stored_position(std::string_view pipeline_id) override;
  Status erase_stored_position(std::string_view pipeline_id) override;
  // Dead-letter isolation in one pass: every message is produced once and its own delivery report
  // says whether the broker took it (with transactions: the transaction is aborted and written
  // again without the refused records).
  bool isolates_rejected_records() const noexcept override { return true; }
  Status write_isolating(Batch& batch, bool commit_position,
                         std::vector<RejectedRecord>& rejected) override;

 private:
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque);
  void message_done(BatchState* st, const Msg* msg, rd_kafka_resp_err_t err, const char* topic);
  void finish(BatchState* st);
  // `refused`: (write_isolating) a record whose message cannot be built is appended there and
  // left out, instead of failing the batch; records whose index is in `skip` are left out.
  Status encode(Batch& batch, BatchState& st, std::vector<RejectedRecord>* refused = nullptr,
                const std::vector<bool>* skip = nullptr);
  // One isolating pass: produces the batch's messages (less `skip`); `delivered` completes once
  // every delivery report is in (with the batch-wide error, if any), the refused records are
  // then in `refused`.
  struct Isolating {
    std::future<Status> delivered;
    bool all_produced = true;
    std::shared_ptr<std::atomic<bool>> refused;  // a message was refused
  };
  Result<Isolating> start_isolating(Batch& batch, const std::vector<bool>& skip,
                                    const std::string* position,
                                    std::vector<RejectedRecord>& refused);
  rd_kafka_topic_t* topic_handle(std::string_view name);
  // Produces every message of `st` (and the position message, if any); returns the number not
  // handed to librdkafka (already failed into st->error).
  size_t produce_all(Batch& batch, BatchState* st, const std::string* position);
  void write_transaction(Batch& batch, WriteDone done);
  BatchState* new_state();
  void release_state(BatchState* st);
  Status ensure_positions_topic();
  Status txn_error(rd_kafka_error_t* e, std::string_view what);
  // Creates the producer (and, with transactions, initialises them: a new incarnation with the
  // same transactional.id fences the previous one and aborts its open transaction).
  Status create_producer();
  // Aborts the open transaction. librdkafka 2.0's abort purges the queued messages, then waits
  // for every outstanding one; a message still in flight at the purge that the broker answers
  // with a retriable error (OUT_OF_ORDER_SEQUENCE_NUMBER behind a refused message) is queued
  // again, after the purge, and is never sent while the transaction waits for its abort, so
  // the abort's wait lasts until delivery.timeout. An abort that times out goes on in the
  // background and is resumed by calling it again (any other transactional call is refused
  // with _CONFLICT meanwhile): each round purges the queue again and resumes, up to 60 s.
  Status abort_txn(std::string_view what);
  // After an abort that failed: every message purged (their delivery reports complete the
  // batches in flight), the producer destroyed and created again with the same
  // transactional.id, which fences the old incarnation and aborts its transaction on the
  // broker. A fenced producer (another instance took the transactional.id) is not re-created.
  Status recreate_producer(const Status& why);
  // The topic's own limits (DescribeConfigs, cached; learned again after a refusal).
  struct TopicLimits {
    size_t max_message_bytes = 0;  // 0: unknown (the topic does not exist yet)
    bool compacted = false;
  };
  const TopicLimits& topic_limits(const std::string& name);
  struct TopicMemo {
    const Field* fields = nullptr;
    uint32_t size = 0;
  };
  // The topic of `r`, into topic_buf_. `memo` starts null for each batch: records of one batch
  // that share their metadata object (a snapshot chunk's rows do) share the name, rendered once.
  void render_topic(const Record& r, TopicMemo& memo);
  // The size of `r`'s message (key, value, headers) under the compression codec; 0 if unknown.
  size_t compressed_message_size(const Record& r, std::string_view key, std::string_view value);
  // Before a batch is encoded: each of its topics' limits known, and the producer re-created
  // with a smaller batch.size when a topic needs one (between batches, never inside a
  // transaction).
  Status prepare_topics(Batch& batch);

  Options o_;
  std::string pipeline_id_;
  kafka::Handle rk_;
  size_t max_message_bytes_ = 1000000;
  std::map<std::string, std::string> producer_defaults_;  // open(): the producer's properties
  std::unordered_map<std::string, rd_kafka_topic_t*> topics_;
  std::unordered_map<std::string, TopicLimits> topic_limits_;
  std::mutex stale_mu_;
  std::vector<std::string> stale_topics_;  // refused a message as too large: limits re-read
  uint64_t current_batch_size_ = 0;        // the producer's batch.size
  uint64_t wanted_batch_size_ = 0;  // set by topic_limits: re-create the producer with this one
  std::string topic_buf_;
  std::optional<RecordTemplate> template_;
  std::thread poller_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;  // in-flight batch count changed, or a delivery freed queue space
  size_t in_flight_ = 0;
  std::atomic<bool> waiting_for_space_{false};  // write() waits for librdkafka's queue to drain
  std::string scratch_;                         // one message being encoded (writer thread)
  bool closed_ = false;
  ConnectionProbe probe_;           // sluice_destination_connected{…,connector="kafka"}, …
  ProducerEvents events_{&probe_};  // the producer's opaque
};

Status KafkaDestination::open(const ConnectorContext& ctx) {
  pipeline_id_ = ctx.pipeline_id;
  if (o_.topic_prefix.empty()) o_.topic_prefix = pipeline_id_;
  if (!o_.topic.empty()) {
    auto t = RecordTemplate::parse(o_.topic, "topic");
    if (!t.ok()) return std::move(t).error();
    template_ = std::move(t.value());
  }
  std::map<std::string, std::string> defaults = {
      {"acks", o_.acks},
      {"compression.codec", o_.compression},
      {"linger.ms", std::to_string(o_.linger.count())},
      {"batch.size", std::to_string(o_.batch_size)},
      {"batch.num.messages", std::to_string(o_.batch_num_messages)},
      {"message.timeout.ms", std::to_string(o_.delivery_timeout.count())},
      {"queue.buffering.max.kbytes", "65536"},
      {"statistics.interval.ms", kafka::kBrokerStatsInterval},  // broker state for the probe
      // A dead connection (no answer, TCP still open) is closed and reconnected.
      {"socket.timeout.ms", std::to_string(o_.socket_timeout.count())},
      {"socket.keepalive.enable", "true"},
  };
  if (o_.acks == "all") defaults["enable.idempotence"] = "true";
  if (o_.transactions) {
    defaults["transactional.id"] =
        o_.transactional_id.empty() ? "sluice-" + pipeline_id_ : o_.transactional_id;
    defaults["enable.idempotence"] = "true";
    defaults["acks"] = "all";
    // librdkafka requires message.timeout.ms <= transaction.timeout.ms (the broker caps the latter
    // at transaction.max.timeout.ms, 15 minutes by default).
    defaults["transaction.timeout.ms"] =
        std::to_string(std::max<int64_t>(60000, o_.delivery_timeout.count()));
  }
  producer_defaults_ = std::move(defaults);
  current_batch_size_ = o_.batch_size;
  probe_.register_into(ctx, "destination", /*with_phase=*/false);
  SLUICE_TRY(create_producer());
  spdlog::info("kafka destination: producing to {} (format {}, {}{})", o_.brokers,
               o_.debezium ? "debezium" : "opencdc",
               o_.transactions ? "transactional" : "idempotent",
               o_.acks == "all" ? "" : ", acks=" + o_.acks);
  return ok_status();
}

// `sluice doctor`: a plain producer (no transactions, nothing produced) asks the cluster for its
// topics and their configuration; with transactions, a second producer with a throwaway
// transactional.id initialises transactions, which needs the same grants as the pipeline's own.
Result<std::vector<DoctorCheck>> KafkaDestination::doctor(const ConnectorContext& ctx,
                                                          const std::vector<SourceTable>& tables) {
  using O = DoctorCheck::Outcome;
  std::vector<DoctorCheck> out;
  if (o_.topic_prefix.empty()) o_.topic_prefix = ctx.pipeline_id;
  auto new_producer = [&](std::map<std::string, std::string> defaults) -> Result<kafka::Handle> {
    defaults.emplace("log_level", "2");
    defaults.emplace("socket.timeout.ms", std::to_string(o_.socket_timeout.count()));
    SLUICE_TRY_ASSIGN(kafka::Conf conf,
                      kafka::make_conf(o_.brokers, "kafka destination", defaults, o_.rdkafka));
    char err[512];
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
    if (!rk) return Error(Errc::invalid_argument, fmt::format("cannot create a producer: {}", err));
    (void)conf.release();
    return kafka::Handle(rk);
  };
  SLUICE_TRY_ASSIGN(kafka::Handle rk, new_producer({}));
  const std::string reach = "the brokers answer";
  if (Status st = kafka::check_reachable(rk.get(), o_.brokers, 10s); !st.ok()) {
    out.push_back({O::fail, reach, st.error().message(),
                   "check `brokers`, the tls.* settings and that Kafka is running"});
    return out;
  }
  out.push_back({O::pass, reach, o_.brokers, {}});
  auto cluster = kafka::list_topics(rk.get(), 10s);
  if (!cluster.ok()) {
    out.push_back({O::fail, "the topics can be listed", cluster.error().message(),
                   "grant the principal DESCRIBE on the topics"});
    return out;
  }
  const auto& topics = cluster.value().topics;
  // Whether the brokers create a topic at its first message.
  std::optional<bool> auto_create;
  if (cluster.value().broker >= 0) {
    auto b = kafka::describe_config(rk.get(), RD_KAFKA_RESOURCE_BROKER,
                                    std::to_string(cluster.value().broker), 10s);
    if (b.ok() && b.value().count("auto.create.topics.enable"))
      auto_create = b.value().at("auto.create.topics.enable") == "true";
  }

  // The topics the source's tables go to: known when `topic` uses no metadata but the table's.
  std::vector<std::string> names;
  const bool fixed = o_.topic.find("{{") == std::string::npos;
  bool knowable = o_.topic.empty() || fixed;
  if (!knowable) {
    std::string rest = o_.topic;
    for (const char* p : {"{{schema}}", "{{table}}"})
      for (size_t at; (at = rest.find(p)) != std::string::npos;) rest.erase(at, std::strlen(p));
    knowable = rest.find("{{") == std::string::npos;
  }
  if (!o_.topic.empty() && fixed) {
    names.push_back(o_.topic);
  } else if (knowable) {
    for (const SourceTable& t : tables) {
      std::string name;
      if (o_.topic.empty()) {
        name = o_.topic_prefix;
        if (!t.schema.empty()) (name += '.') += t.schema;
        (name += '.') += t.table;
      } else {
        name = o_.topic;
        for (auto [p, v] :
             {std::pair<std::string_view, const std::string*>{"{{schema}}", &t.schema},
              {"{{table}}", &t.table}})
          for (size_t at; (at = name.find(p)) != std::string::npos;) name.replace(at, p.size(), *v);
      }
      sanitize_topic(name);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  if (!knowable || (names.empty() && !tables.empty()))
    out.push_back({O::warn, "the topics can be written",
                   "`topic` names record metadata: the topics are known only once records arrive",
                   "create the topics beforehand, or let the brokers create them "
                   "(auto.create.topics.enable)"});
  for (const std::string& name : names) {
    const std::string check = fmt::format("topic '{}' exists or can be created", name);
    auto it = topics.find(name);
    if (it == topics.end()) {
      if (auto_create.value_or(true))
        out.push_back({O::pass,
                       check,
                       auto_create ? "not created yet; the brokers create it at the first message "
                                     "(auto.create.topics.enable = true)"
                                   : "not created yet (auto.create.topics.enable unknown)",
                       {}});
      else
        out.push_back({O::fail, check, "it does not exist and auto.create.topics.enable = false",
                       fmt::format("create it: kafka-topics.sh --bootstrap-server {} --create "
                                   "--topic {}",
                                   o_.brokers, name)});
      continue;
    }
    if (it->second != RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.push_back({O::fail, check, rd_kafka_err2str(it->second),
                     "grant the principal WRITE and DESCRIBE on the topic"});
      continue;
    }
    auto config = kafka::describe_config(rk.get(), RD_KAFKA_RESOURCE_TOPIC, name, 10s);
    const std::string policy = config.ok() && config.value().count("cleanup.policy")
                                   ? config.value().at("cleanup.policy")
                                   : "unknown";
    out.push_back({O::pass, check, fmt::format("exists, cleanup.policy = {}", policy), {}});
  }

  if (o_.transactions) {
    const std::string check = fmt::format("positions topic '{}' is compacted", o_.positions_topic);
    auto it = topics.find(o_.positions_topic);
    if (it == topics.end()) {
      out.push_back({O::pass,
                     check,
                     "not created yet; the first run creates it (1 partition, "
                     "cleanup.policy = compact)",
                     {}});
    } else {
      auto config =
          kafka::describe_config(rk.get(), RD_KAFKA_RESOURCE_TOPIC, o_.positions_topic, 10s);
      if (!config.ok()) {
        out.push_back({O::fail, check, config.error().message(),
                       "grant the principal DESCRIBE_CONFIGS on the topic"});
      } else {
        const std::string policy = config.value().count("cleanup.policy")
                                       ? config.value().at("cleanup.policy")
                                       : "unknown";
        if (policy.find("compact") != std::string::npos &&
            policy.find("delete") == std::string::npos)
          out.push_back({O::pass, check, "cleanup.policy = " + policy, {}});
        else
          out.push_back(
              {O::fail, check,
               fmt::format("cleanup.policy = {}: the brokers may delete a pipeline's last "
                           "position, and a restart would then start over",
                           policy),
               fmt::format("kafka-configs.sh --bootstrap-server {} --alter --entity-type topics "
                           "--entity-name {} --add-config cleanup.policy=compact",
                           o_.brokers, o_.positions_topic)});
      }
    }
    // Transactions with a throwaway id: the coordinator accepts the principal's transactional
    // writes (the pipeline's own id is left alone: initialising it would fence a running one).
    const std::string id = fmt::format("sluice-doctor-{}-{}", ctx.pipeline_id, ::getpid());
    const std::string tcheck = "the principal may use transactions";
    auto trk =
        new_producer({{"transactional.id", id}, {"enable.idempotence", "true"}, {"acks", "all"}});
    if (!trk.ok()) return std::move(trk).error();
    std::thread poller;
    std::atomic<bool> done{false};
    poller = std::thread([&] {
      while (!done.load()) rd_kafka_poll(trk.value().get(), 100);
    });
    rd_kafka_error_t* e = rd_kafka_init_transactions(trk.value().get(), 30000);
    done = true;
    poller.join();
    if (e == nullptr) {
      out.push_back({O::pass,
                     tcheck,
                     fmt::format("init_transactions with the transactional.id '{}'", id),
                     {}});
    } else {
      out.push_back(
          {O::fail, tcheck,
           fmt::format("init_transactions with the transactional.id '{}': {}", id,
                       rd_kafka_error_string(e)),
           "grant the principal WRITE and DESCRIBE on the transactional ids (kafka-acls.sh --add "
           "--operation Write --operation Describe --transactional-id sluice- "
           "--resource-pattern-type prefixed) and IDEMPOTENT_WRITE on the cluster; the brokers "
           "need transaction.state.log.replication.factor <= their number"});
      rd_kafka_error_destroy(e);
    }
  }
  return out;
}

size_t KafkaDestination::compressed_message_size(const Record& r, std::string_view key,
                                                 std::string_view value) {
  std::vector<std::string_view> parts{key, value};
  if (o_.headers && r.metadata.is_object())
    for (const Field& f : r.metadata.fields()) {
      parts.push_back(f.name);
      parts.push_back(f.value.as_text());
    }
  return kafka::compressed_size(o_.compression, o_.compression_level, parts).value_or(0);
}

Status KafkaDestination::create_producer() {
  auto conf = kafka::make_conf(o_.brokers, "kafka destination", producer_defaults_, o_.rdkafka);
  if (!conf.ok()) return std::move(conf).error();
  {
    char buf[64];
    size_t n = sizeof buf;
    if (rd_kafka_conf_get(conf->get(), "message.max.bytes", buf, &n) == RD_KAFKA_CONF_OK)
      max_message_bytes_ = std::strtoull(buf, nullptr, 10);
  }
  rd_kafka_conf_set_dr_msg_cb(conf->get(), &KafkaDestination::on_delivery);
  rd_kafka_conf_set_log_cb(conf->get(), &log_cb);
  rd_kafka_conf_set_error_cb(conf->get(), &error_cb);
  rd_kafka_conf_set_stats_cb(conf->get(), &stats_cb);
  // The opaque (make_conf's connector name, read only by its log callback, replaced by log_cb
  // above) becomes the ProducerEvents the callbacks report to.
  rd_kafka_conf_set_opaque(conf->get(), &events_);
  if (!o_.rdkafka.count("log_level")) (void)kafka::set_property(conf->get(), "log_level", "2");
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf->get(), err, sizeof err);
  if (!rk) return Error(Errc::invalid_argument, fmt::format("cannot create the producer: {}", err));
  (void)conf->release();  // owned by the handle now
  rk_.reset(rk);
  if (Status st = kafka::check_reachable(rk_.get(), o_.brokers, 10s); !st.ok()) {
    rk_.reset();  // the next batch tries again (prepare_topics)
    return st;
  }
  probe_.connected();
  if (!o_.rdkafka.count("log_level")) rd_kafka_set_log_level(rk_.get(), 6);
  stop_ = false;
  poller_ = std::thread([this] {
    LogScope log_scope(pipeline_id_, "kafka");  // delivery reports and errors are logged here
    while (!stop_.load(std::memory_order_relaxed)) rd_kafka_poll(rk_.get(), 100);
  });
  if (o_.transactions) {
    auto fail = [this](Status st) {
      stop_ = true;
      if (poller_.joinable()) poller_.join();
      rk_.reset();  // the next batch tries again (prepare_topics)
      return st;
    };
    if (Status st = ensure_positions_topic(); !st.ok()) return fail(st);
    // Fences a previous incarnation with the same transactional.id and aborts its open transaction.
    if (rd_kafka_error_t* e = rd_kafka_init_transactions(rk_.get(), 60000))
      return fail(txn_error(e, "initialising transactions"));
  }
  return ok_status();
}

Status KafkaDestination::abort_txn(std::string_view what) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    rd_kafka_error_t* e = rd_kafka_abort_transaction(rk_.get(), 2000);
    if (e == nullptr) return ok_status();
    const bool resumable = rd_kafka_error_is_retriable(e) && !rd_kafka_error_is_fatal(e);
    if (!resumable || std::chrono::steady_clock::now() >= until) return txn_error(e, what);
    spdlog::debug("kafka destination: {}: {}; purging the queue again and resuming the abort", what,
                  rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE);
  }
}

Status KafkaDestination::recreate_producer(const Status& why) {
  if (rk_) {
    char reason[512];
    // Every message gets its delivery report (purged), so no batch waits for one any more.
    rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    if (rd_kafka_fatal_error(rk_.get(), reason, sizeof reason) == RD_KAFKA_RESP_ERR__FENCED)
      return Error(Errc::conflict,
                   fmt::format("the producer was fenced by another one with the same "
                               "transactional.id ({}): stop the other pipeline, or give this one "
                               "its own transactional.id",
                               reason));
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, 30s, [&] { return in_flight_ == 0; }))
        return Error(Errc::internal, "kafka destination: batches still in flight after a purge");
    }
    stop_ = true;
    if (poller_.joinable()) poller_.join();
    for (auto& [name, t] : topics_) rd_kafka_topic_destroy(t);
    topics_.clear();
    rk_.reset();
  }
  spdlog::warn(
      "kafka destination: re-creating the producer after {} (the same transactional.id fences "
      "the old one; its transaction is aborted)",
      why.ok() ? std::string("an error") : why.error().message());
  return create_producer();
}

const KafkaDestination::TopicLimits& KafkaDestination::topic_limits(const std::string& name) {
  {
    std::lock_guard lock(stale_mu_);
    for (const std::string& t : stale_topics_) topic_limits_.erase(t);
    stale_topics_.clear();
  }
  auto it = topic_limits_.find(name);
  if (it != topic_limits_.end()) return it->second;
  TopicLimits lim;
  char err[512];
  rd_kafka_ConfigResource_t* res =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, name.c_str());
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk_.get());
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk_.get(), RD_KAFKA_ADMIN_OP_ANY);
  rd_kafka_AdminOptions_set_request_timeout(opts, 10000, err, sizeof err);
  rd_kafka_DescribeConfigs(rk_.get(), &res, 1, opts, q);
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 15000)) {
    const rd_kafka_DescribeConfigs_result_t* r = rd_kafka_event_DescribeConfigs_result(ev);
    size_t n = 0;
    const rd_kafka_ConfigResource_t** rs =
        r ? rd_kafka_DescribeConfigs_result_resources(r, &n) : nullptr;
    if (rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1 &&
        rd_kafka_ConfigResource_error(rs[0]) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      size_t m = 0;
      const rd_kafka_ConfigEntry_t** es = rd_kafka_ConfigResource_configs(rs[0], &m);
      for (size_t i = 0; i < m; ++i) {
        const char* k = rd_kafka_ConfigEntry_name(es[i]);
        const char* v = rd_kafka_ConfigEntry_value(es[i]);
        if (!k || !v) continue;
        if (std::strcmp(k, "max.message.bytes") == 0)
          lim.max_message_bytes = std::strtoull(v, nullptr, 10);
        else if (std::strcmp(k, "cleanup.policy") == 0)
          lim.compacted = std::strstr(v, "compact") != nullptr;
      }
    } else {
      spdlog::debug("kafka destination: no configuration for topic '{}' (not created yet?)", name);
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_queue_destroy(q);
  rd_kafka_ConfigResource_destroy(res);
  // The broker refuses a whole record batch above the topic's limit (a batch of several small
  // messages too): the producer's batch.size must stay below it, or every message of such a
  // batch would be refused. The producer is re-created with a smaller batch.size before the
  // next batch is produced (prepare_topics), unless rdkafka.batch.size says otherwise.
  if (lim.max_message_bytes != 0 && o_.rdkafka.count("batch.size") &&
      std::strtoull(o_.rdkafka.at("batch.size").c_str(), nullptr, 10) > lim.max_message_bytes)
    spdlog::warn(
        "kafka destination: topic '{}' takes record batches of at most {} bytes (its "
        "max.message.bytes), below rdkafka.batch.size: the broker refuses a larger batch of "
        "small messages as a whole (with on_error: dlq all of them go to the dead-letter "
        "queue); lower rdkafka.batch.size or leave it unset",
        name, lim.max_message_bytes);
  if (lim.max_message_bytes != 0 && !o_.rdkafka.count("batch.size")) {
    const uint64_t fits = lim.max_message_bytes > 512
                              ? lim.max_message_bytes - 256
                              : std::max<uint64_t>(1, lim.max_message_bytes / 2);
    if (fits < current_batch_size_) {
      current_batch_size_ = fits;
      wanted_batch_size_ = fits;
      spdlog::info(
          "kafka destination: topic '{}' takes record batches of at most {} bytes (its "
          "max.message.bytes): batch.size lowered to {} B",
          name, lim.max_message_bytes, fits);
    }
  }
  return topic_limits_.emplace(name, lim).first->second;
}

Status KafkaDestination::txn_error(rd_kafka_error_t* e, std::string_view what) {
  const bool retriable = rd_kafka_error_is_retriable(e) || rd_kafka_error_txn_requires_abort(e);
  Error out = kafka::error_from(rd_kafka_error_code(e), fmt::format("{}: ", what));
  std::string msg = out.message();
  if (rd_kafka_error_is_fatal(e))
    msg +=
        " (fatal: the producer was fenced by a newer one with the same transactional.id, or cannot go on; "
        "restart the pipeline)";
  Error result(out.code(), msg, retriable);
  rd_kafka_error_destroy(e);
  return result;
}

Status KafkaDestination::ensure_positions_topic() {
  char err[512];
  rd_kafka_NewTopic_t* nt =
      rd_kafka_NewTopic_new(o_.positions_topic.c_str(), 1, -1, err, sizeof err);
  if (!nt) return Error(Errc::invalid_argument, fmt::format("positions.topic: {}", err));
  rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk_.get());
  rd_kafka_CreateTopics(rk_.get(), &nt, 1, nullptr, q);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30000);
  Status out = ok_status();
  if (!ev) {
    out = Error(Errc::timeout,
                fmt::format("creating positions topic '{}' timed out", o_.positions_topic), true);
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t** tr =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && n == 1) e = rd_kafka_topic_result_error(tr[0]);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
      out =
          kafka::error_from(e, fmt::format("creating positions topic '{}': ", o_.positions_topic));
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  return out;
}

rd_kafka_topic_t* KafkaDestination::topic_handle(std::string_view name) {
  auto it = topics_.find(std::string(name));
  if (it != topics_.end()) return it->second;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk_.get(), std::string(name).c_str(), nullptr);
  if (t) topics_.emplace(std::string(name), t);
  return t;
}

void KafkaDestination::render_topic(const Record& r, TopicMemo& memo) {
  // The batch's arena is not reused while it is being written: one metadata object, one topic.
  const bool shared = r.metadata.is_object() && r.metadata.size() > 0;
  if (shared && memo.fields == r.metadata.fields().data() && memo.size == r.metadata.size()) return;
  memo = shared ? TopicMemo{r.metadata.fields().data(), r.metadata.size()} : TopicMemo{};
  if (template_) {
    template_->render(r, topic_buf_, kDefaultTableName);
  } else {
    topic_buf_ = o_.topic_prefix;
    std::string_view schema = metadata_text(r, meta::kSchema);
    if (!schema.empty()) (topic_buf_ += '.') += schema;
    (topic_buf_ += '.') += RecordTemplate::table_of(r);
  }
  sanitize_topic(topic_buf_);
}

Status KafkaDestination::prepare_topics(Batch& batch) {
  if (!rk_) SLUICE_TRY(create_producer());  // re-creating it failed before
  std::string last;
  TopicMemo memo;
  for (const Record& r : batch.records()) {
    render_topic(r, memo);
    if (topic_buf_ == last) continue;
    last = topic_buf_;
    (void)topic_limits(last);
  }
  if (wanted_batch_size_ == 0) return ok_status();
  const uint64_t size = std::exchange(wanted_batch_size_, 0);
  // Batches in flight are delivered first (the producer is not purged); with transactions none
  // is open between batches.
  SLUICE_TRY(flush(std::chrono::milliseconds(o_.delivery_timeout.count() + 5000)));
  stop_ = true;
  if (poller_.joinable()) poller_.join();
  for (auto& [name, t] : topics_) rd_kafka_topic_destroy(t);
  topics_.clear();
  rk_.reset();
  producer_defaults_["batch.size"] = std::to_string(size);
  spdlog::info("kafka destination: producer re-created with batch.size {} B", size);
  return create_producer();
}

Status KafkaDestination::encode(Batch& batch, BatchState& st, std::vector<RejectedRecord>* refused,
                                const std::vector<bool>* skip) {
  const auto& records = batch.records();
  // A record's own problem: the batch fails, or (isolating) the record is set apart.
  auto record_problem = [&](uint32_t i, Error e) -> bool {
    if (!refused) return false;
    refused->push_back({i, std::move(e)});
    return true;
  };
  st.msgs.reserve(records.size() + (o_.debezium && o_.tombstones ? records.size() / 8 : 0));
  kafka::DebeziumSource src{o_.topic_prefix, SLUICE_VERSION_TEXT, unix_ms()};
  rd_kafka_topic_t* last_topic = nullptr;
  std::string last_topic_name;
  const TopicLimits* limits = nullptr;
  TopicMemo memo;
  for (uint32_t i = 0; i < records.size(); ++i) {
    if (skip && (*skip)[i]) continue;
    const Record& r = records[i];
    render_topic(r, memo);
    if (last_topic == nullptr || topic_buf_ != last_topic_name) {
      last_topic = topic_handle(topic_buf_);
      last_topic_name = topic_buf_;
      limits = last_topic ? &topic_limits(last_topic_name) : nullptr;
      if (!last_topic) {
        Error e(Errc::data, fmt::format("record {} : cannot use topic '{}': {}", i, topic_buf_,
                                        rd_kafka_err2str(rd_kafka_last_error())));
        if (!record_problem(i, e)) return e;
        last_topic_name.clear();
        continue;
      }
    }
    scratch_.clear();
    const bool keyed = kafka::encode_key(r, o_.debezium, scratch_);
    const size_t key_len = scratch_.size();
    if (o_.debezium) kafka::encode_debezium_envelope(r, src, scratch_);
    else encode_record_json(r, scratch_);
    size_t size = scratch_.size();
    size_t framing = kRecordBatchOverhead;
    if (o_.headers && r.metadata.is_object())
      for (const Field& f : r.metadata.fields()) {
        size += f.name.size() + f.value.as_text().size();
        framing += 6;  // the header's two length varints
      }
    if (size > max_message_bytes_ || scratch_.size() > UINT32_MAX) {
      Error e(Errc::data,
              fmt::format(
                  "the message for topic '{}' is {} bytes, above message.max.bytes "
                  "({}): raise rdkafka.message.max.bytes (and the topic's max.message.bytes), or "
                  "route such records with on_error: dlq",
                  topic_buf_, size, max_message_bytes_));
      if (!record_problem(i, e)) return e;
      continue;
    }
    // The topic's own limits, checked here too, so that the broker does not refuse the message
    // (each refusal costs the idempotent producer an epoch bump, and a transaction its abort).
    // The broker checks the record batch (61 bytes of header, a record's own framing, after
    // compression): uncompressed sizes are only checked without compression.
    if (limits && limits->max_message_bytes != 0 && o_.compression == "none" &&
        size + framing > limits->max_message_bytes) {
      Error e(Errc::data,
              fmt::format("the message for topic '{}' is {} bytes, above the topic's "
                          "max.message.bytes ({} with the record batch's framing): raise the "
                          "topic's max.message.bytes, or route such records with on_error: dlq",
                          topic_buf_, size, limits->max_message_bytes));
      if (!record_problem(i, e)) return e;
      continue;
    }
    // With compression the broker checks the compressed batch: a message too large before
    // compression is compressed on its own (alone in its batch, as it is above batch.size), and
    // refused here when even that is above the limit, beyond a margin for the record's framing.
    if (limits && limits->max_message_bytes != 0 && o_.compression != "none" &&
        o_.compression_size_check && size + framing > limits->max_message_bytes) {
      if (size_t c = compressed_message_size(r, std::string_view(scratch_).substr(0, key_len),
                                             std::string_view(scratch_).substr(key_len));
          c != 0 && kCompressedBatchHeader + c > limits->max_message_bytes + kCompressedMargin) {
        Error e(Errc::data,
                fmt::format("the message for topic '{}' is {} bytes, about {} after {} "
                            "compression, above the topic's max.message.bytes ({}): raise the "
                            "topic's max.message.bytes, or route such records with on_error: dlq",
                            topic_buf_, size, kCompressedBatchHeader + c, o_.compression,
                            limits->max_message_bytes));
        if (!record_problem(i, e)) return e;
        continue;
      }
    }
    if (limits && limits->compacted && !keyed) {
      Error e(Errc::data,
              fmt::format("topic '{}' is compacted (cleanup.policy compact) and refuses a message "
                          "without a key: give the table a key (message.key.columns on the "
                          "source), or route such records with on_error: dlq",
                          topic_buf_));
      if (!record_problem(i, e)) return e;
      continue;
    }
    if (st.chunks.empty() || st.chunks.back()->cap - st.chunks.back()->used < scratch_.size()) {
      auto c = std::make_unique<Chunk>();
      c->cap = std::max(Chunk::kSize, scratch_.size());
      c->data.reset(new char[c->cap]);
      st.chunks.push_back(std::move(c));
    }
    Chunk* c = st.chunks.back().get();
    char* at = c->data.get() + c->used;
    std::memcpy(at, scratch_.data(), scratch_.size());
    c->used += scratch_.size();
    Msg m{&st,
          c,
          last_topic,
          keyed ? at : nullptr,
          at + key_len,
          uint32_t(key_len),
          uint32_t(scratch_.size() - key_len),
          i};
    st.msgs.push_back(m);
    c->pending.fetch_add(1, std::memory_order_relaxed);
    if (o_.debezium && o_.tombstones && keyed && r.op == Operation::remove && !is_truncate(r)) {
      m.value = nullptr;
      m.value_len = 0;
      st.msgs.push_back(m);
      c->pending.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return ok_status();
}

BatchState* KafkaDestination::new_state() {
  auto* st = new BatchState;
  st->owner = this;
  st->position_msg.st = st;
  return st;
}

void KafkaDestination::release_state(BatchState* st) { delete st; }

void KafkaDestination::on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
  auto* msg = static_cast<Msg*>(m->_private);
  if (!msg) return;
  if (msg->chunk && msg->chunk->pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
    msg->chunk->data.reset();
  msg->st->owner->message_done(msg->st, msg, m->err, m->rkt ? rd_kafka_topic_name(m->rkt) : "");
}

void KafkaDestination::message_done(BatchState* st, const Msg* msg, rd_kafka_resp_err_t err,
                                    const char* topic) {
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::lock_guard lock(st->mu);
    Error e = kafka::error_from(err, fmt::format("delivery to '{}' failed: ", topic));
    if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
      std::lock_guard stale(stale_mu_);  // the topic's limit may have changed: read it again
      if (std::find(stale_topics_.begin(), stale_topics_.end(), topic) == stale_topics_.end())
        stale_topics_.emplace_back(topic);
    }
    if (st->isolate && msg != &st->position_msg && e.code() == Errc::data) {
      st->refused.push_back({msg->rec, std::move(e)});  // this record's message was refused
      st->refused_flag->store(true, std::memory_order_release);
    } else if (!st->error || (e.code() == Errc::data && !st->refusal)) {
      if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        e = Error(e.code(),
                  e.message() +
                      ": the broker refuses a message this large: raise the topic's "
                      "max.message.bytes (or lower rdkafka.message.max.bytes so such records "
                      "are rejected before producing and can go to the dead-letter queue)");
      if (e.code() == Errc::data && !st->refusal) {
        st->refusal = e;
        st->refused_flag->store(true, std::memory_order_release);
      }
      if (!st->error) st->error = std::move(e);
    }
  }
  if (waiting_for_space_.load(std::memory_order_acquire)) {
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
  }
  if (st->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(st);
}

void KafkaDestination::finish(BatchState* st) {
  Status status = ok_status();
  if (st->refusal) status = *st->refusal;
  else if (st->error) status = *st->error;
  if (st->refused_sink) {
    std::lock_guard lock(st->mu);
    for (RejectedRecord& r : st->refused) st->refused_sink->push_back(std::move(r));
  }
  WriteDone done = std::move(st->done);
  release_state(st);
  done(std::move(status));
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  cv_.notify_all();
}

size_t KafkaDestination::produce_all(Batch& batch, BatchState* st, const std::string* position) {
  const auto& records = batch.records();
  const size_t total = st->msgs.size() + (position ? 1 : 0);
  // The messages' CreateTime, read once per batch instead of once per message inside
  // rd_kafka_producev (its gettimeofday was ~1 % of a run); read again after a wait for room.
  int64_t now_ms = unix_ms();
  for (size_t i = 0; i < total; ++i) {
    const bool is_pos = i == st->msgs.size();
    rd_kafka_resp_err_t err;
    for (;;) {
      rd_kafka_headers_t* hdrs = nullptr;
      if (is_pos) {
        err = rd_kafka_producev(
            rk_.get(), RD_KAFKA_V_TOPIC(o_.positions_topic.c_str()), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(pipeline_id_.data(), pipeline_id_.size()),
            RD_KAFKA_V_VALUE(const_cast<char*>(position->data()), position->size()),
            RD_KAFKA_V_TIMESTAMP(now_ms), RD_KAFKA_V_OPAQUE(&st->position_msg), RD_KAFKA_V_END);
      } else {
        Msg& m = st->msgs[i];
        const Record& r = records[m.rec];
        if (o_.headers && r.metadata.is_object() && r.metadata.size() > 0) {
          hdrs = rd_kafka_headers_new(r.metadata.size());
          for (const Field& f : r.metadata.fields()) {
            if (f.value.kind() != ValueKind::string) continue;
            std::string_view v = f.value.as_text();
            rd_kafka_header_add(hdrs, f.name.data(), ssize_t(f.name.size()), v.data(),
                                ssize_t(v.size()));
          }
        }
        err = rd_kafka_producev(rk_.get(), RD_KAFKA_V_RKT(m.topic), RD_KAFKA_V_MSGFLAGS(0),
                                RD_KAFKA_V_KEY(m.key, (m.key ? m.key_len : 0)),
                                RD_KAFKA_V_VALUE(m.value, (m.value ? m.value_len : 0)),
                                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_TIMESTAMP(now_ms),
                                RD_KAFKA_V_OPAQUE(&m), RD_KAFKA_V_END);
      }
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
      if (hdrs) rd_kafka_headers_destroy(hdrs);  // not taken on failure
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
      // The local queue is full: wait for delivery reports (served by the poller) to free space.
      waiting_for_space_.store(true, std::memory_order_release);
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, 10ms);
      waiting_for_space_.store(false, std::memory_order_release);
      now_ms = unix_ms();
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      {
        std::lock_guard lock(st->mu);
        if (!st->error) {
          st->error = kafka::error_from(
              err, fmt::format("producing to '{}': ",
                               is_pos ? o_.positions_topic
                                      : std::string(rd_kafka_topic_name(st->msgs[i].topic))));
        }
      }
      return total - i;
    }
  }
  return 0;
}

void KafkaDestination::write(Batch& batch, WriteDone done) {
  if (Status p = prepare_topics(batch); !p.ok()) {
    done(std::move(p));
    return;
  }
  if (o_.transactions) {
    write_transaction(batch, std::move(done));
    return;
  }
  BatchState* st = new_state();
  if (Status enc = encode(batch, *st); !enc.ok()) {
    release_state(st);
    done(std::move(enc));
    return;
  }
  if (st->msgs.empty()) {
    release_state(st);
    done(ok_status());
    return;
  }
  st->done = std::move(done);
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  // +1: this thread's guard, so the batch cannot complete while it is still being produced.
  st->outstanding.store(st->msgs.size() + 1, std::memory_order_relaxed);
  const size_t not_produced = produce_all(batch, st, nullptr);
  if (st->outstanding.fetch_sub(not_produced + 1, std::memory_order_acq_rel) == not_produced + 1)
    finish(st);
}

// Waits for every delivery report of a transaction; false as soon as one of its messages was
// refused or the transaction failed otherwise (`txn_errors` moved past `txn_errors_at_begin`): a
// message librdkafka holds back behind a refused one gets no report before the abort.
bool delivered_or_refused(std::future<Status>& delivered, const std::atomic<bool>& refused,
                          const std::atomic<uint64_t>& txn_errors, uint64_t txn_errors_at_begin) {
  while (delivered.wait_for(5ms) != std::future_status::ready)
    if (refused.load(std::memory_order_acquire) ||
        txn_errors.load(std::memory_order_acquire) != txn_errors_at_begin)
      return false;
  return true;
}

void KafkaDestination::write_transaction(Batch& batch, WriteDone done) {
  BatchState* st = new_state();
  if (Status enc = encode(batch, *st); !enc.ok()) {
    release_state(st);
    done(std::move(enc));
    return;
  }
  const std::string position = batch.position();
  const bool with_position = !position.empty();
  if (st->msgs.empty() && !with_position) {
    release_state(st);
    done(ok_status());
    return;
  }
  const uint64_t txn_errors = events_.txn_errors.load(std::memory_order_acquire);
  if (rd_kafka_error_t* e = rd_kafka_begin_transaction(rk_.get())) {
    release_state(st);
    done(txn_error(e, "beginning a transaction"));
    return;
  }
  // All delivery reports in: the state is freed and the promise set (with the first delivery
  // error).
  auto delivered = std::make_shared<std::promise<Status>>();
  std::future<Status> all_delivered = delivered->get_future();
  st->done = [delivered](Status s) { delivered->set_value(std::move(s)); };
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  const size_t total = st->msgs.size() + (with_position ? 1 : 0);
  st->outstanding.store(total + 1, std::memory_order_relaxed);
  const std::shared_ptr<std::atomic<bool>> refused = st->refused_flag;
  const size_t not_produced = produce_all(batch, st, with_position ? &position : nullptr);
  if (st->outstanding.fetch_sub(not_produced + 1, std::memory_order_acq_rel) == not_produced + 1)
    finish(st);
  Status result = ok_status();
  if (not_produced == 0) {
    if (!delivered_or_refused(all_delivered, *refused, events_.txn_errors, txn_errors))
      result = Error(Errc::data,
                     "a message of the transaction was refused, or the transaction "
                     "failed");
    else if (rd_kafka_error_t* e = rd_kafka_commit_transaction(rk_.get(), -1))
      result = txn_error(e, "committing");
  } else {
    result = Error(Errc::internal, "producing in a transaction failed");
  }
  // A failed transaction is aborted before its delivery reports are awaited: librdkafka keeps the
  // messages behind a refused one queued until the abort purges them (waiting first hung).
  // An abort that failed leaves the transaction unusable: the producer is re-created (its
  // purge delivers every report), and the batch is written again; if that fails too, the
  // pipeline stops.
  std::optional<Status> unrecoverable;
  if (!result.ok())
    if (Status a = abort_txn("aborting a failed transaction"); !a.ok())
      if (Status re = recreate_producer(a); !re.ok()) unrecoverable = re;
  Status deliveries = all_delivered.get();
  if (not_produced != 0 && !deliveries.ok()) result = deliveries;
  if (result.ok() && !deliveries.ok()) result = deliveries;
  if (!result.ok()) {
    if (unrecoverable) {
      result = Error(unrecoverable->error().code(),
                     result.error().message() + "; " + unrecoverable->error().message(), false);
    } else if (!deliveries.ok() && deliveries.error().code() == Errc::data) {
      result = deliveries;  // a refused message: the runtime isolates it
    } else {
      // Aborted cleanly: nothing of the batch is visible to read_committed consumers; writing it
      // again is safe.
      result = Error(result.error().code(), result.error().message(), true);
    }
  }
  done(std::move(result));
}

Result<KafkaDestination::Isolating> KafkaDestination::start_isolating(
    Batch& batch, const std::vector<bool>& skip, const std::string* position,
    std::vector<RejectedRecord>& refused) {
  Isolating run;
  BatchState* st = new_state();
  st->isolate = true;
  run.refused = st->refused_flag;
  if (Status enc = encode(batch, *st, &refused, &skip); !enc.ok()) {
    release_state(st);
    return std::move(enc).error();
  }
  auto delivered = std::make_shared<std::promise<Status>>();
  run.delivered = delivered->get_future();
  if (st->msgs.empty() && !position) {
    release_state(st);
    delivered->set_value(ok_status());
    return run;
  }
  // Every delivery report in: finish() moves the refused records to `refused`; the batch-wide
  // error (if any) is the result.
  st->refused_sink = &refused;
  st->done = [delivered](Status s) { delivered->set_value(std::move(s)); };
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  const size_t total = st->msgs.size() + (position ? 1 : 0);
  st->outstanding.store(total + 1, std::memory_order_relaxed);
  const size_t not_produced = produce_all(batch, st, position);
  run.all_produced = not_produced == 0;
  if (st->outstanding.fetch_sub(not_produced + 1, std::memory_order_acq_rel) == not_produced + 1)
    finish(st);
  return run;
}

Status KafkaDestination::write_isolating(Batch& batch, bool commit_position,
                                         std::vector<RejectedRecord>& rejected) {
  SLUICE_TRY(prepare_topics(batch));
  const std::string position = batch.position();
  const std::string* pos =
      o_.transactions && commit_position && !position.empty() ? &position : nullptr;
  std::vector<bool> skip(batch.size(), false);
  auto by_index = [](const RejectedRecord& a, const RejectedRecord& b) {
    return a.index < b.index;
  };
  if (!o_.transactions) {
    std::vector<RejectedRecord> refused;
    auto run = start_isolating(batch, skip, nullptr, refused);
    if (!run.ok()) return std::move(run).error();
    Status st = run->delivered.get();
    if (!st.ok()) return st;
    if (!run->all_produced) return Error(Errc::internal, "producing a batch failed", true);
    std::sort(refused.begin(), refused.end(), by_index);
    // A deleted key's value and tombstone are one record: refused once.
    std::vector<RejectedRecord> once;
    for (RejectedRecord& r : refused)
      if (once.empty() || once.back().index != r.index) once.push_back(std::move(r));
    // The broker checks max.message.bytes per produce batch: a message refused as too large may
    // only have shared a batch with large ones. Each such record is produced again alone, and
    // only a refusal of its own message sets it apart.
    for (RejectedRecord& r : once) {
      if (r.error.message().find("MSG_SIZE_TOO_LARGE") == std::string::npos) {
        rejected.push_back(std::move(r));
        continue;
      }
      std::vector<bool> alone(batch.size(), true);
      alone[r.index] = false;
      std::vector<RejectedRecord> again;
      auto single = start_isolating(batch, alone, nullptr, again);
      if (!single.ok()) return std::move(single).error();
      rd_kafka_flush(rk_.get(), 0);  // sent now, in a request of its own
      Status st1 = single->delivered.get();
      if (!st1.ok()) return st1;
      if (!again.empty()) rejected.push_back(std::move(r));
    }
    return ok_status();
  }
  // Transactions: a refused message makes the whole transaction fail (librdkafka sends nothing
  // behind it in its partition until the abort), so a pass with refusals is aborted and the batch
  // written again without those records; every pass refuses at least one more record, or ends.
  // A pass that fails with nothing new refused (an error left over by the abort's epoch bump) is
  // tried again a few times before the batch fails.
  std::vector<RejectedRecord> refused_all;
  int fruitless = 0;
  for (;;) {
    const uint64_t txn_errors = events_.txn_errors.load(std::memory_order_acquire);
    if (rd_kafka_error_t* e = rd_kafka_begin_transaction(rk_.get())) {
      Status why = txn_error(e, "beginning a transaction");
      // A transaction still open or an abort still in progress: recover once, then fail.
      if (++fruitless > 3) return why;
      if (Status a = abort_txn("aborting before a new transaction"); !a.ok())
        SLUICE_TRY(recreate_producer(a));
      continue;
    }
    std::vector<RejectedRecord> refused;
    auto run = start_isolating(batch, skip, pos, refused);
    if (!run.ok()) {
      if (Status a = abort_txn("aborting a failed transaction"); !a.ok())
        SLUICE_TRY(recreate_producer(a));
      return std::move(run).error();
    }
    Status commit = ok_status();
    if (!run->all_produced) commit = Error(Errc::internal, "producing in a transaction failed");
    else if (!delivered_or_refused(run->delivered, *run->refused, events_.txn_errors, txn_errors))
      commit = Error(Errc::data,
                     "a message of the transaction was refused, or the transaction "
                     "failed");
    else if (rd_kafka_error_t* e = rd_kafka_commit_transaction(rk_.get(), -1))
      commit = txn_error(e, "committing");
    // Aborted before the reports are awaited: the abort purges what a refusal left queued.
    if (!commit.ok())
      if (Status a = abort_txn("aborting a transaction with refused records"); !a.ok())
        SLUICE_TRY(recreate_producer(a));  // its purge delivers every report
    Status deliveries = run->delivered.get();
    if (commit.ok()) {  // committed: every message produced was delivered
      for (RejectedRecord& r : refused) refused_all.push_back(std::move(r));  // before producing
      break;
    }
    size_t added = 0;
    for (RejectedRecord& r : refused) {
      if (skip[r.index]) continue;
      skip[r.index] = true;
      refused_all.push_back(std::move(r));
      ++added;
    }
    if (added != 0) continue;
    // Nothing new refused: not a record's fault (aborted cleanly, so writing it again is safe).
    if (++fruitless > 3) {
      const Error& why = deliveries.ok() ? commit.error() : deliveries.error();
      return Error(why.code(), why.message(), true);
    }
  }
  std::sort(refused_all.begin(), refused_all.end(), by_index);
  for (RejectedRecord& r : refused_all) rejected.push_back(std::move(r));
  return ok_status();
}

Status KafkaDestination::flush(std::chrono::milliseconds timeout) {
  if (!rk_) return ok_status();
  const auto until = std::chrono::steady_clock::now() + timeout;
  {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, until, [&] { return in_flight_ == 0; }))
      return Error(Errc::timeout, fmt::format("{} batch(es) still awaiting delivery after {} ms",
                                              in_flight_, timeout.count()));
  }
  return ok_status();
}

void KafkaDestination::close() noexcept {
  if (closed_ || !rk_) return;
  closed_ = true;
  (void)flush(std::chrono::milliseconds(o_.delivery_timeout.count() + 5000));
  rd_kafka_flush(rk_.get(), 10000);
  stop_ = true;
  if (poller_.joinable()) poller_.join();
  for (auto& [name, t] : topics_) rd_kafka_topic_destroy(t);
  topics_.clear();
  rk_.reset();
  probe_.unregister();
}

Result<std::optional<std::string>> KafkaDestination::stored_position(std::string_view pipeline_id) {
  if (!o_.transactions) return std::optional<std::string>();
  std::map<std::string, std::string> props = {
      {"group.id", "sluice-positions-reader"},
      {"enable.auto.commit", "false"},
      {"enable.partition.eof", "true"},
      {"isolation.level", "read_committed"},
  };
  // Security settings apply to this reader too; producer-only properties do not.
  for (const auto& [k, v] : o_.rdkafka)
    if (k.rfind("security.", 0) == 0 || k.rfind("ssl.", 0) == 0 || k.rfind("sasl.", 0) == 0)
      props[k] = v;
  auto conf = kafka::make_conf(o_.brokers, "kafka destination", {}, props);
  if (!conf.ok()) return std::move(conf).error().with_context("positions reader: ");
  char err[512];
  rd_kafka_t* raw = rd_kafka_new(RD_KAFKA_CONSUMER, conf->get(), err, sizeof err);
  if (!raw) return Error(Errc::internal, fmt::format("positions reader: {}", err));
  (void)conf->release();
  kafka::Handle c(raw);
  int64_t low = 0, high = 0;
  rd_kafka_resp_err_t e =
      rd_kafka_query_watermark_offsets(c.get(), o_.positions_topic.c_str(), 0, &low, &high, 30000);
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return kafka::error_from(e, fmt::format("reading positions topic '{}': ", o_.positions_topic));
  std::optional<std::string> found;
  if (high <= low) return found;
  kafka::PartitionList parts(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(parts.get(), o_.positions_topic.c_str(), 0)->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  if ((e = rd_kafka_assign(c.get(), parts.get())) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return kafka::error_from(e, "reading positions: ");
  const auto until = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    if (std::chrono::steady_clock::now() > until)
      return Error(Errc::timeout,
                   fmt::format("reading positions topic '{}' timed out", o_.positions_topic), true);
    kafka::Message m(rd_kafka_consumer_poll(c.get(), 500));
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) break;
    if (m->err) {
      if (m->err == RD_KAFKA_RESP_ERR__TRANSPORT || m->err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        continue;
      return kafka::error_from(m->err, "reading positions: ");
    }
    if (m->key && std::string_view(static_cast<const char*>(m->key), m->key_len) == pipeline_id) {
      if (m->payload) found = std::string(static_cast<const char*>(m->payload), m->len);
      else found.reset();  // a tombstone: forgotten
    }
  }
  rd_kafka_consumer_close(c.get());
  return found;
}

// A tombstone for the pipeline's key in its own transaction: stored_position() then finds none.
Status KafkaDestination::erase_stored_position(std::string_view pipeline_id) {
  if (!o_.transactions) return ok_status();
  if (!rk_) return Error(Errc::internal, "kafka destination: erase before open");
  if (rd_kafka_error_t* e = rd_kafka_begin_transaction(rk_.get()))
    return txn_error(e, "beginning a transaction");
  rd_kafka_resp_err_t err =
      rd_kafka_producev(rk_.get(), RD_KAFKA_V_TOPIC(o_.positions_topic.c_str()),
                        RD_KAFKA_V_PARTITION(0), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                        RD_KAFKA_V_KEY(const_cast<char*>(pipeline_id.data()), pipeline_id.size()),
                        RD_KAFKA_V_VALUE(nullptr, 0), RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (rd_kafka_error_t* e = rd_kafka_abort_transaction(rk_.get(), 60000))
      rd_kafka_error_destroy(e);
    return kafka::error_from(
        err, fmt::format("erasing the position in topic '{}': ", o_.positions_topic));
  }
  if (rd_kafka_error_t* e = rd_kafka_commit_transaction(rk_.get(), -1))
    return txn_error(e, "committing the erased position");
  return ok_status();
}

// The cross-setting checks, in one place; derives `debezium` and `compression_level`.
Status finalize(Options& o) {
  if (o.brokers.empty()) return Error(Errc::invalid_argument, "`brokers` is empty: set host:port");
  if (o.transactions && o.acks != "all")
    return Error(Errc::invalid_argument, "transactions need acks: all");
  if (o.positions_topic.empty()) return Error(Errc::invalid_argument, "positions.topic is empty");
  o.debezium = o.format == "debezium";
  if (auto it = o.rdkafka.find("compression.level"); it != o.rdkafka.end())
    o.compression_level = std::atoi(it->second.c_str());
  SLUICE_TRY(kafka::apply_tls({o.tls_mode, o.tls_ca, o.tls_cert, o.tls_key, o.tls_key_password},
                              o.rdkafka));
  // librdkafka itself judges names and values, on a scratch configuration nothing uses, so that
  // `sluice validate` refuses a misspelt rdkafka.* property as `run` would.
  auto scratch = kafka::make_conf(o.brokers, "kafka destination", {}, o.rdkafka);
  if (!scratch.ok()) return std::move(scratch).error();
  return ok_status();
}

Result<Options> options_from(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kSettings, s));
  if (!s.has("headers")) o.headers = o.format != "debezium";
  SLUICE_TRY(finalize(o));
  return o;
}

}  // namespace

std::span<const SettingSpec> kafka_destination_settings() noexcept { return kSettings; }

Result<std::unique_ptr<Destination>> make_kafka_destination(const Settings& settings) {
  auto o = options_from(settings);
  if (!o.ok()) return std::move(o).error();
  return std::unique_ptr<Destination>(std::make_unique<KafkaDestination>(std::move(o.value())));
}

}  // namespace sluice
