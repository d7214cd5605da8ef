#include "connectors/generator/employees.h"

#include <fmt/format.h>

#include <cctype>

namespace sluice::generator {

namespace {
constexpr std::string_view kFirst[] = {
    "Ada",      "Alan",  "Barbara", "Claude",    "Dennis", "Edsger",   "Frances", "Grace",
    "Hedy",     "Ivan",  "John",    "Katherine", "Leslie", "Margaret", "Niklaus", "Ole",
    "Radia",    "Shafi", "Tim",     "Whitfield", "Anita",  "Bjarne",   "Donald",  "Elena",
    "Fernando", "Guido", "Hal",     "Ingrid",    "James",  "Ken",      "Linus",   "Marvin"};
constexpr std::string_view kLast[] = {
    "Lovelace",   "Turing",   "Liskov",     "Shannon",    "Ritchie",     "Dijkstra", "Allen",
    "Hopper",     "Lamarr",   "Sutherland", "McCarthy",   "Johnson",     "Lamport",  "Hamilton",
    "Wirth",      "Dahl",     "Perlman",    "Goldwasser", "Berners-Lee", "Diffie",   "Borg",
    "Stroustrup", "Knuth",    "Garcia",     "Corbato",    "Rossum",      "Abelson",  "Daubechies",
    "Gosling",    "Thompson", "Torvalds",   "Minsky"};
constexpr std::string_view kPositions[] = {
    "Engineer", "Senior Engineer", "Staff Engineer", "Manager", "Director",  "Analyst",
    "Designer", "Product Manager", "Support",        "Sales",   "Recruiter", "Accountant"};
// 2024-01-01T00:00:00Z in microseconds.
constexpr int64_t kBaseMicros = 1704067200LL * 1000000LL;
constexpr int32_t kBaseDay = 19723;  // 2024-01-01

uint64_t mix(uint64_t seed, uint64_t a, uint64_t salt) {
  return splitmix64(seed ^ splitmix64(a * 4 + salt));
}
}  // namespace

EmployeeRow employee_row(uint64_t seed, int64_t id, uint64_t event) {
  const uint64_t h = mix(seed, uint64_t(id), 1);
  const uint64_t v = mix(seed, event, 2);
  EmployeeRow r;
  r.id = id;
  r.first_name = kFirst[h % std::size(kFirst)];
  r.last_name = kLast[(h >> 8) % std::size(kLast)];
  r.hire_date = kBaseDay - int32_t((h >> 16) % 7300);
  r.created_at = kBaseMicros + id * 1000000LL;
  r.full_time = (v & 7) != 0;
  r.position = kPositions[(v >> 3) % std::size(kPositions)];
  // Multiples of 0.5 up to 250,000 are exact in a float (24-bit mantissa).
  r.salary = 30000.0 + double((v >> 12) % 440000) * 0.5;
  r.updated_at = kBaseMicros + int64_t(event) * 1000LL;
  return r;
}

std::string EmployeeRow::name() const { return fmt::format("{} {}", first_name, last_name); }

std::string EmployeeRow::email() const {
  std::string e = fmt::format("{}.{}.{}@example.com", first_name, last_name, id);
  for (char& c : e) c = char(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

EventPlanner::EventPlanner(uint64_t seed, double create_weight, double update_weight,
                           double delete_weight)
    : seed_(seed) {
  const double total = create_weight + update_weight + delete_weight;
  create_cut_ = total > 0 ? create_weight / total : 1.0;
  update_cut_ = total > 0 ? (create_weight + update_weight) / total : 1.0;
  tracking_ = create_cut_ < 1.0;
}

EventPlanner::Event EventPlanner::next() {
  const uint64_t i = index_++;
  if (!tracking_) return {GenOp::create, next_id_++};
  const uint64_t r = mix(seed_, i, 3);
  const double u = double(r >> 11) * (1.0 / 9007199254740992.0);
  GenOp op = u < create_cut_ ? GenOp::create : (u < update_cut_ ? GenOp::update : GenOp::remove);
  if (op != GenOp::create && alive_.empty()) op = GenOp::create;
  if (op == GenOp::create) {
    const int64_t id = next_id_++;
    if (position_.size() <= size_t(id)) position_.resize(size_t(id) + 1);
    position_[size_t(id)] = uint32_t(alive_.size());
    alive_.push_back(uint32_t(id));
    return {op, id};
  }
  const size_t k = size_t(mix(seed_, i, 4) % alive_.size());
  const int64_t id = alive_[k];
  if (op == GenOp::remove) {
    const uint32_t last = alive_.back();
    alive_[k] = last;
    position_[last] = uint32_t(k);
    alive_.pop_back();
  }
  return {op, id};
}

}  // namespace sluice::generator
