#include "cli/logging.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>

#include "engine/status_line.h"
#include "sluice/log_context.h"
#include "sluice/secrets.h"

namespace sluice {

namespace {

bool g_json = false;

void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  static const char* hex = "0123456789abcdef";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      dest.push_back('\\');
      dest.push_back(c);
    } else if (u < 0x20) {
      const char esc[] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
      dest.append(esc, esc + 6);
    } else {
      dest.push_back(c);
    }
  }
}

// %j: the message as a JSON string body.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    // Redacted before escaping: an escaped secret (a quote or backslash in it) would not match.
    append_json_escaped(redact(std::string_view(msg.payload.data(), msg.payload.size())), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// The pipeline a line names at its start ("pipeline orders: ..."): lines the main thread writes
// about a pipeline (building it, its end) carry its id so, not through a LogScope.
std::string_view pipeline_named_by(std::string_view msg) {
  constexpr std::string_view kPrefix = "pipeline ";
  if (!msg.starts_with(kPrefix)) return {};
  size_t i = kPrefix.size();
  while (i < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[i])) || msg[i] == '_' ||
                            msg[i] == '.' || msg[i] == '-'))
    ++i;
  if (i == kPrefix.size() || i >= msg.size() || msg[i] != ':') return {};
  return msg.substr(kPrefix.size(), i - kPrefix.size());
}

// `,"pipeline":"…","connector":"…"`: the thread's LogScope (sluice/log_context.h), else the
// pipeline the message names; nothing for a line of no pipeline.
void append_context_fields(std::string_view msg, spdlog::memory_buf_t& dest) {
  const LogContext& c = thread_log_context();
  std::string_view pipeline = c.pipeline.empty() ? pipeline_named_by(msg) : c.pipeline;
  if (pipeline.empty()) return;
  constexpr std::string_view kPipeline = R"(,"pipeline":")", kConnector = R"(","connector":")";
  dest.append(kPipeline.data(), kPipeline.data() + kPipeline.size());
  append_json_escaped(pipeline, dest);
  if (!c.connector.empty() && !c.pipeline.empty()) {
    dest.append(kConnector.data(), kConnector.data() + kConnector.size());
    append_json_escaped(c.connector, dest);
  }
  dest.push_back('"');
}

// %F: the context fields above.
class JsonContextFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    append_context_fields(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonContextFlag>();
  }
};

// stderr through the status line, every line through redact(): a log line erases the live
// progress line and redraws it after, so the two never share a line, and no log line, at any
// level, shows a secret.
class StatusLineSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    StatusLine::stderr_line().write_log(
        redact(std::string_view(formatted.data(), formatted.size())));
  }
  void flush_() override {
    if (std::fflush(stderr) != 0) std::clearerr(stderr);
  }
};

}  // namespace

std::string json_escape(std::string_view text) {
  spdlog::memory_buf_t buf;
  append_json_escaped(text, buf);
  return std::string(buf.data(), buf.size());
}

bool json_output() { return g_json; }

void write_out(std::FILE* f, std::string_view text) noexcept {
  if (text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::clearerr(f);
  if (std::fflush(f) != 0) std::clearerr(f);
}

void cli_line(std::string_view level, std::string_view message,
              const std::vector<std::pair<std::string, std::string>>& fields) noexcept {
  try {
    if (!g_json) {
      // The program's own name is not a secret, even when a test server's password spells it.
      write_out(stderr, fmt::format("sluice: {}\n", redact(message)));
      return;
    }
    const auto now = std::chrono::system_clock::now();
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000;
    std::string line =
        fmt::format(R"({{"time":"{:%Y-%m-%dT%H:%M:%S}.{:06d}Z","level":"{}","msg":"{}")",
                    std::chrono::floor<std::chrono::seconds>(now), us, level, json_escape(message));
    if (std::none_of(fields.begin(), fields.end(),
                     [](const auto& f) { return f.first == "pipeline"; })) {
      spdlog::memory_buf_t context;
      append_context_fields(message, context);
      line.append(context.data(), context.size());
    }
    for (const auto& [k, v] : fields) line += fmt::format(R"(,"{}":{})", json_escape(k), v);
    line += "}\n";
    write_out(stderr, redact(line));
  } catch (...) {
    // Out of memory formatting a line: nothing better to do than lose it.
  }
}

bool setup_logging(const std::string& level, const std::string& format) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  if (format != "text" && format != "json") return false;
  g_json = format == "json";
  auto logger = std::make_shared<spdlog::logger>("sluice", std::make_shared<StatusLineSink>());
  if (format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<JsonMessageFlag>('j');
    f->add_flag<JsonContextFlag>('F');
    f->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%j"%F})");
    logger->set_formatter(std::move(f));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::warn);
  // A failed write (closed stderr, gone pipe reader) is not worth spdlog's own complaint on the
  // same stderr.
  logger->set_error_handler([](const std::string&) {});
  spdlog::set_default_logger(logger);
  return true;
}

}  // namespace sluice
