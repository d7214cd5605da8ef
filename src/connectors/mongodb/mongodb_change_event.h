// Change-stream events → records, and the `$changeStream` aggregate command and its reply.
//
//   aggregate {pipeline: [{$changeStream: …}], cursor: {}}  ──▶  reply {cursor: {firstBatch:
//   [event…],
//                                                                 postBatchResumeToken, id}}
//   event {_id: resume token, operationType, ns, documentKey, fullDocument,
//          fullDocumentBeforeChange, updateDescription, clusterTime, wallTime}  ──▶  Record
//
// The position of a record is its event's resume token (_id) as canonical Extended JSON; it is
// acknowledged only once the destination holds the record (the runtime's contract). FerretDB has
// no change streams, so this file is verified only by unit tests on events shaped as MongoDB's
// documentation gives them (mongodb_change_event_test.cc), never end to end.
#pragma once

#include <bson/bson.h>

#include <string>
#include <vector>

#include "connectors/mongodb/mongodb_bson.h"
#include "sluice/batch.h"
#include "sluice/result.h"

namespace sluice::mongodb {

// Metadata a partial update carries: its `after` lists only the fields the update set (others
// are unchanged, not null); a destination applies it as a field update, never a replacement.
inline constexpr std::string_view kPartialUpdate = "mongodb.partial_update";

// fullDocument: none (the server's "default": updates carry only their description),
// updateLookup (the document as it is when the event is read), whenAvailable / required (the
// post-image, MongoDB 6.0+ with changeStreamPreAndPostImages on the collection).
enum class FullDocument : uint8_t { none, update_lookup, when_available, required };
// fullDocumentBeforeChange: off, whenAvailable, required (pre-images, MongoDB 6.0+).
enum class PreImages : uint8_t { off, when_available, required };

struct ChangeStreamOptions {
  FullDocument full_document = FullDocument::none;
  PreImages pre_images = PreImages::off;
  std::string resume_after;       // a resume token (canonical Extended JSON), or empty
  uint32_t start_at_seconds = 0;  // startAtOperationTime (when no resume token), 0: now
  uint32_t start_at_increment = 0;
};

// The `aggregate` command opening a change stream on `collection` of its database (empty: the
// whole database), per the options.
Result<BsonPtr> change_stream_command(std::string_view collection, const ChangeStreamOptions& o);

// The same options as libmongoc's mongoc_*_watch() takes them (its `opts`), with the server's
// wait for new events per getMore (maxAwaitTimeMS) and the events per batch.
Result<BsonPtr> change_stream_watch_options(const ChangeStreamOptions& o, int64_t max_await_ms,
                                            int64_t batch_size);

// What an event meant, beyond the record it may have added.
enum class EventKind : uint8_t { record, truncate, ignored };

// Decodes one event into `batch` (a record, or a truncate record for a dropped collection).
// Refused with a clear error: invalidate, rename, dropDatabase (the stream cannot go on as
// configured), an update of nested fields without a full document.
Result<EventKind> decode_change_event(const bson_t* event, Batch& batch);

// One reply of `aggregate` or `getMore` on a change stream: its events decoded into `batch`,
// the batch position set to the postBatchResumeToken (or the last event's token).
struct ChangeStreamBatch {
  int64_t cursor_id = 0;
  size_t events = 0;
  std::string resume_token;
};
Result<ChangeStreamBatch> decode_change_stream_reply(const bson_t* reply, Batch& batch);

// A server error of a change stream as a sluice error: a resume token the oplog no longer holds
// (ChangeStreamHistoryLost, 286; ChangeStreamFatalError, 280) says so and names the fix.
Error change_stream_error(int64_t code, std::string_view message);

}  // namespace sluice::mongodb
