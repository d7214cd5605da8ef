// Connector and processor reference, rendered from the settings tables so the docs cannot drift
// from what validation accepts. Output depends only on the tables (deterministic, diff-friendly).
#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"

namespace sluice {

namespace {

// A table cell: one line, pipes escaped.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out;
}

std::string code(std::string_view text) { return text.empty() ? "" : "`" + cell(text) + "`"; }

std::string choices_list(std::string_view choices, std::string_view sep, bool as_code) {
  std::string out;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t end = choices.find(',', start);
    if (end == std::string_view::npos) end = choices.size();
    auto c = choices.substr(start, end - start);
    while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
    while (!c.empty() && c.back() == ' ') c.remove_suffix(1);
    if (!c.empty())
      out += (out.empty() ? "" : std::string(sep)) + (as_code ? code(c) : std::string(c));
    start = end + 1;
  }
  return out;
}

std::string type_text(const SettingSpec& s, bool markdown) {
  if (s.type == SettingType::enumeration)
    return "one of " + choices_list(s.choices, markdown ? ", " : "|", markdown);
  return std::string(setting_type_name(s.type));
}

std::string number_text(double d) {
  std::string out = std::to_string(d);
  out.erase(out.find_last_not_of('0') + 1);
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

// A declared range, in the setting's unit ("Range: 1 or more.", "Range: 0 to 65535.").
std::string range_text(const SettingSpec& s) {
  if (!s.min && !s.max) return "";
  std::string unit = s.type == SettingType::duration ? " ms"
                     : s.type == SettingType::size   ? " B"
                                                     : "";
  if (s.min && s.max)
    return "Range: " + number_text(*s.min) + " to " + number_text(*s.max) + unit + ".";
  if (s.min) return "Range: " + number_text(*s.min) + unit + " or more.";
  return "Range: at most " + number_text(*s.max) + unit + ".";
}

std::string doc_text(const SettingSpec& s) {
  std::string doc(s.doc);
  auto add = [&](const std::string& more) {
    if (!more.empty()) doc += (doc.empty() ? "" : " ") + more;
  };
  add(range_text(s));
  if (s.path)
    add(s.default_value.empty()
            ? "A relative path resolves against the pipeline file's folder."
            : "A relative path written in the file resolves against the file's folder (the default "
              "against the working directory).");
  if (s.secret) add("Secret: never logged.");
  return doc;
}

void table_row(std::string& out, std::string_view name, std::string_view type, std::string_view def,
               std::string_view required, std::string_view doc) {
  out += "| " + code(name) + " | " + cell(type) + " | " + code(def) + " | " +
         std::string(required) + " | " + cell(doc) + " |\n";
}

void table_head(std::string& out) {
  out += "| name | type | default | required | description |\n";
  out += "|---|---|---|---|---|\n";
}

void setting_row(std::string& out, const SettingSpec& s, std::string_view name) {
  table_row(out, name, type_text(s, true), s.default_value, s.required ? "yes" : "no", doc_text(s));
}

void settings_table(std::string& out, std::span<const SettingSpec> settings) {
  if (settings.empty()) {
    out += "No settings.\n\n";
    return;
  }
  table_head(out);
  for (const auto& s : settings) setting_row(out, s, s.name);
  out += "\n";
}

// GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes.
std::string anchor(std::string_view heading) {
  std::string out;
  for (char c : heading) {
    if (c >= 'A' && c <= 'Z') out += static_cast<char>(c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') out += c;
    else if (c == ' ') out += '-';
  }
  return out;
}

std::string roles(const ConnectorSpec& spec) {
  if (spec.make_source && spec.make_destination) return "source, destination";
  if (spec.make_source) return "source";
  if (spec.make_destination) return "destination";
  return "none";
}

// Plain-text table with aligned columns; the description runs to the end of the line.
void text_table(std::string& out, std::span<const SettingSpec> settings) {
  if (settings.empty()) {
    out += "  (no settings)\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAME", "TYPE", "DEFAULT", "REQUIRED", "DESCRIPTION"});
  for (const auto& s : settings)
    rows.push_back({std::string(s.name), type_text(s, false),
                    s.default_value.empty() ? "-" : std::string(s.default_value),
                    s.required ? "yes" : "no", doc_text(s)});
  size_t width[4] = {};
  for (const auto& r : rows)
    for (size_t i = 0; i < 4; ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t i = 0; i < 4; ++i)
      line += " " + r[i] + std::string(width[i] - r[i].size() + 1, ' ');
    line += " " + r[4];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
}

}  // namespace

