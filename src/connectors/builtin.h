// Specs of the connectors built into this binary; each is defined in its connector's folder and
// listed once in registry.cc.
#pragma once

#include "sluice/registry.h"

namespace sluice {

ConnectorSpec generator_connector();  // src/connectors/generator/
ConnectorSpec discard_connector();    // src/connectors/discard/
ConnectorSpec file_connector();       // src/connectors/file/
ConnectorSpec sqlite_connector();     // src/connectors/sqlite/
ConnectorSpec postgres_connector();   // src/connectors/postgres/
ConnectorSpec mysql_connector();      // src/connectors/mysql/
ConnectorSpec kafka_connector();      // src/connectors/kafka/
ConnectorSpec redis_connector();      // src/connectors/redis/

}  // namespace sluice
