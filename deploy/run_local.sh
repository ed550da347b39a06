#!/usr/bin/env bash
# PostgreSQL, N Streamlit replicas and nginx on loopback, from the repository's virtual environment:
#   deploy/run_local.sh [--replicas 2] [--port 8080] [--database-url URL] [--run-dir DIR]
# prints the address; Ctrl-C stops everything. `deploy/run_local.sh stop RUN_DIR` stops a cluster started
# with --run-dir in another shell. Everything is in deploy/cluster.py (see deploy/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
if [ "${1:-}" = "stop" ]; then
  exec "$PYTHON" -m deploy.cluster "$@"
fi
exec "$PYTHON" -m deploy.cluster up "$@"
