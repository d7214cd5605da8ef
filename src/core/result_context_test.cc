// Error context is prefixed once: a connector's own "postgres destination: " is not repeated by
// the layers that add "pipeline p: postgres destination: " (issue 13, item 15).
#include <gtest/gtest.h>

#include "sluice/result.h"

namespace sluice {
namespace {

TEST(ErrorContext, PrefixesAMessageWithoutOne) {
  EXPECT_EQ(prefix_context("pipeline p: postgres destination: ", "connection refused"),
            "pipeline p: postgres destination: connection refused");
}

TEST(ErrorContext, DoesNotRepeatTheSegmentsTheMessageStartsWith) {
  EXPECT_EQ(prefix_context("pipeline p: postgres destination: ",
                           "postgres destination: connection refused"),
            "pipeline p: postgres destination: connection refused");
  EXPECT_EQ(prefix_context("pipeline p: postgres destination: ",
                           "pipeline p: postgres destination: connection refused"),
            "pipeline p: postgres destination: connection refused");
  Error e(Errc::connection, "sqlite destination: `path` is empty", true);
  Error twice =
      e.with_context("sqlite destination: ").with_context("pipeline d: sqlite destination: ");
  EXPECT_EQ(twice.message(), "pipeline d: sqlite destination: `path` is empty");
  EXPECT_EQ(twice.code(), Errc::connection);
  EXPECT_TRUE(twice.retriable());
}

TEST(ErrorContext, ASegmentThatOnlyLooksAlikeIsKept) {
  // "destination: " alone is not the context's tail "postgres destination: ".
  EXPECT_EQ(prefix_context("postgres destination: ", "destination: x"),
            "postgres destination: destination: x");
  EXPECT_EQ(prefix_context("mysql destination: ", "postgres destination: x"),
            "mysql destination: postgres destination: x");
}

}  // namespace
}  // namespace sluice
