#include "runtime/spool/spool_stages.h"

#include <fmt/format.h>

#include "support/spool/batch_codec.h"

namespace sluice::spool {

void SpoolWriter::write(Batch& batch, WriteDone done) { done(spool_->append(batch, stop_)); }

Status SpoolReaderSource::open(const ConnectorContext& ctx,
                               const std::optional<std::string>& checkpoint) {
  stats_ = ctx.stats;
  std::optional<uint64_t> after;
  if (checkpoint) {
    after = parse_spool_position(*checkpoint);
    if (!after)
      return Error(Errc::config,
                   "the destination's stored position is not a spool position (the pipeline ran "
                   "without a spool before): reset it with `sluice cleanup` before adding a spool");
  }
  auto reader = spool_->open_reader(name_, after);
  if (!reader.ok()) return std::move(reader).error();
  reader_ = std::move(reader.value());
  return ok_status();
}

Result<ReadStatus> SpoolReaderSource::read(Batch& batch, const ReadRequest& req,
                                           std::stop_token stop) {
  auto first = reader_->next(req.poll, stop);
  if (!first.ok()) return std::move(first).error();
  if (!first.value()) return reader_->at_end() ? ReadStatus::end : ReadStatus::idle;
  // Several spooled batches become one while they are there already (a destination catching up
  // writes full batches), up to the pipeline's limits.
  std::optional<SpooledBatch> item = std::move(first.value());
  int64_t newest_ms = 0;
  while (item) {
    SLUICE_TRY(decode_batch(item->payload, batch));
    batch.retain(std::move(item->owner));
    batch.set_position(spool_position(item->seq));
    newest_ms = item->appended_unix_ms;
    item.reset();
    if (batch.size() >= req.max_records || batch.bytes() >= req.max_bytes / 2) break;
    auto more = reader_->next(std::chrono::milliseconds(0), stop);
    if (!more.ok()) return std::move(more).error();
    item = std::move(more.value());
  }
  if (stats_ && newest_ms > 0) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    stats_->lag_ms = std::max<int64_t>(0, now - newest_ms);
  }
  return ReadStatus::more;
}

void SpoolReaderSource::ack(std::string_view position) {
  if (auto seq = parse_spool_position(position); seq && reader_) reader_->release(*seq);
}

}  // namespace sluice::spool
