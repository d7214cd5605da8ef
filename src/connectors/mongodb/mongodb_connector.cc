// The `mongodb` connector: its settings tables and factories. The destination is in
// mongodb_destination.cc, the snapshot source in mongodb_source.cc, the type mapping in
// mongodb_bson.cc.
#include <fmt/format.h>

#include <charconv>

#include "connectors/builtin.h"
#include "connectors/mongodb/mongodb_destination.h"
#include "connectors/mongodb/mongodb_source.h"
#include "connectors/record_template.h"

namespace sluice {

namespace {

constexpr std::string_view kUrlDoc =
    "MongoDB URL naming the database: mongodb://[user:password@]host:port/database[?options]; "
    "every libmongoc URI option (TLS, authSource, replicaSet, timeouts) is passed through. Defaults "
    "sluice sets unless the URL does: serverSelectionTimeoutMS=5000, connectTimeoutMS=5000, "
    "socketTimeoutMS=60000 (a server that stops answering fails the operation, which is retried; "
    "a snapshot query that waits the whole timeout without a document 3 times in a row stops the "
    "pipeline: raise socketTimeoutMS for a server that sorts a large collection slowly).";

constexpr auto kDestinationSettings = settings_table<MongodbDestinationOptions>(
    setting<&MongodbDestinationOptions::url>("url", kUrlDoc).mandatory().secret_value(),
    setting<&MongodbDestinationOptions::collection>(
        "collection",
        "Collection each record is written to, in the URL's database: a template where {{table}} "
        "and {{schema}} (or any {{metadata-key}}) are replaced from the record's metadata "
        "(\"{{schema}}.{{table}}\" names a dotted collection). A record without table metadata goes "
        "to \"records\".")
        .with_default("{{table}}"),
    setting<&MongodbDestinationOptions::ordered>(
        "ordered",
        "true: each batch's bulk write per collection is ordered (stops at the first refused "
        "operation). false: unordered (the server may apply operations in parallel); a bulk in "
        "which one _id appears twice, or that holds a truncate, is still sent ordered, so changes "
        "of one key keep their order.")
        .with_default("true"),
    setting<&MongodbDestinationOptions::write_concern>(
        "write_concern",
        "Write concern `w` of every write: majority, or a number of members (1 or more). A batch "
        "counts as durable once the server acknowledged it with this concern.")
        .with_default("majority"),
    setting<&MongodbDestinationOptions::journal>(
        "write_concern.journal",
        "Write concern `j`: acknowledged only once in the on-disk journal.")
        .with_default("true"),
    setting<&MongodbDestinationOptions::write_timeout>(
        "write_concern.timeout",
        "Write concern `wtimeout`: how long the server waits for `w` "
        "members before it fails the write (which is then retried).")
        .with_default("30s"),
    setting<&MongodbDestinationOptions::sub_millisecond>(
        "timestamps.sub_millisecond",
        "BSON dates hold milliseconds. A timestamp with a sub-millisecond part becomes: string, "
        "its ISO 8601 text with microseconds (2024-02-29T13:45:00.123456Z; nothing lost); reject, "
        "a rejected record (dead-letter queue with on_error: dlq). Timestamps exact to the "
        "millisecond are always BSON dates.")
        .one_of("string,reject")
        .with_default("string"),
    setting<&MongodbDestinationOptions::decimals>(
        "decimals",
        "What an exact decimal (and an unsigned integer beyond int64) becomes: decimal128, a BSON "
        "Decimal128 (a decimal beyond its 34 digits is a rejected record, never rounded); string, "
        "its exact text, for servers without Decimal128 (FerretDB 1.x closes the connection on "
        "one, which looks like a lost server and is retried).")
        .one_of("decimal128,string")
        .with_default("decimal128"),
    setting<&MongodbDestinationOptions::checkpoint_in_destination>(
        "checkpoint_in_destination",
        "Store the source position in the collection sluice_checkpoints after each batch is "
        "written (MongoDB has no transaction here: a crash between the two replays the batch, "
        "which the keyed upserts and deletes make idempotent); on restart the pipeline resumes "
        "from it.")
        .with_default("false"),
    setting<&MongodbDestinationOptions::max_operations>(
        "bulk.max_operations",
        "How many operations one bulk write command holds at most: a collection's share of a batch "
        "beyond it is sent as several commands, in order. FerretDB 1.24 (SQLite backend) keeps one "
        "connection of its pool of 100 per document an `update` command matched until the "
        "command ends: a command (or concurrent ones) matching more than 100 existing documents "
        "never answers and blocks that database until FerretDB restarts; 10 leaves room for ten at "
        "once (the commands of killed sluice processes run on). MongoDB takes up to 100,000 per "
        "command: raise it there.",
        SettingType::integer)
        .with_default("10")
        .at_least(1));

Status finalize(MongodbDestinationOptions& o) {
  if (o.url.empty())
    return Error(Errc::config, "mongodb destination: `url` is empty; set mongodb://host:port/db");
  if (o.write_concern != "majority") {
    int w = 0;
    auto [p, ec] =
        std::from_chars(o.write_concern.data(), o.write_concern.data() + o.write_concern.size(), w);
    if (ec != std::errc() || p != o.write_concern.data() + o.write_concern.size() || w < 1)
      return Error(Errc::config,
                   fmt::format("mongodb destination: `write_concern` is \"{}\"; use majority or "
                               "a number of members, 1 or more",
                               o.write_concern));
  }
  auto t = RecordTemplate::parse(o.collection, "collection");
  if (!t) return t.error();
  return ok_status();
}

Result<std::unique_ptr<Destination>> make_destination(const Settings& settings) {
  auto options = mongodb_destination_options(settings);
  if (!options) return std::move(options).error();
  return make_mongodb_destination(std::move(options.value()));
}

constexpr auto kSourceSettings = settings_table<MongodbSourceOptions>(
    setting<&MongodbSourceOptions::url>("url", kUrlDoc).mandatory().secret_value(),
    setting<&MongodbSourceOptions::collections>(
        "collections",
        "Collections to read, as database.collection; database.* reads every collection of the "
        "database (system collections excepted); a name without a dot is a collection of the "
        "URL's database. Default: every collection of the URL's database."),
    setting<&MongodbSourceOptions::batch_size>("snapshot.batch_size",
                                               "Documents the server returns per cursor batch.")
        .with_default("10000")
        .at_least(1),
    setting<&MongodbSourceOptions::stream>(
        "stream",
        "true: after the snapshot, a change stream on the collections ($changeStream; needs a "
        "replica set or sharded cluster), starting at the cluster time taken before the snapshot "
        "and resumed after the last resume token the destination holds. false: the snapshot only "
        "(the source ends after it); needed for FerretDB and a standalone mongod, which refuse "
        "change streams. Change streams are verified against recorded server replies only, not a "
        "real MongoDB server (docs/mongodb.md).")
        .with_default("true"),
    setting<&MongodbSourceOptions::full_document>(
        "stream.full_document",
        "What an update event carries (the change stream's fullDocument): default, only the "
        "fields it set and removed (a partial update record; a nested field needs "
        "update_lookup); update_lookup, the whole document as read when the event is (a later "
        "version, or none once deleted); when_available / required, the post-image (MongoDB 6.0+ "
        "with changeStreamPreAndPostImages on the collection).")
        .one_of("default,update_lookup,when_available,required")
        .with_default("update_lookup"),
    setting<&MongodbSourceOptions::pre_images>(
        "stream.pre_images",
        "The document before each update, replace and delete as the record's before image "
        "(fullDocumentBeforeChange; MongoDB 6.0+ with changeStreamPreAndPostImages on the "
        "collection): off, when_available, required.")
        .one_of("off,when_available,required")
        .with_default("off"),
    setting<&MongodbSourceOptions::max_await>(
        "stream.max_await",
        "How long the server waits for new events before answering a change stream's getMore "
        "empty (maxAwaitTimeMS); each empty answer moves the position on.")
        .with_default("1s"));

Status finalize(MongodbSourceOptions& o) {
  if (o.url.empty())
    return Error(Errc::config, "mongodb source: `url` is empty; set mongodb://host:port/db");
  for (const std::string& c : o.collections)
    if (c.empty() || c.front() == '.' || c.back() == '.')
      return Error(Errc::config,
                   fmt::format("mongodb source: collection \"{}\" is not database.collection", c));
  return ok_status();
}

Result<std::unique_ptr<Source>> make_source(const Settings& settings) {
  auto options = mongodb_source_options(settings);
  if (!options) return std::move(options).error();
  return make_mongodb_source(std::move(options.value()));
}

constexpr std::string_view kTemplateSettings[] = {"collection"};
constexpr std::string_view kSourceMetadata[] = {meta::kTable, meta::kSchema, meta::kCollection};

}  // namespace

std::span<const SettingSpec> mongodb_destination_settings() noexcept {
  return kDestinationSettings;
}

Result<MongodbDestinationOptions> mongodb_destination_options(const Settings& settings) {
  SLUICE_TRY_ASSIGN(MongodbDestinationOptions o, bind_settings(kDestinationSettings, settings));
  SLUICE_TRY(finalize(o));
  return o;
}

std::span<const SettingSpec> mongodb_source_settings() noexcept { return kSourceSettings; }

Result<MongodbSourceOptions> mongodb_source_options(const Settings& settings) {
  SLUICE_TRY_ASSIGN(MongodbSourceOptions o, bind_settings(kSourceSettings, settings));
  SLUICE_TRY(finalize(o));
  return o;
}

ConnectorSpec mongodb_connector() {
  return ConnectorSpec{
      .name = "mongodb",
      .summary =
          "Reads a snapshot of MongoDB collections in _id order (resumable), then their change "
          "stream (verified on recorded replies only); writes records "
          "as documents keyed by _id with one bulk write per batch (libmongoc).",
      .source_settings = kSourceSettings,
      .destination_settings = kDestinationSettings,
      .make_source = &make_source,
      .make_destination = &make_destination,
      .template_settings = kTemplateSettings,
      .source_metadata = kSourceMetadata,
  };
}

}  // namespace sluice
