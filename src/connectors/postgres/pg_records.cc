// pgoutput tuples (and COPY rows, decoded into the same Tuple) → records: values typed by the
// column's type, the record key from the primary key (or replica identity), and metadata.
#include <fmt/format.h>

#include "connectors/postgres/postgres_source_driver.h"

namespace sluice::pg {

Value PostgresDriver::metadata(Batch& batch, const TableState& t, std::string_view lsn, bool cdc) {
  ObjectBuilder m = batch.object(cdc ? 6 : 2);
  m.add(meta::kSchema, Value::string(t.rel->schema));
  m.add(meta::kTable, Value::string(t.rel->name));
  if (cdc) {
    const auto* tx = st_->caches.tx_metadata();
    if (!tx)
      tx = &st_->caches.set_tx_metadata({batch.copy(tx_final_.to_string()),
                                         batch.copy(format_timestamptz(tx_commit_time_)),
                                         batch.copy(std::to_string(tx_xid_)),
                                         {}});
    m.add("lsn", Value::string(lsn));
    m.add("commit_lsn", Value::string((*tx)[0]));
    m.add("commit_time", Value::string((*tx)[1]));
    m.add("xid", Value::string((*tx)[2]));
  }
  return m.build();
}

Status PostgresDriver::tuple_to_object(Batch& batch, const TableState& t, const Tuple& tuple,
                                       bool key_only, Value* out) {
  const auto& cols = t.rel->columns;
  if (tuple.size() != cols.size())
    return Error(Errc::data, fmt::format("{}.{}: tuple has {} columns, relation {}", t.rel->schema,
                                         t.rel->name, tuple.size(), cols.size()));
  const uint32_t n = key_only ? uint32_t(t.key_columns.size()) : uint32_t(cols.size());
  ObjectBuilder b = batch.object(n);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = key_only ? t.key_columns[k] : k;
    const TupleValue& tv = tuple[i];
    if (tv.kind == 'u') continue;  // unchanged TOAST: absent, so destinations keep the stored value
    if (tv.kind == 'n') {
      b.add(cols[i].name, Value::null());
      continue;
    }
    if (Value fast;
        tv.kind == 'b' && binary_to_value_fast(cols[i].type_oid, tv.data, batch.arena(), &fast)) {
      b.add(cols[i].name, fast);
      continue;
    }
    auto v = tv.kind == 'b' ? binary_to_value(types_, cols[i].type_oid, tv.data, batch.arena())
                            : text_to_value(types_, cols[i].type_oid, tv.data, batch.arena());
    if (v.ok()) [[likely]] {
      b.add(cols[i].name, v.value());
      continue;
    }
    SLUICE_TRY_ASSIGN(Value kept, value_problem(batch, t, i, tv, std::move(v).error()));
    b.add(cols[i].name, kept);
  }
  *out = b.build();
  return ok_status();
}

// A value the column's type reader refused (`e`): the pipeline stops, or, with a dead-letter
// queue and a value sluice cannot represent, the record keeps the value as text (or bytes) and is
// marked for the queue (mark_poison).
Result<Value> PostgresDriver::value_problem(Batch& batch, const TableState& t, uint32_t i,
                                            const TupleValue& tv, Error e) {
  const auto& col = t.rel->columns[i];
  std::string_view text = tv.data;
  std::string rendered;
  if (tv.kind == 'b' && e.code() == Errc::data) {
    // A value sluice cannot represent, in binary: its text (the server's output function) is
    // what the error shows and the dead-letter queue keeps, as on the text path.
    if (auto r = binary_as_text(col.type_oid, tv.data); r.ok()) {
      rendered = std::move(r).value();
      text = rendered;
      auto again = text_to_value(types_, col.type_oid, text, batch.arena());
      if (!again.ok()) e = std::move(again).error();
    }
  }
  e = e.with_context(fmt::format("{}.{}.{}: ", t.rel->schema, t.rel->name, col.name));
  if (e.code() != Errc::data) return e;
  // A legal value sluice cannot represent (a timestamp beyond 294247 AD): skipping the change
  // would lose it, so it stops the stream — unless the pipeline has a dead-letter queue, where the
  // record goes with the raw value as text.
  if (!st_->ctx.dead_letters)
    return Error(Errc::data,
                 e.message() +
                     "; to go on, set on_error: dlq with a dlq destination: such "
                     "records then go to the dead-letter queue, with the value as text");
  if (poison_.empty()) poison_ = e.message();
  return tv.kind == 'b' && rendered.empty() ? Value::bytes(batch.copy(tv.data))
                                            : Value::string(batch.copy(text));
}

