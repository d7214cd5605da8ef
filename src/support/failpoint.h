// Fail points: named places where a test build can make sluice crash on purpose, so that fault
// tests hit a crash window (after the destination committed but before the checkpoint, …)
// deterministically instead of by a well-timed kill -9. RocksDB's TEST_SYNC_POINT and ClickHouse's
// FailPoints are the models.
//
//   SLUICE_FAILPOINT("after_checkpoint");
//
// compiles to nothing unless the build has SLUICE_FAILPOINTS on (CMake option, default ON for the
// dev/test build; release and benchmark builds configure it OFF, which defines
// SLUICE_NO_FAILPOINTS). In a build that has them, a point
// costs one load of a constant bool until the environment arms one:
//
//   SLUICE_FAILPOINTS=after_destination_commit=crash          crash at the first hit
//   SLUICE_FAILPOINTS=mid_snapshot_chunk=crash@3,…            crash at the third hit
//
// "crash" is an abrupt exit as kill -9 makes it (SIGKILL: no destructor, no flush, no checkpoint);
// one line on stderr names the point first. A malformed value, an unknown point or action is a
// one-line error and exit 2 at start-up: a typo never leaves a test waiting for a crash that
// cannot come. The points (kFailPoints in failpoint.cc) are listed in docs/development/testing.md.
#pragma once

#include <string_view>

#if !defined(SLUICE_NO_FAILPOINTS)
#define SLUICE_FAILPOINTS_ON 1
namespace sluice::failpoint {
// True when SLUICE_FAILPOINTS armed at least one point (read once, before main).
extern const bool armed;
// A hit of point `name`: counts it and fires its action when armed for this hit.
void hit(std::string_view name) noexcept;
}  // namespace sluice::failpoint
#define SLUICE_FAILPOINT(name)                                      \
  do {                                                              \
    if (::sluice::failpoint::armed) ::sluice::failpoint::hit(name); \
  } while (0)
#else
#define SLUICE_FAILPOINT(name) \
  do {                         \
  } while (0)
#endif
