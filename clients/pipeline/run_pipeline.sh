#!/usr/bin/env bash
# Entry point of the PySpark pipeline (`make pipeline`, the docker-compose `spark` service):
#   1. deploy/spark/install.sh: PySpark into the venv and the Kafka connector's jars into
#      .cache/spark-jars/ (downloads only the first time);
#   2. python -m clients.pipeline.run: topics, sample events, the streaming job via spark-submit, a summary.
# BOOTSTRAP_SERVERS selects an existing cluster; without it a local 3-broker cluster is started.
# Arguments are passed to clients.pipeline.run (see --help there); PIPELINE_* variables set its defaults.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -e "$REPO"
fi
VENV="$VENV" bash "$REPO/deploy/spark/install.sh" >/dev/null
cd "$REPO"
exec "$VENV/bin/python" -m clients.pipeline.run "$@"
