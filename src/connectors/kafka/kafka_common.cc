#include "connectors/kafka/kafka_common.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>
#include <vector>

namespace sluice::kafka {

namespace {

void log_callback(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  const void* opaque = rd_kafka_opaque(rk);
  const char* who = opaque ? static_cast<const char*>(opaque) : "kafka";
  // syslog levels: 0-3 error, 4 warning, 5-6 info, 7 debug.
  if (level <= 3) {
    spdlog::error("{}: librdkafka {}: {}", who, fac, buf);
  } else if (level == 4) {
    spdlog::warn("{}: librdkafka {}: {}", who, fac, buf);
  } else if (level <= 6) {
    spdlog::info("{}: librdkafka {}: {}", who, fac, buf);
  } else {
    spdlog::debug("{}: librdkafka {}: {}", who, fac, buf);
  }
}

}  // namespace

bool is_secret_property(std::string_view name) noexcept {
  static constexpr std::array<std::string_view, 5> kMarkers = {"password", "secret", "token",
                                                               "key.pem", "jaas"};
  if (name == "ssl.key.pem" || name == "ssl_key") return true;
  return std::any_of(kMarkers.begin(), kMarkers.end(),
                     [&](std::string_view m) { return name.find(m) != std::string_view::npos; });
}

Status set_property(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char err[512];
  rd_kafka_conf_res_t res = rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err);
  if (res == RD_KAFKA_CONF_OK) return ok_status();
  const std::string shown = is_secret_property(name) ? std::string("(secret)") : "'" + value + "'";
  if (res == RD_KAFKA_CONF_UNKNOWN) {
    return Error(
        Errc::invalid_argument,
        fmt::format("unknown librdkafka property '{}': check the name against librdkafka's "
                    "CONFIGURATION.md (pass it as rdkafka.<property>)",
                    name));
  }
  return Error(
      Errc::invalid_argument,
      fmt::format("librdkafka property '{}' = {}: {}", name, shown,
                  is_secret_property(name) ? std::string("invalid value") : std::string(err)));
}

Result<Conf> make_conf(std::string_view brokers, std::string_view who,
                       const std::map<std::string, std::string>& defaults,
                       const std::map<std::string, std::string>& properties) {
  Conf conf(rd_kafka_conf_new());
  if (Status st = set_property(conf.get(), "bootstrap.servers", std::string(brokers)); !st.ok()) {
    return std::move(st).error();
  }
  rd_kafka_conf_set_log_cb(conf.get(), &log_callback);
  // The opaque names the connector in log lines; static storage: `who` is a string literal view
  // of limited variety, interned here.
  static constexpr std::array<std::string_view, 3> kWho = {"kafka source", "kafka destination",
                                                           "kafka"};
  const char* who_c = "kafka";
  for (std::string_view w : kWho) {
    if (w == who) who_c = w.data();
  }
  rd_kafka_conf_set_opaque(conf.get(), const_cast<char*>(who_c));
  for (const auto& [k, v] : defaults) {
    if (properties.count(k)) continue;
    if (Status st = set_property(conf.get(), k, v); !st.ok()) return std::move(st).error();
  }
  for (const auto& [k, v] : properties) {
    if (Status st = set_property(conf.get(), k, v); !st.ok()) return std::move(st).error();
  }
  return conf;
}

Error error_from(rd_kafka_resp_err_t err, std::string_view context) {
  std::string msg =
      fmt::format("{}{} ({})", context, rd_kafka_err2str(err), rd_kafka_err2name(err));
  switch (err) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:
    case RD_KAFKA_RESP_ERR__RESOLVE:
      return Error(Errc::connection, std::move(msg), /*retriable=*/true);
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
      return Error(Errc::auth,
                   msg + ": check the SASL/SSL settings (rdkafka.sasl.*, rdkafka.ssl.*)");
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return Error(Errc::permission, msg + ": grant the principal access in the broker's ACLs");
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
      return Error(Errc::not_found,
                   msg + ": create the topic or enable auto.create.topics.enable on the broker");
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD: return Error(Errc::data, std::move(msg));
    default: return Error(Errc::internal, std::move(msg));
  }
}

