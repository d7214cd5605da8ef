// Runtime hot path: generator → discard through a real Pipeline (reader, queue, writer, acker,
// checkpoints), default batch size. Reports records/s as items_per_second.
#include <benchmark/benchmark.h>

#include <map>

#include "runtime/pipeline.h"
#include "sluice/json.h"
#include "sluice/registry.h"

namespace sluice {
namespace {

class NullCheckpoints final : public CheckpointStore {
 public:
  Result<std::optional<std::string>> load(std::string_view) override {
    return std::optional<std::string>();
  }
  Status save(std::string_view, std::string_view) override { return ok_status(); }
  Status erase(std::string_view) override { return ok_status(); }
};

std::unique_ptr<Source> generator(int64_t count) {
  const ConnectorSpec* spec = Registry::builtin().connector("generator");
  Settings s;
  (void)settings_from_text(spec->source_settings, {{"count", std::to_string(count)}}, &s);
  return std::move(spec->make_source(s).value());
}

std::unique_ptr<Destination> discard() {
  const ConnectorSpec* spec = Registry::builtin().connector("discard");
  Settings s;
  (void)settings_from_text(spec->destination_settings, {}, &s);
  return std::move(spec->make_destination(s).value());
}

void BM_GeneratorToDiscard(benchmark::State& state) {
  const int64_t count = state.range(0);
  for (auto _ : state) {
    NullCheckpoints cps;
    PipelineOptions o;
    o.id = "bench";
    o.source_connector = "generator";
    o.destination_connector = "discard";
    o.max_records = 10000;
    Pipeline p(o, generator(count), {}, discard(), &cps);
    if (!p.run().ok()) state.SkipWithError("pipeline failed");
    benchmark::DoNotOptimize(p.metrics().records_written.load());
  }
  state.SetItemsProcessed(state.iterations() * count);
}
BENCHMARK(BM_GeneratorToDiscard)->Arg(2000000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The generator, opened, reading one default-sized batch per call.
struct GeneratorReader {
  std::unique_ptr<Source> src = generator(0);
  ReadRequest req;
  std::stop_source stop;
  GeneratorReader() {
    ConnectorContext ctx{"bench", "generator", nullptr};
    (void)src->open(ctx, std::nullopt);
  }
  void read(Batch& batch) { (void)src->read(batch, req, stop.get_token()); }
};

// Only the source: how fast records are built into a batch.
void BM_GeneratorRead(benchmark::State& state) {
  GeneratorReader gen;
  Batch batch;
  for (auto _ : state) {
    batch.clear();
    gen.read(batch);
    benchmark::DoNotOptimize(batch.size());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(gen.req.max_records));
}
BENCHMARK(BM_GeneratorRead);

// The OpenCDC JSON encoder (file, Redis and Kafka destinations) on the generator's records.
void BM_EncodeRecordJson(benchmark::State& state) {
  GeneratorReader gen;
  Batch batch;
  gen.read(batch);
  std::string out;
  size_t bytes = 0;
  for (auto _ : state) {
    for (const Record& r : batch.records()) {
      out.clear();
      encode_record_json(r, out);
      bytes += out.size();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(batch.size()));
  state.SetBytesProcessed(int64_t(bytes));
}
BENCHMARK(BM_EncodeRecordJson);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
