// The server's current binlog position, asked the way the server version understands.
#include <mysqld_error.h>

#include "connectors/mysql/mysql_source_driver.h"

namespace sluice::mysql {

Result<std::vector<MysqlRow>> binlog_status(MysqlConn& c) {
  auto r = c.query("SHOW MASTER STATUS", "query failed");
  if (!r.ok() && c.last_errno() == ER_PARSE_ERROR)
    return c.query("SHOW BINARY LOG STATUS", "query failed");
  return r;
}

}  // namespace sluice::mysql
