// A Batch is the unit that moves through the pipeline. It owns the memory of its records (an
// arena), the position up to which it advances the source once durable, and a sequence number the
// acker uses to acknowledge in order.
//
//   source.read(batch) ──▶ processors(batch) ──▶ destination.write(batch, done)
//        fills records        edit / drop records       done(status) when durable
//        sets position()      position() is kept         (possibly on another thread,
//                                                          possibly out of order)
//
// A filtered-out record disappears from records() but the batch's position still covers it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/arena.h"
#include "sluice/record.h"

namespace sluice {

class Batch;

// Builds an object Value field by field in a batch's arena (no heap allocation).
class ObjectBuilder {
 public:
  ObjectBuilder(Arena& arena, uint32_t capacity)
      : fields_(arena.allocate_array<Field>(capacity)), capacity_(capacity) {}
  ObjectBuilder& add(std::string_view name, Value v) noexcept {
    if (n_ < capacity_) fields_[n_++] = Field{name, v};
    return *this;
  }
  uint32_t size() const noexcept { return n_; }
  Value build() const noexcept { return Value::object(fields_, n_); }

 private:
  Field* fields_;
  uint32_t capacity_;
  uint32_t n_ = 0;
};

class Batch {
 public:
  explicit Batch(size_t arena_chunk = 256 * 1024) : arena_(arena_chunk) {}
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  Arena& arena() noexcept { return arena_; }
  std::vector<Record>& records() noexcept { return records_; }
  const std::vector<Record>& records() const noexcept { return records_; }
  size_t size() const noexcept { return records_.size(); }
  bool empty() const noexcept { return records_.empty(); }

  Record& add() { return records_.emplace_back(); }
  // A record made whole in place: cheaper than add() and filling in (no clearing first) for a
  // source's hot path.
  Record& add(Operation op, Value metadata, Value key, Value before, Value after) {
    return records_.emplace_back(op, std::string_view(), metadata, key, before, after);
  }
  std::string_view copy(std::string_view s) { return arena_.copy(s); }
  ObjectBuilder object(uint32_t capacity) { return ObjectBuilder(arena_, capacity); }

  // Approximate payload size in bytes (arena bytes plus record headers).
  size_t bytes() const noexcept { return arena_.used() + records_.size() * sizeof(Record); }

  // The source position this batch advances to once durable (usually the last record's position;
  // a source may advance it without records, e.g. past filtered or skipped changes).
  const std::string& position() const noexcept { return position_; }
  void set_position(std::string_view p) { position_.assign(p.data(), p.size()); }
  bool has_position() const noexcept { return !position_.empty(); }

  // Keeps external memory referenced by the records (e.g. a relation's column names) alive.
  void retain(std::shared_ptr<const void> p) { retained_.push_back(std::move(p)); }

  // Records read from the source before processors dropped any (for metrics).
  size_t read_count() const noexcept { return read_count_; }
  void set_read_count(size_t n) noexcept { read_count_ = n; }

  // Control records (schema changes, markers) among records(): counted by no record counter.
  size_t control_count() const noexcept { return control_count_; }
  void set_control_count(size_t n) noexcept { control_count_ = n; }
  size_t data_count() const noexcept { return records_.size() - control_count_; }

  uint64_t sequence() const noexcept { return sequence_; }
  void set_sequence(uint64_t s) noexcept { sequence_ = s; }

  // Records a source could not represent and marked for the dead-letter queue (metadata
  // meta::kError holds why, the value its raw text): the runtime sends them there, not to the
  // destination. Only sources of a pipeline with on_error: dlq mark records.
  size_t source_rejects() const noexcept { return source_rejects_; }
  void add_source_reject() noexcept { ++source_rejects_; }
  void clear_source_rejects() noexcept { source_rejects_ = 0; }

  // Makes the batch empty for reuse; keeps capacity.
  void clear() noexcept {
    records_.clear();
    arena_.reset();
    position_.clear();
    retained_.clear();
    read_count_ = 0;
    control_count_ = 0;
    sequence_ = 0;
    source_rejects_ = 0;
  }

 private:
  Arena arena_;
  std::vector<Record> records_;
  std::string position_;
  std::vector<std::shared_ptr<const void>> retained_;
  size_t read_count_ = 0;
  size_t control_count_ = 0;
  uint64_t sequence_ = 0;
  size_t source_rejects_ = 0;
};

}  // namespace sluice