Status apply_tls(const TlsSettings& t, std::map<std::string, std::string>& rdkafka) {
  SLUICE_TRY(check_tls_settings(t));
  if (t.mode.empty() || t.mode == "disabled") return ok_status();
  std::vector<std::pair<std::string, std::pair<std::string_view, std::string>>> set;
  auto add = [&](std::string_view setting, const char* property, std::string value) {
    set.push_back({property, {setting, std::move(value)}});
  };
  if (t.mode == "required") add("tls.mode", "enable.ssl.certificate.verification", "false");
  add("tls.mode", "ssl.endpoint.identification.algorithm",
      t.mode == "verify_identity" ? "https" : "none");
  if (!t.ca.empty()) add("tls.ca", "ssl.ca.location", t.ca);
  if (!t.cert.empty()) add("tls.cert", "ssl.certificate.location", t.cert);
  if (!t.key.empty()) add("tls.key", "ssl.key.location", t.key);
  if (!t.key_password.empty()) add("tls.key_password", "ssl.key.password", t.key_password);
  for (const auto& [property, value] : set)
    if (rdkafka.count(property))
      return Error(Errc::config,
                   fmt::format("settings '{}' and 'rdkafka.{}' both set the same thing; keep one",
                               value.first, property));
  if (auto p = rdkafka.find("security.protocol"); p != rdkafka.end()) {
    std::string protocol = p->second;
    for (char& c : protocol) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (protocol != "SSL" && protocol != "SASL_SSL")
      return Error(Errc::config,
                   fmt::format("setting 'tls.mode' {} needs TLS but rdkafka.security.protocol is "
                               "{}; set it to SSL or SASL_SSL, or remove it",
                               t.mode, p->second));
  } else {
    rdkafka["security.protocol"] = "SSL";
  }
  for (auto& [property, value] : set) rdkafka[property] = std::move(value.second);
  return ok_status();
}

Status check_reachable(rd_kafka_t* rk, std::string_view brokers,
                       std::chrono::milliseconds timeout) {
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, /*all_topics=*/0, nullptr, &md, static_cast<int>(timeout.count()));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_metadata_destroy(md);
    return ok_status();
  }
  // Over TLS, a refused certificate looks like an unreachable broker: say what to check.
  char protocol[64] = "";
  size_t size = sizeof protocol;
  std::string tls_hint;
  if (rd_kafka_conf_get(rd_kafka_conf(rk), "security.protocol", protocol, &size) ==
          RD_KAFKA_CONF_OK &&
      std::string_view(protocol).find("ssl") != std::string_view::npos)
    tls_hint =
        "; over TLS a refused certificate looks the same: check tls.ca (the CA that signed the "
        "brokers' certificates), tls.mode, tls.cert and tls.key (rdkafka.log_level: 3 logs the "
        "handshake error)";
  return Error(
      Errc::connection,
      fmt::format("cannot reach Kafka at {} within {} ms ({}): check `brokers` and that the "
                  "brokers are running and reachable{}",
                  brokers, timeout.count(), rd_kafka_err2str(err), tls_hint),
      /*retriable=*/true);
}

std::optional<bool> any_broker_up(std::string_view stats_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(stats_json.data(), stats_json.size()).get(doc) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::object brokers;
  if (doc["brokers"].get(brokers) != simdjson::SUCCESS) return std::nullopt;
  bool named = false;
  for (simdjson::dom::key_value_pair kv : brokers) {
    std::string_view source, state;
    if (kv.value["source"].get(source) == simdjson::SUCCESS && source == "internal") continue;
    if (kv.value["state"].get(state) != simdjson::SUCCESS) continue;
    named = true;
    if (state == "UP") return true;
  }
  if (!named) return std::nullopt;
  return false;
}

void report_broker_error(ConnectionProbe& probe, int err) noexcept {
  if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) probe.lost();
}

void report_broker_stats(ConnectionProbe& probe, std::string_view stats_json) {
  const std::optional<bool> up = any_broker_up(stats_json);
  if (!up) return;
  if (*up) probe.connected();
  // Before the first connection the client is down already (and that is no reconnect).
  else if (probe.is_connected() != 0) probe.lost();
}

}  // namespace sluice::kafka
