#!/usr/bin/env bash
# Fetches and builds the Java side of the Kafka platform on kafkette (docs/platform.md), once:
#   1. Apache Kafka 3.9.1's kafka-streams, kafka-streams-examples, connect-runtime, connect-file,
#      connect-json, connect-mirror and their dependencies, resolved from Maven Central with
#      deploy/platform/pom.xml into .cache/platform-jars/<hash of the pom>/;
#   2. the Streams app of deploy/platform/streams-app, built with Maven into
#      .cache/platform-build/<hash of its sources>/clicks-per-region.jar.
# Both are keyed by content, so an edit of the pom or of the app rebuilds, and otherwise nothing touches
# the network. `make platform` and the platform tests' fixtures run this script; a lock keeps concurrent
# runs apart.
#
# Environment: MVN (default mvn). Prints the jar directory, then the app's jar, one a line.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
MVN="${MVN:-mvn}"
CACHE="$REPO/.cache"
mkdir -p "$CACHE"

exec 9>"$CACHE/.platform-install.lock"
flock 9

# --- 1. Kafka's jars ---------------------------------------------------------------------------------
pom_hash="$(sha256sum "$HERE/pom.xml" | cut -c1-10)"
JAR_DIR="$CACHE/platform-jars/$pom_hash"
if [ ! -f "$JAR_DIR/.complete" ]; then
  echo "resolving Kafka Streams, Connect and MirrorMaker 2 from Maven Central into $JAR_DIR" >&2
  rm -rf "$JAR_DIR.tmp"
  mkdir -p "$JAR_DIR.tmp"
  log="$CACHE/platform-jars/mvn-$pom_hash.log"
  if ! "$MVN" -B -f "$HERE/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$JAR_DIR.tmp" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "mvn failed; full log: $log" >&2
    exit 1
  fi
  for want in kafka-streams-3.9.1 connect-runtime-3.9.1 connect-file-3.9.1 connect-mirror-3.9.1; do
    [ -f "$JAR_DIR.tmp/$want.jar" ] || { echo "mvn did not produce $want.jar" >&2; exit 1; }
  done
  rm -rf "$JAR_DIR"
  mv "$JAR_DIR.tmp" "$JAR_DIR"
  touch "$JAR_DIR/.complete"
fi

# --- 2. The Streams app ------------------------------------------------------------------------------
APP="$HERE/streams-app"
app_hash="$(cd "$APP" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-10)"
BUILD_DIR="$CACHE/platform-build/$app_hash"
APP_JAR="$BUILD_DIR/clicks-per-region.jar"
if [ ! -f "$APP_JAR" ]; then
  echo "building the Streams app into $BUILD_DIR" >&2
  log="$CACHE/platform-build/mvn-$app_hash.log"
  mkdir -p "$CACHE/platform-build"
  if ! "$MVN" -B -f "$APP/pom.xml" -Dplatform.build.dir="$BUILD_DIR" package >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "mvn failed; full log: $log" >&2
    exit 1
  fi
  [ -f "$APP_JAR" ] || { echo "mvn did not produce $APP_JAR" >&2; exit 1; }
fi
echo "$JAR_DIR"
echo "$APP_JAR"