std::string render_connector_markdown(const ConnectorSpec& spec) {
  std::string out = "## " + std::string(spec.name) + "\n\n";
  if (!spec.summary.empty()) out += std::string(spec.summary) + "\n\n";
  out += "Use as: " + roles(spec) + ".\n\n";
  if (spec.make_source) {
    out += "### Source settings\n\n";
    settings_table(out, spec.source_settings);
  }
  if (spec.make_destination) {
    out += "### Destination settings\n\n";
    settings_table(out, spec.destination_settings);
  }
  return out;
}

std::string render_processor_markdown(const ProcessorSpec& spec) {
  std::string out = "## " + std::string(spec.name) + " (processor)\n\n";
  if (!spec.summary.empty()) out += std::string(spec.summary) + "\n\n";
  out += "### Settings\n\n";
  settings_table(out, spec.settings);
  return out;
}

std::string render_connector_text(const ConnectorSpec& spec) {
  std::string out = std::string(spec.name);
  if (!spec.summary.empty()) out += ": " + std::string(spec.summary);
  out += "\nUse as: " + roles(spec) + "\n";
  if (spec.make_source) {
    out += "\nSource settings:\n";
    text_table(out, spec.source_settings);
  }
  if (spec.make_destination) {
    out += "\nDestination settings:\n";
    text_table(out, spec.destination_settings);
  }
  return out;
}

std::string render_pipeline_file_markdown() {
  std::string out = "## Pipeline file\n\n";
  out +=
      "The keys around the connectors' settings, declared and validated like them. `checkpoints` and "
      "`http` are maps: `http: {listen: ...}` sets what the table calls `http.listen`. Every value may "
      "use `${ENV}` or `${ENV:-default}`.\n\n";
  out += "### File\n\n";
  table_head(out);
  table_row(out, "version", "integer", "1", "no",
            "Format of the file; this sluice reads version 1.");
  table_row(out, "pipelines", "list of pipelines", "", "yes",
            "The pipelines to run, at least one (below).");
  for (const auto& s : file_settings()) setting_row(out, s, s.name);
  out += "\n### Pipeline\n\n";
  out += "One entry of `pipelines`.\n\n";
  table_head(out);
  table_row(out, "id", "string", "", "yes",
            "Unique name of the pipeline in the file: letters, digits, '_', '.' and '-'. Names its "
            "checkpoint, its metrics and default names derived from it.");
  table_row(out, "source", "connector", "", "yes",
            "`{connector: NAME, settings: {...}}` with a source connector of this reference.");
  table_row(out, "processors", "list of processors", "", "no",
            "`[{type: NAME, settings: {...}}, ...]`, applied to every batch in order.");
  table_row(out, "destination", "connector", "", "yes, or destinations",
            "`{connector: NAME, settings: {...}}` with a destination connector of this reference.");
  table_row(out, "destinations", "list of destinations", "", "instead of destination",
            "`[{connector: NAME, settings: {...}, processors: [...], on_error: stop|dlq, dlq: "
            "{...}, name: NAME}, ...]`: one source feeding several destinations (pipeline-file.md, "
            "\"Several destinations\"). Each "
            "entry is checked like `destination`; `name` is unique in the pipeline (default "
            "`CONNECTOR-INDEX`, e.g. `sqlite-1`); `on_error` and `dlq` default to the pipeline's "
            "(one destination at most may use the pipeline's `dlq`). Setting both `destination` "
            "and `destinations` is an error.");
  table_row(out, "batch", "map", "", "no", "How records are grouped into batches (below).");
  for (const auto& s : pipeline_settings()) setting_row(out, s, s.name);
  table_row(out, "dlq", "connector", "", "with on_error: dlq",
            "`{connector: NAME, settings: {...}}`: the destination of rejected records; only with "
            "`on_error: dlq`.");
  table_row(
      out, "spool", "map", "", "no",
      "A durable spool between the processors and the destination (below): the source is "
      "acknowledged once a batch is spooled, the destination reads the spool at its own pace.");
  out += "\n### Batch\n\n";
  out +=
      "The `batch` map of a pipeline, e.g. `batch: {max_records: 10000, max_bytes: 64MiB, linger_ms: 50}`.\n\n";
  settings_table(out, batch_settings());
  out += "\n### Spool\n\n";
  out +=
      "The `spool` map of a pipeline, e.g. `spool: {type: disk, path: spool/orders, max_bytes: "
      "10GiB}`. The source side writes each batch to the spool and its position is acknowledged "
      "(the replication slot, the binlog position) once the batch is durable there; the "
      "destination reads the spool from a checkpoint of its own (`ID/spool/destination` in the "
      "checkpoint store, `ID/spool/NAME` for each of several `destinations`, or the destination's "
      "own table with `checkpoint_in_destination`), so a "
      "destination that is down or slow never holds the source's log open. A destination that "
      "cannot be reached is retried with backoff while the source keeps spooling. The depth "
      "(`sluice_spool_records`, `sluice_spool_bytes`, `sluice_spool_oldest_seconds`) is in "
      "/metrics and on the progress line.\n\n";
  settings_table(out, spool_settings());
  return out;
}

