#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on 127.0.0.1 for the storage tests.
#
#   scripts/start_test_postgres.sh [start]   initdb into a temp dir, start, create the database,
#                                            print the URL to export as DATABASE_URL_TEST (last line)
#   scripts/start_test_postgres.sh stop      stop the cluster and delete its directory
#
# Needs Debian's postgresql package (any version). As root, the server runs as the `postgres`
# user (initdb refuses root). Port: $TEST_PG_PORT (default 54329). Authentication is `trust`,
# listening on loopback only: never use this for anything but tests.
set -euo pipefail

PORT="${TEST_PG_PORT:-54329}"
DB="${TEST_PG_DB:-attention_test}"
DIR="${TMPDIR:-/tmp}/attention-test-pg-$PORT"
URL="postgresql+psycopg://postgres@127.0.0.1:$PORT/$DB"

bindir() {
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$found" ] && [ -x "$found/initdb" ]; then echo "$found"; return; fi
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  echo "start_test_postgres: no PostgreSQL server binaries (install Debian's postgresql package)" >&2
  exit 1
}

BIN="$(bindir)"

# run a server command as the cluster's owner: `postgres` when we are root, else ourselves
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

stop() {
  if [ -f "$DIR/PG_VERSION" ]; then
    as_owner "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$DIR"
}

start() {
  if [ -f "$DIR/PG_VERSION" ] && as_owner "$BIN/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
    echo "$URL"; return
  fi
  stop
  mkdir -p "$DIR"
  chmod 700 "$DIR"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$DIR"; fi
  as_owner "$BIN/initdb" -D "$DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$DIR.initdb.log" 2>&1 \
    || { cat "$DIR.initdb.log" >&2; exit 1; }
  rm -f "$DIR.initdb.log"
  # loopback only, socket inside the data directory (no /var/run/postgresql needed)
  as_owner "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$DIR -c max_connections=100" start >/dev/null \
    || { cat "$DIR/server.log" >&2; exit 1; }
  as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
  echo "$URL"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
