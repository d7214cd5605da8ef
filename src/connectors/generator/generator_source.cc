// The `generator` source: deterministic changes to an `employees` table, for quickstarts, tests and
// benchmarks. Position = number of events emitted (decimal text); a restart replays only the
// planner's decisions (no records) to rebuild the live key set, then continues exactly there.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <thread>

#include "connectors/builtin.h"
#include "connectors/generator/employees.h"

namespace sluice {

namespace {

// Options bound to the settings table below (defaults written there, once); finalize() checks the
// operation mix and turns it into weights.
struct Options {
  int64_t count = 0;
  double rate = 0;
  int64_t seed = 0;
  std::optional<std::map<std::string, double>> operations;
  std::string table;
  double create = 1, update = 0, del = 0;  // derived by finalize from `operations`
};

constexpr auto kGeneratorSettings = settings_table<Options>(
    setting<&Options::count>("count", "Number of events to emit; 0 = unlimited.")
        .with_default("0")
        .at_least(0),
    setting<&Options::rate>("rate", "Events per second; 0 = as fast as possible.")
        .with_default("0")
        .at_least(0),
    setting<&Options::seed>("seed", "Seed of the deterministic data; same seed, same events.")
        .with_default("1"),
    setting<&Options::operations>(
        "operations",
        "Mix of operations as weights, e.g. {create: 0.8, update: 0.15, delete: 0.05}; updates and "
        "deletes always target existing keys. Default: inserts only."),
    setting<&Options::table>("table", "Value of the `table` metadata of every record.")
        .with_default("employees"));

Status finalize(Options& o) {
  if (!o.operations) return ok_status();
  o.create = o.update = o.del = 0;
  for (const auto& [op, w] : *o.operations) {
    if (w < 0)
      return Error(Errc::config,
                   fmt::format("setting 'operations': weight of '{}' must be >= 0", op));
    if (op == "create") o.create = w;
    else if (op == "update") o.update = w;
    else if (op == "delete") o.del = w;
    else
      return Error(Errc::config, fmt::format("setting 'operations': unknown operation '{}' "
                                             "(use create, update, delete)",
                                             op));
  }
  if (o.create <= 0)
    return Error(
        Errc::config,
        "setting 'operations': 'create' needs a weight > 0 (updates and deletes need existing keys)");
  return ok_status();
}

using Clock = std::chrono::steady_clock;

class GeneratorSource final : public Source {
 public:
  GeneratorSource(int64_t count, double rate, uint64_t seed, double c, double u, double d,
                  std::string table)
      : count_(count), rate_(rate), seed_(seed), planner_(seed, c, u, d), table_(std::move(table)) {
    meta_fields_[0] = Field{meta::kTable, Value::string(table_)};
    metadata_ = Value::object(meta_fields_.data(), 1);
  }

  Status open(const ConnectorContext&, const std::optional<std::string>& checkpoint) override {
    if (checkpoint) {
      uint64_t n = 0;
      auto [p, ec] =
          std::from_chars(checkpoint->data(), checkpoint->data() + checkpoint->size(), n);
      if (ec != std::errc() || p != checkpoint->data() + checkpoint->size())
        return Error(Errc::data,
                     fmt::format("checkpoint '{}' is not a generator position; remove the "
                                 "pipeline's checkpoint to start over",
                                 *checkpoint));
      while (planner_.events() < n) (void)planner_.next();
    }
    rate_start_ = Clock::now();
    rate_base_ = planner_.events();
    return ok_status();
  }

  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override {
    Clock::time_point first{};
    while (batch.size() < req.max_records && batch.bytes() < req.max_bytes) {
      if (count_ > 0 && planner_.events() >= uint64_t(count_)) break;
      if (rate_ > 0) {
        auto due =
            rate_start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                              double(planner_.events() - rate_base_) / rate_));
        auto now = Clock::now();
        if (due > now) {
          auto limit = batch.empty() ? now + req.poll : first + req.linger;
          if (due > limit) {  // the next event is not due within this batch's linger
            sleep_until(limit, stop);
            break;
          }
          sleep_until(due, stop);
          if (stop.stop_requested()) break;
        }
      }
      if (batch.empty()) first = Clock::now();
      emit(batch);
    }
    batch.set_position(fmt::format_int(planner_.events()).str());
    if (count_ > 0 && planner_.events() >= uint64_t(count_)) return ReadStatus::end;
    return ReadStatus::more;
  }