namespace {

// The example of docs/pipeline-file.md: every section of the file, the DLQ included. The test
// e2e ReadmeExamples.DocsExamplesValidate loads it from the generated page.
constexpr std::string_view kPipelineFileExample = R"(version: 1
pipelines:
  - id: orders-to-sqlite
    source:
      connector: postgres
      settings:
        url: ${SLUICE_TEST_PG_URL}        # scripts/services start postgres prints it
        tables: [public.orders]
        snapshot.mode: initial
    processors:
      - {type: field.exclude, settings: {fields: [after.card_number]}}
      - {type: filter, settings: {field: after.status, op: ne, value: draft}}
    destination:
      connector: sqlite
      settings: {path: replica/orders.db}   # relative: next to this file
    batch: {max_records: 5000, max_bytes: 16MiB, linger_ms: 20}
    on_error: dlq
    dlq:
      connector: file
      settings: {path: rejected.jsonl}      # each rejected record, with metadata sluice.error
checkpoints: {path: .sluice/checkpoints.db}
http: {listen: 127.0.0.1:8080}
)";

}  // namespace

std::string render_pipeline_file_page(const Registry& registry) {
  std::string out = "# Pipeline file reference\n\n";
  out +=
      "Generated by `sluice connectors --pipeline-file` from the declarations the loader validates "
      "against; do not edit by hand. The connectors' own settings are in "
      "[connectors.md](connectors.md).\n\n";
  out += "A pipeline file is one YAML document:\n\n```yaml\n" + std::string(kPipelineFileExample) +
         "```\n\n";
  out +=
      "`sluice validate FILE` checks all of it without connecting anywhere: every key and value "
      "below, each connector's and processor's settings and cross-setting rules, template keys "
      "(`{{tabel}}`), listed same-named tables of two schemas that would merge at one destination "
      "table (with `\"*\"` or `db.*` the source finds them at start, and `run` refuses then), "
      "filters that cannot hold, `rdkafka.*` properties (asked of librdkafka) and topic regexes. "
      "Errors read `FILE:LINE:COLUMN: key.path: problem`.\n\n";
  out += "## Paths\n\n";
  out +=
      "A relative path written in the file (`checkpoints.path`, a `file` or `sqlite` `path`, "
      "`tls.ca`, ...) resolves against the folder of the pipeline file, not the working directory: "
      "`sluice run conf/p.yaml` with `path: out.db` writes `conf/out.db`. A default that is a "
      "relative path (`checkpoints.path`: `.sluice/checkpoints.db`) is not written in the file and "
      "stays relative to the working directory. The embedded quickstart (`sluice run` without a "
      "file) resolves against the working directory.\n\n";
  out += "## Errors: `on_error` and `dlq`\n\n";
  out +=
      "A record the destination rejects (a data error: a constraint, a value it cannot hold, no key) "
      "stops the pipeline with `on_error: stop` (the default; the checkpoint stays before the "
      "batch). With `on_error: dlq` the batch is written again — in one pass by the SQL "
      "destinations (a savepoint per record) and kafka (each message's delivery report), in "
      "halves down to single records by the others: what the destination accepts lands in order, each rejected record goes to the `dlq` "
      "destination — any destination connector — with metadata `sluice.error`, `sluice.pipeline` "
      "and `sluice.destination`, and the pipeline goes on (`sluice_dlq_records_total`). Retriable "
      "errors (connection lost, deadlock) are retried with backoff, never dead-lettered; if the "
      "dead-letter destination fails, the pipeline stops. `dlq` without `on_error: dlq` is an "
      "error, and so is `on_error: dlq` without `dlq`.\n\n";
  out += "## Several destinations: `destinations`\n\n";
  out +=
      "A pipeline with `destinations: [...]` reads its source once (one replication slot, one "
      "binlog reader) and writes every batch to each destination, after the pipeline's "
      "`processors` and then that destination's own. Without a spool the destinations advance "
      "together: a batch is handed on when every destination has the previous one durably, the "
      "destinations of one batch write in parallel (the anchor, below, once the others hold it), "
      "and the source is acknowledged (and "
      "checkpointed) only once every destination has a batch durably — at the pace of the "
      "slowest. Each destination has its own `on_error` and `dlq`: a record one destination "
      "rejects goes to that destination's dead-letter queue (metadata `sluice.destination` and "
      "`sluice.destination_name` name it) while the others write it. A retriable error at one "
      "destination is retried with backoff at that one only; a fatal one stops the pipeline. A "
      "record the source itself rejects stops the pipeline (the source-side dead-letter queue "
      "needs a single `destination`).\n\n";
  out +=
      "With a `spool` (below) each destination reads the spool at its own pace instead: its own "
      "spool reader and checkpoint (`ID/spool/NAME` in the checkpoint store), its own "
      "processors, `on_error` and `dlq`. A destination that is down or slow holds back neither "
      "the source (acknowledged once a batch is spooled) nor the other destinations; one that "
      "cannot be reached at start or fails later is retried with backoff on its own. The spool "
      "keeps every segment until every destination passed it, so the slowest one holds the "
      "space: once the spool holds `max_bytes`, `when_full` applies to the source side (block "
      "holds the source back, and with it every destination that caught up). A retriable error is "
      "retried at its destination; a fatal one stops the pipeline. A destination's identity is "
      "its `name` (default `CONNECTOR-INDEX`, which changes when entries move: give each a "
      "`name` before reordering); a single `destination` with a spool reads as `destination` "
      "(name an entry `destination` to keep that checkpoint when moving to `destinations`). A "
      "destination added to the file later (a name without a checkpoint) starts from the spool's "
      "first batch when the spool still holds the pipeline's beginning (it was created with the "
      "pipeline and has released no segment yet), and the destinations the spool was created with "
      "start there too when the spool was added to a pipeline that ran without it; otherwise the "
      "pipeline stops at start with a one-line error (give that destination a pipeline of its "
      "own, which snapshots, or reset with `sluice cleanup`: an incremental snapshot into one "
      "destination is not built). At most one destination may store its position itself "
      "(`checkpoint_in_destination`, kafka `transactions`): the position is kept under the "
      "pipeline's id, which two destinations would share; the others resume from their spool "
      "checkpoint and replay at most the batches after it (upserts by key). Per destination: "
      "`sluice_spool_destination_records`, `_bytes`, `_oldest_seconds` and `_up` in /metrics, "
      "and its lag on the progress line.\n\n";
  out +=
      "Positions: when destinations store their own position (`checkpoint_in_destination`, "
      "kafka `transactions`), the last of them in the list is the anchor: it writes a batch only "
      "after every other destination holds it durably, and the source resumes from the anchor's "
      "stored position (or an older one another destination stores), else from the checkpoint "
      "store. The anchor thus never sees a batch again after a crash. The other destinations may "
      "be one batch ahead of it: one that stores positions skips the replayed batches at or before "
      "its own (postgres positions order by their LSN; mysql positions are not compared, so a "
      "mysql pipeline's destinations other than the anchor skip nothing; "
      "`sluice_destination_records_skipped_total` counts them); a replayed batch that straddles "
      "its position (replayed batches are not cut where the first run's were) is written whole, "
      "an idempotent upsert at keyed destinations but repeated messages at kafka — so put the "
      "destination where a repeat matters (kafka with transactions) last. A destination added "
      "to an existing pipeline starts at the pipeline's position (it gets no history). "
      "/metrics labels each destination's figures with `destination` "
      "([metrics.md](metrics.md)), and the progress line shows each destination's count. "
      "`sluice cleanup` erases the position every destination stores.\n\n";
  out += "## Checkpoints and HTTP\n\n";
  out +=
      "`checkpoints.path` is one SQLite file holding every pipeline's position, keyed by pipeline "
      "id; a position is stored only once everything up to it is durable at the destination. "
      "`http` serves `/metrics` (Prometheus) and `/healthz` while `sluice run` runs.\n\n";
  out += "### The HTTP token\n\n";
  out +=
      "HTTP listens on loopback by default. With `http.token` (e.g. `token: ${SLUICE_HTTP_TOKEN}`) "
      "or `http.token_file` (a file holding it, one trailing newline dropped), every request but "
      "`/healthz` must send `Authorization: Bearer TOKEN` and gets 401 otherwise; `/healthz` stays "
      "open for liveness probes and shows only pipeline ids and states. The token is compared in "
      "constant time and never logged. An `http.listen` beyond loopback (anything but 127.0.0.0/8, "
      "`::1` and `localhost`) without a token is an error of `sluice validate` unless "
      "`http.allow_unauthenticated: true` says it is meant. Prometheus sends the token with "
      "`authorization: {credentials_file: ...}` in its scrape config.\n\n";
  out += "## TLS\n\n";
  out +=
      "The postgres, mysql and kafka connectors (sources and destinations) take the same `tls.*` "
      "settings ([connectors.md](connectors.md)): `tls.mode` (`disabled`, `preferred` — not for "
      "kafka —, `required`: encrypted without checking the certificate, `verify_ca`: the server's "
      "certificate must be signed by `tls.ca`, `verify_identity`: and name the host sluice "
      "connected to), `tls.ca` (the CA's PEM file), `tls.cert` and `tls.key` (a client "
      "certificate and its key, both or neither) and `tls.key_password` (a secret, never logged). "
      "Defaults: postgres follows the URL's `sslmode` (libpq's `prefer` without one), mysql "
      "`preferred`, kafka `disabled`. `sluice validate` refuses `verify_*` without `tls.ca`, a "
      "certificate without its key, files given with `tls.mode: disabled` and files it cannot "
      "read. A certificate the server or client refuses (a wrong `tls.ca`, a host name the "
      "certificate does not name) stops the pipeline with one line naming `tls.ca`, never a "
      "retry loop; Kafka reports it as brokers it cannot reach, naming the tls.* settings to "
      "check (`rdkafka.log_level: 3` logs librdkafka's handshake error). "
      "For kafka, `tls.*` map to librdkafka's `security.protocol` (SSL, or SASL_SSL when "
      "`rdkafka.security.protocol` says so), `ssl.ca.location`, `ssl.certificate.location`, "
      "`ssl.key.location`, `ssl.key.password` and `ssl.endpoint.identification.algorithm`; "
      "setting one of those both ways is an error.\n\n";
  std::string keys = render_pipeline_file_markdown();
  // The section's own heading becomes the page's "Keys" section.
  keys.replace(0, keys.find('\n'), "## Keys");
  out += keys;
  out += "\n## Processors\n\n";
  out +=
      "`processors` is a list applied to every batch in order, each `{type: NAME, settings: {...}}`. "
      "A filter's field missing from a record (where the record has that part) is counted in "
      "`sluice_filter_field_missing_total{pipeline,field}` and warned about once per pipeline and "
      "field; a comparison of a number field with a value that is not a number stops the pipeline "
      "rather than drop every record.\n\n";
  std::vector<const ProcessorSpec*> processors;
  for (const auto& p : registry.processors()) processors.push_back(&p);
  std::sort(processors.begin(), processors.end(),
            [](auto* a, auto* b) { return a->name < b->name; });
  for (const auto* p : processors) {
    std::string section = render_processor_markdown(*p);
    section.replace(0, 3, "### ");
    for (size_t at = 0; (at = section.find("\n### Settings", at)) != std::string::npos; at += 6)
      section.replace(at, 13, "\n#### Settings");
    out += section;
  }
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')
    out.pop_back();
  return out;
}

