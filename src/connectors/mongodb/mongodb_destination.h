// The mongodb destination: each batch becomes one bulk write per collection (replaceOne with
// upsert keyed by _id, updateOne $set/$unset when the after image lacks fields, deleteOne,
// deleteMany for a truncate).
//
//   batch ──▶ runs by collection (in record order) ──▶ mongoc bulks per collection, each of at
//                                                    most bulk.max_operations ──▶ done
//                                                    └▶ sluice_checkpoints upsert (optional)
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "connectors/mongodb/mongodb_bson.h"
#include "sluice/connector.h"
#include "sluice/settings.h"

namespace sluice {

struct MongodbDestinationOptions {
  std::string url;
  std::string collection = "{{table}}";
  bool ordered = true;
  std::string write_concern = "majority";
  bool journal = true;
  std::chrono::milliseconds write_timeout{30000};
  mongodb::SubMillisecond sub_millisecond = mongodb::SubMillisecond::string;
  mongodb::Decimals decimals = mongodb::Decimals::decimal128;
  bool checkpoint_in_destination = false;
  int64_t max_operations = 10;  // bulk.max_operations: operations per bulk write command
};

std::span<const SettingSpec> mongodb_destination_settings() noexcept;
Result<MongodbDestinationOptions> mongodb_destination_options(const Settings& settings);
std::unique_ptr<Destination> make_mongodb_destination(MongodbDestinationOptions options);

}  // namespace sluice
