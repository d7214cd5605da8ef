#!/usr/bin/env bash
# Loads the two tables of this write-up: 3,000 rows of 200 kB text each (about 600 MB), in
# PostgreSQL (stored out of line, uncompressed: STORAGE EXTERNAL) and in MariaDB (LONGTEXT).
#   load.sh PG_URL MARIADB_HOST MARIADB_PORT MARIADB_USER MARIADB_PASSWORD MARIADB_DB
set -euo pipefail
pg=$1
psql "$pg" -q <<'SQL'
DROP TABLE IF EXISTS blobs;
CREATE TABLE blobs (id int PRIMARY KEY, body text);
ALTER TABLE blobs ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO blobs SELECT g, (SELECT string_agg(md5(g::text || i::text), '')
                             FROM generate_series(1, 6250) i)
FROM generate_series(1, 3000) g;
VACUUM ANALYZE blobs;
SQL
mariadb -h"$2" -P"$3" -u"$4" -p"$5" "$6" -e "DROP TABLE IF EXISTS blobs;
  CREATE TABLE blobs (id int PRIMARY KEY, body longtext);
  INSERT INTO blobs SELECT seq, REPEAT(MD5(seq), 6250) FROM seq_1_to_3000;"