std::string render_reference_markdown(const Registry& registry) {
  // Sorted by name so registration order does not churn the file.
  std::vector<const ConnectorSpec*> connectors;
  for (const auto& c : registry.connectors()) connectors.push_back(&c);
  std::sort(connectors.begin(), connectors.end(),
            [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<const ProcessorSpec*> processors;
  for (const auto& p : registry.processors()) processors.push_back(&p);
  std::sort(processors.begin(), processors.end(),
            [](auto* a, auto* b) { return a->name < b->name; });

  std::string out = "# Connector reference\n\n";
  out +=
      "Generated by `sluice connectors --markdown` from the connectors' and processors' settings "
      "tables; do not edit by hand.\n\n";
  out +=
      "Settings go under `settings:` of a pipeline's `source`, `destination`, `dlq` or processor. "
      "Nested maps are the same as dotted names (`snapshot: {mode: initial}` is "
      "`snapshot.mode: initial`), and every value may use `${ENV}` or `${ENV:-default}`.\n\n";
  out +=
      "Durations: `250ms`, `5s`, `2m`, `1h` or a bare number of milliseconds. "
      "Sizes: `512KiB`, `64MiB`, `1GiB`, `10MB` or a bare number of bytes.\n\n";

  if (!connectors.empty()) {
    out += "Connectors:";
    for (size_t i = 0; i < connectors.size(); ++i)
      out += std::string(i ? "," : "") + " [" + std::string(connectors[i]->name) + "](#" +
             anchor(connectors[i]->name) + ")";
    out += "\n\n";
  }
  if (!processors.empty()) {
    out += "Processors:";
    for (size_t i = 0; i < processors.size(); ++i)
      out += std::string(i ? "," : "") + " [" + std::string(processors[i]->name) + "](#" +
             anchor(std::string(processors[i]->name) + " (processor)") + ")";
    out += "\n\n";
  }
  out += "The pipeline-level keys are described under [Pipeline file](#pipeline-file).\n\n";
  out += render_pipeline_file_markdown();
  for (const auto* c : connectors) out += render_connector_markdown(*c);
  for (const auto* p : processors) out += render_processor_markdown(*p);
  // Exactly one trailing newline.
  while (out.size() >= 2 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n')
    out.pop_back();
  return out;
}

}  // namespace sluice
