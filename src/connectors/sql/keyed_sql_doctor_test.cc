// column_type_conflict (`sluice doctor`): which destination column types cannot hold a source
// column's values, across PostgreSQL, MySQL/MariaDB and SQLite type names.
#include <gtest/gtest.h>

#include "connectors/sql/keyed_sql_destination.h"

namespace sluice::sql {
namespace {

TEST(ColumnTypeConflict, NarrowerKindsConflict) {
  EXPECT_EQ(column_type_conflict("text", "integer"),
            "text values (text) do not fit a integer column (integer)");
  EXPECT_TRUE(column_type_conflict("varchar(20)", "int(11)"));
  EXPECT_TRUE(column_type_conflict("numeric(10,2)", "bigint"));
  EXPECT_TRUE(column_type_conflict("timestamp with time zone", "boolean"));
  EXPECT_TRUE(column_type_conflict("jsonb", "date"));
  EXPECT_TRUE(column_type_conflict("bytea", "jsonb"));
  EXPECT_TRUE(column_type_conflict("interval", "integer")) << "interval is not an integer";
}

TEST(ColumnTypeConflict, WiderOrUnknownKindsDoNot) {
  EXPECT_FALSE(column_type_conflict("integer", "bigint"));
  EXPECT_FALSE(column_type_conflict("int(11) unsigned", "numeric"));
  EXPECT_FALSE(column_type_conflict("integer", "text"));
  EXPECT_FALSE(column_type_conflict("jsonb", "longtext"));
  EXPECT_FALSE(column_type_conflict("boolean", "tinyint(1)"));
  EXPECT_FALSE(column_type_conflict("character varying(5)", "varchar(200)"));
  EXPECT_FALSE(column_type_conflict("integer", "jsonb"));
  // Unknown on either side: not judged.
  EXPECT_FALSE(column_type_conflict("point", "integer"));
  EXPECT_FALSE(column_type_conflict("text", "geometry"));
  EXPECT_FALSE(column_type_conflict("integer[]", "integer"));
}

}  // namespace
}  // namespace sluice::sql
