// The sluice binary.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>

#include "cli/commands.h"
#include "cli/logging.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "dev"
#endif

namespace {

// A closed stdin/stdout/stderr would hand its number to the next file sluice opens (a checkpoint
// lock, a socket), and log lines would land in it: keep 0-2 open, on /dev/null if need be.
void keep_standard_fds_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) continue;
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0 && null_fd != fd) {
      dup2(null_fd, fd);
      close(null_fd);
    }
  }
}

// A usage error: one line naming the fix, exit 2 (CLI11's own codes are 1xx).
int usage_error(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  // The first word that is not an option is the subcommand.
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("-")) {
      if ((a == "--log-level" || a == "--log-format") && i + 1 < argc) ++i;
      continue;
    }
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known = known || sub->get_name() == a;
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      sluice::cli_error(
          fmt::format("unknown command '{}' (commands: {}; see sluice --help)", a, names));
      return 2;
    }
    break;
  }
  std::string what = e.what();
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  for (char& c : what)
    if (c == '\n') c = ' ';
  sluice::cli_error(fmt::format("{} (see sluice --help)", what));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  keep_standard_fds_open();
  // A gone pipe reader is an EPIPE on the next write (ignored there), never a kill.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{
      "sluice — change data capture and data integration.\n"
      "Streams rows and changes out of databases into Kafka, databases and files."};
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand: `sluice run f.yaml --log-level
                      // debug`
  std::string log_level = "info", log_format = "text";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text or json")->capture_default_str();

  auto* run =
      app.add_subcommand("run",
                         "Run the pipelines of FILE, or of every *.yaml file of directory FILE "
                         "(no FILE: the embedded quickstart). FILE is watched: an edit, a file "
                         "added or removed, or SIGHUP applies to the pipelines it adds, removes "
                         "or changes; an invalid edit is logged and ignored");
  std::optional<std::string> run_file;
  double idle_exit = 0;
  run->add_option("FILE", run_file, "pipeline file (YAML), or a directory of them");
  run->add_option(
      "--idle-exit", idle_exit,
      "exit 0 once every source has been idle this many seconds and everything read is acknowledged");

  auto* validate = app.add_subcommand("validate", "Check a pipeline file without running it");
  std::string validate_file;
  validate->add_option("FILE", validate_file, "pipeline file (YAML), or a directory of them")
      ->required();

  auto* connectors =
      app.add_subcommand("connectors", "List connectors and processors, or show one's settings");
  std::optional<std::string> connector_name;
  bool markdown = false;
  connectors->add_option("NAME", connector_name, "connector or processor name");
  connectors->add_flag("--markdown", markdown,
                       "print the reference as Markdown (docs/connectors.md)");
  bool pipeline_file = false;
  connectors->add_flag("--pipeline-file", pipeline_file,
                       "print the pipeline file reference as Markdown (docs/pipeline-file.md)");

  auto* cleanup = app.add_subcommand(
      "cleanup", "Drop what the file's pipelines created on servers, and their checkpoints");
  std::string cleanup_file;
  cleanup->add_option("FILE", cleanup_file, "pipeline file (YAML)")->required();

  auto* doctor = app.add_subcommand(
      "doctor",
      "Check the servers of the file's pipelines (configuration, privileges, slots) "
      "without moving data; exits 1 when a check fails");
  std::string doctor_file;
  doctor->add_option("FILE", doctor_file, "pipeline file (YAML)")->required();

  auto* snapshot = app.add_subcommand(
      "snapshot",
      "Snapshot tables of a pipeline incrementally while it streams (writes a signal row into the "
      "source's signal.table)");
  std::string snapshot_file, snapshot_pipeline;
  std::vector<std::string> snapshot_tables;
  snapshot->add_option("FILE", snapshot_file, "pipeline file (YAML)")->required();
  snapshot->add_option("PIPELINE", snapshot_pipeline, "pipeline id")->required();
  snapshot->add_option("TABLE", snapshot_tables, "tables (schema.table)")->required();

  auto* status = app.add_subcommand(
      "status",
      "Show the pipelines of a running sluice (its HTTP API at URL); exits 1 when one failed, 3 "
      "when nothing answers, 4 without the right token");
  std::string status_url = "http://127.0.0.1:8080", api_token;
  bool status_json = false;
  status->add_option("URL", status_url, "the run's http.listen address")->capture_default_str();
  status->add_flag("--json", status_json, "print the API's JSON answer");
  status->add_option("--token", api_token, "http.token of the run (default: $SLUICE_HTTP_TOKEN)");

  auto* pipelines = app.add_subcommand(
      "pipelines",
      "Pause, resume or restart a pipeline of a running sluice (its HTTP API); exits 1 when the "
      "API refuses, 3 when nothing answers, 4 without the right token, 5 for an unknown id");
  std::string pipelines_action, pipelines_id, pipelines_url = "http://127.0.0.1:8080";
  bool pipelines_json = false;
  pipelines->add_option("ACTION", pipelines_action, "pause, resume or restart")
      ->required()
      ->check(CLI::IsMember({"pause", "resume", "restart"}));
  pipelines->add_option("ID", pipelines_id, "pipeline id")->required();
  pipelines->add_option("--url", pipelines_url, "the run's http.listen address")
      ->capture_default_str();
  pipelines->add_flag("--json", pipelines_json, "print the API's JSON answer");
  pipelines->add_option("--token", api_token,
                        "http.token of the run (default: $SLUICE_HTTP_TOKEN)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    sluice::setup_logging("info", log_format == "json" ? "json" : "text");
    return usage_error(app, e, argc, argv);
  }
  if (!sluice::setup_logging(log_level, log_format)) {
    sluice::cli_error(
        "--log-level must be trace|debug|info|warn|error|off and --log-format text|json");
    return 2;
  }
  if (*run) return sluice::run_command(run_file, idle_exit);
  if (*validate) return sluice::validate_command(validate_file);
  if (*connectors) return sluice::connectors_command(connector_name, markdown, pipeline_file);
  if (*cleanup) return sluice::cleanup_command(cleanup_file);
  if (*doctor) return sluice::doctor_command(doctor_file);
  if (*status) return sluice::status_command(status_url, status_json, api_token);
  if (*pipelines)
    return sluice::pipelines_command(pipelines_action, pipelines_id, pipelines_url, pipelines_json,
                                     api_token);
  if (*snapshot) return sluice::snapshot_command(snapshot_file, snapshot_pipeline, snapshot_tables);
  return 2;
}
