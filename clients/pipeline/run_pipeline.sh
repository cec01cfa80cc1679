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
# Every progress line (here, in install.sh and in run.py) counts the seconds from this moment.
export PIPELINE_T0="${PIPELINE_T0:-$(date +%s)}"
stage() { printf '[pipeline %4ds] %s\n' "$(( $(date +%s) - ${PIPELINE_T0%.*} ))" "$*"; }
if [ ! -x "$VENV/bin/python" ]; then
  stage "creating the venv $VENV and installing kafkette into it"
  python3 -m venv "$VENV"
  log="$(mktemp)"
  if ! "$VENV/bin/pip" install -q -e "$REPO" >"$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
  rm -f "$log"
fi
# install.sh: progress lines on stderr, shown here on stdout next to run.py's; its stdout (the jar
# directory, for scripts) is not needed.
VENV="$VENV" bash "$REPO/deploy/spark/install.sh" 2>&1 >/dev/null
cd "$REPO"
exec "$VENV/bin/python" -m clients.pipeline.run "$@"
