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

Result<std::unique_ptr<Destination>> make_discard(const Settings&) {
  return std::unique_ptr<Destination>(std::make_unique<DiscardDestination>());
}

}  // namespace

ConnectorSpec discard_connector() {
  return ConnectorSpec{
      .name = "discard",
      .summary = "Counts and drops every record; for benchmarks and dry runs.",
      .source_settings = {},
      .destination_settings = {},
      .make_source = nullptr,
      .make_destination = &make_discard,
  };
}

}  // namespace sluice
