// The deterministic `employees` data of the generator source (the table of the public Conduit vs
// Kafka Connect PostgreSQL benchmark):
//
//   id INT PRIMARY KEY, name VARCHAR(255), email VARCHAR(255), full_time BOOLEAN, position
//   VARCHAR(100), hire_date DATE, salary REAL, updated_at TIMESTAMPTZ, created_at TIMESTAMPTZ
//
// Every value is a pure function of (seed, id) — attributes fixed at hire — and (seed, event index)
// — attributes an update changes — so tests can recompute exactly what any record must contain.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::generator {

struct EmployeeRow {
  int64_t id;
  std::string_view first_name;
  std::string_view last_name;
  bool full_time;
  std::string_view position;
  int32_t hire_date;          // days since epoch
  double salary;              // exactly representable as float (REAL)
  int64_t updated_at;         // micros since epoch, UTC
  int64_t created_at;         // micros since epoch, UTC
  std::string name() const;   // "First Last"
  std::string email() const;  // "first.last.<id>@example.com"
};

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The row of employee `id` as written by event number `event` (its create or latest update).
EmployeeRow employee_row(uint64_t seed, int64_t id, uint64_t event);

enum class GenOp : uint8_t { create, update, remove };

// Replays the generator's decisions: which operation event `i` is and which key it touches.
// Deterministic for a seed and an operations mix; holds the set of live keys (8 bytes per key when
// updates or deletes are in the mix, nothing for inserts only).
class EventPlanner {
 public:
  EventPlanner(uint64_t seed, double create_weight, double update_weight, double delete_weight);
  struct Event {
    GenOp op;
    int64_t id;
  };
  Event next();  // the event with index events(), then advances
  uint64_t events() const noexcept { return index_; }
  int64_t created() const noexcept { return next_id_ - 1; }
  size_t live() const noexcept { return tracking_ ? alive_.size() : size_t(next_id_ - 1); }

 private:
  uint64_t seed_;
  double create_cut_, update_cut_;
  bool tracking_;
  uint64_t index_ = 0;
  int64_t next_id_ = 1;
  std::vector<uint32_t> alive_;     // live ids, unordered (swap-remove on delete)
  std::vector<uint32_t> position_;  // id -> index in alive_
};

}  // namespace sluice::generator
