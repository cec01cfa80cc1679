#!/usr/bin/env bash
# Installs what the PySpark pipeline (clients/pipeline) needs, once:
#   1. the `pipeline` optional dependencies of pyproject.toml (a pinned PySpark) into the venv, with pip;
#   2. the Spark Kafka connector org.apache.spark:spark-sql-kafka-0-10_2.13:<installed PySpark version>
#      and its dependencies, resolved from Maven Central with deploy/spark/pom.xml into
#      .cache/spark-jars/<version>/ (Maven's own repository for this lives in .cache/m2).
# Both steps are skipped when already done, so after the first run nothing touches the network.
# `make pipeline` and the Spark tests' fixture both run this script; a lock keeps concurrent runs apart.
#
# Environment: VENV (default .venv), MVN (default mvn), PIPELINE_T0 (epoch seconds the progress lines
# count from; run_pipeline.sh sets it). Prints one progress line per step on stderr, and the jar directory
# on the last line of stdout. pip's and mvn's own output goes to logs in .cache (their tail is shown when
# they fail; pip's warnings are shown once each).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
PY="$VENV/bin/python"
MVN="${MVN:-mvn}"
CACHE="$REPO/.cache"
mkdir -p "$CACHE"
T0="${PIPELINE_T0:-$(date +%s)}"
stage() { printf '[pipeline %4ds] %s\n' "$(( $(date +%s) - ${T0%.*} ))" "$*" >&2; }

exec 9>"$CACHE/.spark-install.lock"
if ! flock -n 9; then
  stage "waiting for another install of Spark to finish (lock: $CACHE/.spark-install.lock)"
  flock 9
fi

# --- 1. PySpark (the pin is pyproject.toml's `pipeline` extra) ----------------------------------------
mapfile -t reqs < <("$PY" - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["pipeline"]))
EOF
)
stamp="$VENV/.pipeline-installed"
installed_pyspark=no
if [ "$(cat "$stamp" 2>/dev/null)" != "${reqs[*]}" ] || ! "$PY" -c 'import pyspark' 2>/dev/null; then
  stage "installing PySpark (${reqs[*]}) into $VENV: once, about 500 MB from PyPI (PySpark bundles Spark's jars)"
  log="$CACHE/spark-install-pip.log"
  if ! "$PY" -m pip install -q "${reqs[@]}" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "pip failed; full log: $log" >&2
    exit 1
  fi
  # A build prints the same warning once per build step: show each once.
  if grep -qi 'warning' "$log"; then
    grep -i 'warning' "$log" | sed 's/^ *//' | awk '!seen[$0]++' >&2
    echo "(pip's full output: $log)" >&2
  fi
  printf '%s' "${reqs[*]}" >"$stamp"
  installed_pyspark=yes
fi
SPARK_VERSION="$("$PY" -c 'import pyspark; print(pyspark.__version__)')"
SPARK_HOME="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"

# --- 2. The Kafka connector's jars ----------------------------------------------------------------------
JAR_DIR="$CACHE/spark-jars/$SPARK_VERSION"
if [ -f "$JAR_DIR/.complete" ]; then
  if [ "$installed_pyspark" = no ]; then
    stage "PySpark $SPARK_VERSION and the Kafka connector's jars ($JAR_DIR): installed already"
  else
    stage "the Kafka connector's jars: in $JAR_DIR already"
  fi
else
  stage "fetching the Kafka connector's jars (spark-sql-kafka-0-10_2.13:$SPARK_VERSION) from Maven Central into $JAR_DIR: once"
  rm -rf "$JAR_DIR.tmp"
  mkdir -p "$JAR_DIR.tmp"
  log="$CACHE/spark-jars/mvn-$SPARK_VERSION.log"
  if ! "$MVN" -B -f "$REPO/deploy/spark/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
      -Dspark.version="$SPARK_VERSION" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$JAR_DIR.tmp" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "mvn failed; full log: $log" >&2
    exit 1
  fi
  # Drop what PySpark already ships (same artifact, any version): two copies on one classpath conflict.
  for jar in "$JAR_DIR.tmp"/*.jar; do
    base="$(basename "$jar" .jar)"
    artifact="${base%-*}"   # strip the version
    if compgen -G "$SPARK_HOME/jars/$artifact-[0-9]*.jar" >/dev/null; then
      rm -f "$jar"
    fi
  done
  compgen -G "$JAR_DIR.tmp/spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar" >/dev/null \
    || { echo "mvn did not produce the connector jar" >&2; exit 1; }
  rm -rf "$JAR_DIR"
  mv "$JAR_DIR.tmp" "$JAR_DIR"
  touch "$JAR_DIR/.complete"
fi
echo "$JAR_DIR"