Result<std::string> PostgresDriver::binary_as_text(uint32_t type_oid, std::string_view bytes) {
  // Its own connection: the snapshot's may be busy with the next chunk's COPY.
  if (!text_conn_.ok()) {
    auto c = PgConn::connect(url_, false, net_);
    if (!c.ok()) return std::move(c).error();
    text_conn_ = std::move(c.value());
  }
  const Oid type = type_oid;
  const char* value = bytes.data();
  const int length = int(bytes.size()), format = 1;
  PgResult r(PQexecParams(text_conn_.get(), "SELECT $1", 1, &type, &value, &length, &format, 0));
  if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
    return classify_error(r ? PQresultErrorMessage(r.get()) : text_conn_.last_error(),
                          "cannot read a value's text");
  return std::string(PQgetvalue(r.get(), 0, 0), size_t(PQgetlength(r.get(), 0, 0)));
}

Status PostgresDriver::emit_change(Batch& batch, TableState& t, Operation op,
                                   const Tuple* old_tuple, char old_kind, const Tuple* new_tuple,
                                   Lsn lsn) {
  auto consumed = incremental_change(t, old_tuple, new_tuple);
  if (!consumed.ok()) return consumed.error();
  if (consumed.value()) return ok_status();  // a signal row
  st_->caches.retain(batch, t.rel);  // column names and schema/table strings live in the relation
  Record& r = batch.add();
  r.op = op;
  r.position = batch.copy(lsn.to_string());
  r.metadata = metadata(batch, t, r.position, true);
  if (new_tuple) {
    if (Status st = tuple_to_object(batch, t, *new_tuple, false, &r.after); !st.ok()) return st;
  }
  if (old_tuple) {
    if (Status st = tuple_to_object(batch, t, *old_tuple, old_kind == 'K', &r.before); !st.ok())
      return st;
    if (old_kind == 'K') {
      // Key-only old tuples: keep the key columns only (the others come as nulls).
      ObjectBuilder b = batch.object(uint32_t(t.key_columns.size()));
      for (uint32_t i : t.key_columns)
        if (const Value* v = r.before.find(t.rel->columns[i].name))
          b.add(t.rel->columns[i].name, *v);
      r.before = b.build();
    }
  }
  if (!t.key_columns.empty()) {
    // The key comes from the new row, or the old one for deletes (and for key columns whose new
    // value was an unchanged TOAST datum).
    ObjectBuilder k = batch.object(uint32_t(t.key_columns.size()));
    for (uint32_t i : t.key_columns) {
      const std::string& name = t.rel->columns[i].name;
      const Value* v = r.after.is_object() ? r.after.find(name) : nullptr;
      if (!v && r.before.is_object()) v = r.before.find(name);
      if (v) k.add(name, *v);
    }
    r.key = k.build();
  }
  mark_poison(batch, r);
  return ok_status();
}

void PostgresDriver::mark_poison(Batch& batch, Record& r) {
  if (poison_.empty()) return;
  const uint32_t n = r.metadata.is_object() ? r.metadata.size() : 0;
  ObjectBuilder m = batch.object(n + 1);
  if (n)
    for (const Field& f : r.metadata.fields()) m.add(f.name, f.value);
  m.add(meta::kError, Value::string(batch.copy(poison_)));
  r.metadata = m.build();
  batch.add_source_reject();
  poison_.clear();
}

// A truncate becomes one key-less delete per table, marked `truncate`; keyed destinations empty
// the table.
void PostgresDriver::emit_truncate(Batch& batch, TableState& t, Lsn lsn) {
  incremental_truncate(t);
  st_->caches.retain(batch, t.rel);
  Record& rec = batch.add();
  rec.op = Operation::remove;
  rec.position = batch.copy(lsn.to_string());
  ObjectBuilder m = batch.object(7);
  for (const Field& f : metadata(batch, t, rec.position, true).fields()) m.add(f.name, f.value);
  m.add(meta::kTruncate, Value::string("true"));
  rec.metadata = m.build();
}

void PostgresDriver::emit_logical_message(Batch& batch, const LogicalMsg& m, Lsn lsn) {
  Record& rec = batch.add();
  rec.op = Operation::create;
  rec.position = batch.copy(lsn.to_string());
  rec.metadata = batch.object(2)
                     .add("message.prefix", Value::string(batch.copy(m.prefix)))
                     .add("lsn", Value::string(rec.position))
                     .build();
  rec.after = batch.object(1).add("content", Value::bytes(batch.copy(m.content))).build();
}

}  // namespace sluice::pg
