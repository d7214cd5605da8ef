// What the kafka source and destination share: librdkafka handles with RAII, configuration built
// from settings (brokers, pass-through `rdkafka.*` properties), error mapping to Errc, a broker
// reachability check with a one-line error, and librdkafka's log routed to spdlog.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "connectors/common/connection_probe.h"
#include "connectors/common/tls_settings.h"
#include "sluice/result.h"

namespace sluice::kafka {

struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const noexcept { rd_kafka_destroy(rk); }
};
struct ConfDeleter {
  void operator()(rd_kafka_conf_t* c) const noexcept { rd_kafka_conf_destroy(c); }
};
struct TopicPartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const noexcept {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
struct HeadersDeleter {
  void operator()(rd_kafka_headers_t* h) const noexcept { rd_kafka_headers_destroy(h); }
};
struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const noexcept { rd_kafka_message_destroy(m); }
};
using Handle = std::unique_ptr<rd_kafka_t, HandleDeleter>;
using Conf = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;
using PartitionList = std::unique_ptr<rd_kafka_topic_partition_list_t, TopicPartitionListDeleter>;
using Headers = std::unique_ptr<rd_kafka_headers_t, HeadersDeleter>;
using Message = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

// True for librdkafka properties whose values are secrets (passwords, keys, tokens): never logged
// or echoed in an error.
bool is_secret_property(std::string_view name) noexcept;

// A configuration with bootstrap.servers = `brokers`, librdkafka's log routed to spdlog (prefixed
// with `who`, e.g. "kafka destination"), then `defaults` and then `properties` (the user's
// pass-through `rdkafka.*` settings, which win over defaults). An unknown property or a bad value
// is a one-line invalid_argument error naming the property (and never a secret value).
Result<Conf> make_conf(std::string_view brokers, std::string_view who,
                       const std::map<std::string, std::string>& defaults,
                       const std::map<std::string, std::string>& properties);

// Sets one property; the same error rules as make_conf.
Status set_property(rd_kafka_conf_t* conf, const std::string& name, const std::string& value);

// The `tls.mode` values of the kafka connectors (no "preferred": a Kafka listener speaks TLS or
// it does not) and the setting's doc.
inline constexpr const char* kTlsModeChoices = "disabled,required,verify_ca,verify_identity";
inline constexpr std::string_view kTlsModeDoc =
    "TLS to the brokers (security.protocol SSL, or SASL_SSL when rdkafka.security.protocol says "
    "so). disabled: plain text; required: TLS without checking the brokers' certificates; "
    "verify_ca: certificates signed by tls.ca (ssl.ca.location); verify_identity: and naming the "
    "broker's host (ssl.endpoint.identification.algorithm https). tls.cert / tls.key / "
    "tls.key_password become ssl.certificate.location / ssl.key.location / ssl.key.password.";

// Checks the tls.* settings (check_tls_settings) and adds the librdkafka properties they mean to
// `rdkafka`. A property both set by tls.* and given as rdkafka.* is a config error naming both;
// rdkafka.security.protocol may say SASL_SSL (kept), but not a plain-text protocol with TLS on.
Status apply_tls(const TlsSettings& tls, std::map<std::string, std::string>& rdkafka);

// Maps a librdkafka error to an Error: transport/timeouts/leader changes are retriable
// connection errors, authentication and authorisation failures are auth/permission, unknown topic
// is not_found, message too large and invalid records are data. `context` prefixes the message.
Error error_from(rd_kafka_resp_err_t err, std::string_view context);

// Asks the cluster for its metadata within `timeout`; on failure a one-line connection error that
// names the brokers and the fix ("check `brokers` and that Kafka is running").
Status check_reachable(rd_kafka_t* rk, std::string_view brokers, std::chrono::milliseconds timeout);

// ── The connection probe of the kafka source and destination (connection_probe.h) ──
//
// librdkafka connects, and reconnects, by itself; what it tells its client is:
//   - the error callback: RD_KAFKA_RESP_ERR__TRANSPORT when one broker connection failed (others
//     may still serve: not a loss of the connector), RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN when no
//     broker connection is left (a loss, reported at once);
//   - nothing when a connection comes back — only the statistics (statistics.interval.ms), which
//     carry every broker's state. So the state is re-read from each statistics event: connected
//     while at least one broker (bootstrap, learned or logical such as the group coordinator;
//     never librdkafka's internal one) is UP, down when a connected client has none UP.
// The statistics arrive every kBrokerStatsInterval (a default; rdkafka.statistics.interval.ms
// overrides it, and 0 leaves only ALL_BROKERS_DOWN: the probe then never sees the return).
inline constexpr const char* kBrokerStatsInterval = "1000";

// Whether a librdkafka statistics document shows a broker UP; nullopt when it names no broker
// (or is not such a document).
std::optional<bool> any_broker_up(std::string_view stats_json);

// Error callback → probe: ALL_BROKERS_DOWN is a loss.
void report_broker_error(ConnectionProbe& probe, int err) noexcept;
// Statistics callback → probe (see above).
void report_broker_stats(ConnectionProbe& probe, std::string_view stats_json);

// ── `sluice doctor` (kafka_doctor.cc): read-only questions to the cluster ──

// Every topic of the cluster → the error its metadata carries (NO_ERROR when it is fine), and
// one broker's id (for describe_config of a broker).
struct ClusterTopics {
  std::map<std::string, rd_kafka_resp_err_t> topics;
  int32_t broker = -1;
};
Result<ClusterTopics> list_topics(rd_kafka_t* rk, std::chrono::milliseconds timeout);
// A topic's or a broker's configuration (DescribeConfigs): name → value.
Result<std::map<std::string, std::string>> describe_config(rd_kafka_t* rk,
                                                           rd_kafka_ResourceType_t type,
                                                           const std::string& name,
                                                           std::chrono::milliseconds timeout);
// A consumer group's state ("Empty", "Stable", "Dead": no such group, ...) and its members.
struct GroupState {
  std::string state;
  size_t members = 0;
};
Result<GroupState> describe_group(rd_kafka_t* rk, const std::string& group,
                                  std::chrono::milliseconds timeout);

}  // namespace sluice::kafka
