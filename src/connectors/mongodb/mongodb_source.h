// The mongodb source: a snapshot of collections read in _id order, resumable from the last _id,
// then (stream: true, the default) a change stream on those collections.
//
//   open: stream? ──▶ operationTime of a ping (T) and a probe $changeStream (refused: the fix is
//                     `stream: false`)
//   collections (sorted) ──▶ find({_id: {$gt: last}}).sort({_id: 1}) ──▶ batches ──▶ snapshot done
//     ──▶ stream: false: end
//     ──▶ stream: true: watch(startAtOperationTime: T, then resumeAfter: token) ──▶ events
//         (mongodb_change_event.h) ──▶ batches, forever
//   position = canonical Extended JSON {v, fp (the collection list), i (collection index),
//              after (last _id read), at (T)} while snapshotting;
//              {v, fp, stream: 1, at (T) | token (resume token)} while streaming
//
// FerretDB, the server the tests run against, has no change streams: the stream is verified
// against recorded server replies (mongodb_source_stream_test.cc), not a real server.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "connectors/mongodb/mongodb_change_event.h"
#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

struct MongodbSourceOptions {
  std::string url;
  std::vector<std::string> collections;
  int64_t batch_size = 10000;
  bool stream = true;
  mongodb::FullDocument full_document = mongodb::FullDocument::update_lookup;
  mongodb::PreImages pre_images = mongodb::PreImages::off;
  std::chrono::milliseconds max_await{1000};
};

std::span<const SettingSpec> mongodb_source_settings() noexcept;
Result<MongodbSourceOptions> mongodb_source_options(const Settings& settings);
std::unique_ptr<Source> make_mongodb_source(MongodbSourceOptions options);

}  // namespace sluice
