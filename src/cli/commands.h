// The sluice subcommands. Each returns the process exit code: 0 ok, 1 runtime failure,
// 2 bad usage or configuration.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sluice {

int run_command(const std::optional<std::string>& file, double idle_exit_seconds);
int validate_command(const std::string& file);
int connectors_command(const std::optional<std::string>& name, bool markdown,
                       bool pipeline_file = false);
int cleanup_command(const std::string& file);
// Checks every pipeline's source, destinations and disk space without moving data: a checklist
// with the fix of each failure; 1 when a check failed, 2 for a bad file.
int doctor_command(const std::string& file);
// Thin clients of a running sluice's HTTP API (exit codes: api_client_command.cc, docs/api.md).
int status_command(const std::string& url, bool json, const std::string& token);
int pipelines_command(const std::string& action, const std::string& id, const std::string& url,
                      bool json, const std::string& token);
int snapshot_command(const std::string& file, const std::string& pipeline,
                     const std::vector<std::string>& tables);

}  // namespace sluice
