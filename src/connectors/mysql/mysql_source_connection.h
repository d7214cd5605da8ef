// The mysql source's connections: connect (TLS per tls.mode), run statements, classify server
// errors into retriable/definite. (Kept apart from the destination's; the shared MySQL connection
// module replaces it.)
#pragma once

#include <mysql.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "connectors/mysql/mysql_url.h"
#include "sluice/result.h"

namespace sluice::mysql::source_connection {

struct ConnOptions {
  mysql::MysqlUrl url;
  std::string tls_mode, tls_ca;
  std::chrono::milliseconds connect_timeout{10000};
};

struct MysqlCloser {
  void operator()(MYSQL* m) const noexcept { mysql_close(m); }
};
using MysqlPtr = std::unique_ptr<MYSQL, MysqlCloser>;
struct ResCloser {
  void operator()(MYSQL_RES* r) const noexcept { mysql_free_result(r); }
};
using ResPtr = std::unique_ptr<MYSQL_RES, ResCloser>;
using Row = std::vector<std::optional<std::string>>;

std::string quote_ident(std::string_view s);
// Client and server error numbers that mean the connection is gone (retriable).
bool connection_errno(unsigned no);
Error server_error(MYSQL* c, std::string_view doing);
// `read_timeout_s` 0: the client's default.
Result<MysqlPtr> connect_server(const ConnOptions& o, unsigned read_timeout_s = 0);
Status exec(MYSQL* c, std::string_view sql);
Result<std::vector<Row>> query(MYSQL* c, std::string_view sql);
std::string literal(MYSQL* c, std::string_view s);
// SHOW MASTER STATUS, or SHOW BINARY LOG STATUS where the former is gone (MySQL 8.4).
Result<std::vector<Row>> binlog_status(MYSQL* c);

}  // namespace sluice::mysql::source_connection
