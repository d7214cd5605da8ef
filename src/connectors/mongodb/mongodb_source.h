// The mongodb source: a snapshot of collections read in _id order, resumable from the last _id.
//
//   collections (sorted) ──▶ find({_id: {$gt: last}}).sort({_id: 1}) ──▶ batches ──▶ end
//   position = canonical Extended JSON {v, fp (the collection list), i (collection index),
//              after (last _id read) | done}
//
// Change streams are decoded by mongodb_change_event.h (unit-tested on documented event shapes);
// the source does not open one: FerretDB, the server the tests run against, has none.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

struct MongodbSourceOptions {
  std::string url;
  std::vector<std::string> collections;
  int64_t batch_size = 10000;
};

std::span<const SettingSpec> mongodb_source_settings() noexcept;
Result<MongodbSourceOptions> mongodb_source_options(const Settings& settings);
std::unique_ptr<Source> make_mongodb_source(MongodbSourceOptions options);

}  // namespace sluice
