// The `discard` destination: counts and drops every record (benchmarks, dry runs). Every batch is
// "durable" as soon as it arrives, so it measures the rest of the pipeline.
#include "connectors/builtin.h"

namespace sluice {

namespace {

class DiscardDestination final : public Destination {
 public:
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch&, WriteDone done) override { done(ok_status()); }
};

struct Options {};  // no settings

constexpr auto kSettings = settings_table<Options>();

Result<std::unique_ptr<Destination>> make_discard(const Settings& s) {
  SLUICE_TRY(bind_settings(kSettings, s, "discard"));  // refuses any setting given by hand
  return std::unique_ptr<Destination>(std::make_unique<DiscardDestination>());
}

}  // namespace

ConnectorSpec discard_connector() {
  return ConnectorSpec{
      .name = "discard",
      .summary = "Counts and drops every record; for benchmarks and dry runs.",
      .source_settings = {},
      .destination_settings = kSettings,
      .make_source = nullptr,
      .make_destination = &make_discard,
  };
}

}  // namespace sluice