  void ack(std::string_view) override {}

 private:
  static void sleep_until(Clock::time_point t, std::stop_token& stop) {
    while (!stop.stop_requested()) {
      auto now = Clock::now();
      if (now >= t) return;
      std::this_thread::sleep_for(
          std::min<Clock::duration>(t - now, std::chrono::milliseconds(50)));
    }
  }

  // Text of the form "<a> <b>" / lower-cased email, built straight into the arena.
  static std::string_view join(Arena& arena, std::string_view a, char sep, std::string_view b) {
    char* p = static_cast<char*>(arena.allocate(a.size() + 1 + b.size(), 1));
    std::memcpy(p, a.data(), a.size());
    p[a.size()] = sep;
    std::memcpy(p + a.size() + 1, b.data(), b.size());
    return {p, a.size() + 1 + b.size()};
  }

  static std::string_view email(Arena& arena, const generator::EmployeeRow& r) {
    char buf[160];
    char* o = buf;
    for (char c : r.first_name) *o++ = char(c >= 'A' && c <= 'Z' ? c + 32 : c);
    *o++ = '.';
    for (char c : r.last_name) *o++ = char(c >= 'A' && c <= 'Z' ? c + 32 : c);
    *o++ = '.';
    o = std::to_chars(o, buf + sizeof(buf), r.id).ptr;
    static constexpr std::string_view kDomain = "@example.com";
    if (o + kDomain.size() > buf + sizeof(buf)) return {};  // names are short; cannot happen
    std::memcpy(o, kDomain.data(), kDomain.size());
    o += kDomain.size();
    return arena.copy({buf, size_t(o - buf)});
  }

  void emit(Batch& batch) {
    const uint64_t index = planner_.events();
    const auto ev = planner_.next();
    Arena& arena = batch.arena();
    Record& r = batch.add();
    char pos[24];
    auto end = std::to_chars(pos, pos + sizeof(pos), index + 1).ptr;
    r.position = arena.copy({pos, size_t(end - pos)});
    r.metadata = metadata_;
    r.key = batch.object(1).add("id", Value::int64(ev.id)).build();
    if (ev.op == generator::GenOp::remove) {
      r.op = Operation::remove;
      return;
    }
    r.op = ev.op == generator::GenOp::create ? Operation::create : Operation::update;
    const generator::EmployeeRow row = generator::employee_row(seed_, ev.id, index);
    r.after = batch.object(9)
                  .add("id", Value::int64(row.id))
                  .add("name", Value::string(join(arena, row.first_name, ' ', row.last_name)))
                  .add("email", Value::string(email(arena, row)))
                  .add("full_time", Value::boolean(row.full_time))
                  .add("position", Value::string(row.position))
                  .add("hire_date", Value::date(row.hire_date))
                  .add("salary", Value::float64(row.salary))
                  .add("updated_at", Value::timestamptz(row.updated_at))
                  .add("created_at", Value::timestamptz(row.created_at))
                  .build();
  }

  int64_t count_;
  double rate_;
  uint64_t seed_;
  generator::EventPlanner planner_;
  std::string table_;
  std::array<Field, 1> meta_fields_;
  Value metadata_;
  Clock::time_point rate_start_;
  uint64_t rate_base_ = 0;
};

Result<std::unique_ptr<Source>> make_generator(const Settings& s) {
  SLUICE_TRY_ASSIGN(Options o, bind_settings(kGeneratorSettings, s));
  SLUICE_TRY(finalize(o));
  return std::unique_ptr<Source>(std::make_unique<GeneratorSource>(
      o.count, o.rate, uint64_t(o.seed), o.create, o.update, o.del, std::move(o.table)));
}

}  // namespace

constexpr std::string_view kGeneratorMetadata[] = {"table"};

ConnectorSpec generator_connector() {
  return ConnectorSpec{
      .name = "generator",
      .summary =
          "Deterministic changes to an `employees` table (inserts, updates, deletes) for "
          "quickstarts, tests and benchmarks.",
      .source_settings = kGeneratorSettings,
      .destination_settings = {},
      .make_source = &make_generator,
      .make_destination = nullptr,
      .source_metadata = kGeneratorMetadata,
  };
}

}  // namespace sluice
