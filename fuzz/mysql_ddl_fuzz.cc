// libFuzzer target: the DDL parser of the mysql source (src/connectors/mysql/mysql_ddl_parse.h),
// which reads the statement text of every QUERY event in the binlog — bytes any client with DDL
// rights controls. Each input is parsed as a statement and as a column type; the types the
// statement declares are compared with each other the way the schema history does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "connectors/mysql/mysql_ddl_parse.h"

namespace ddl = sluice::mysql::ddl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view sql(reinterpret_cast<const char*>(data), size);
  const ddl::Statement st = ddl::parse_statement(sql, "d");
  const ddl::ColumnDef type = ddl::parse_column_type(sql);
  std::string why;
  for (const ddl::AlterClause& a : st.clauses) {
    (void)ddl::is_widening(type, a.def, &why);
    (void)ddl::same_type(a.def, type);
  }
  for (const ddl::ColumnDef& c : st.columns) (void)ddl::is_widening(c, type, &why);
  return 0;
}
