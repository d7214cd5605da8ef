// The two stages a spool puts into a pipeline, as the connector interfaces the pipeline already
// drives, so the pipeline's machinery (ordered acks, retries, checkpoints) serves both sides:
//
//   upstream pipeline:   source → processors → SpoolWriter (a Destination)
//                        acked once the batch is durable in the spool; stores_positions(): the
//                        spool's last batch says where the source resumes, so nothing is
//                        spooled twice after a crash.
//   downstream pipeline: SpoolReaderSource (a Source) → destination
//                        positions are "spool:SEQ"; ack(SEQ) releases the spool up to SEQ. A
//                        destination that stores positions stores "spool:SEQ" with its rows, so
//                        it resumes exactly after the last batch it committed.
#pragma once

#include <memory>
#include <stop_token>
#include <string>

#include "sluice/connector.h"
#include "support/spool/spool.h"

namespace sluice::spool {

class SpoolWriter final : public Destination {
 public:
  // `stop` ends a wait for space in a full spool.
  SpoolWriter(Spool* spool, std::stop_token stop) : spool_(spool), stop_(std::move(stop)) {}
  Status open(const ConnectorContext&) override { return ok_status(); }
  void write(Batch& batch, WriteDone done) override;
  bool accepts_control_records() const noexcept override { return true; }
  bool stores_positions() const noexcept override { return true; }
  Result<std::optional<std::string>> stored_position(std::string_view) override {
    return spool_->last_position();
  }

 private:
  Spool* spool_;
  std::stop_token stop_;
};

class SpoolReaderSource final : public Source {
 public:
  SpoolReaderSource(Spool* spool, std::string reader) : spool_(spool), name_(std::move(reader)) {}
  Status open(const ConnectorContext& ctx, const std::optional<std::string>& checkpoint) override;
  Result<ReadStatus> read(Batch& batch, const ReadRequest& req, std::stop_token stop) override;
  void ack(std::string_view position) override;
  void close() noexcept override { reader_.reset(); }

 private:
  Spool* spool_;
  std::string name_;
  std::unique_ptr<SpoolReader> reader_;
  ConnectorStats* stats_ = nullptr;
};

}  // namespace sluice::spool
