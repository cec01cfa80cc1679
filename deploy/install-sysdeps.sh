#!/usr/bin/env bash
# System packages the tests and `make run` use: ZooKeeper (Debian's `zookeeper`), kcat, a JDK, strace
# (the zero-copy test watches the broker's sendfile calls with it), and a C compiler with the headers of
# the Python the venv is built from (the install compiles protocol/_record_scan.c, produce validation's
# record scanner; without them it falls back to the pure-Python scanner).
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail
need=()
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || [ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
# Maven resolves jars from Maven Central: Kafka's for format cross-checks, Spark's Kafka connector.
command -v mvn >/dev/null 2>&1 || need+=(maven)
# The chaos suite (make chaos): nftables cuts links between network namespaces, libfaketime moves clocks.
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
# ... and its disk faults: a FUSE filesystem over libfuse 3 (fuse3), small ext4 images (e2fsprogs).
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
# A real Prometheus scrapes a 3-broker cluster in the metrics test (tests/ops/test_metrics_prometheus.py).
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
[ -f /usr/include/stdint.h ] || need+=(libc6-dev)
# Python.h of the interpreter in use (a pyenv or other self-built Python ships its own; Debian's is in python3-dev).
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1 \
    || ! "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  need+=(python3-dev)
fi
# Progress: one line when a stage starts and one with its elapsed time when it ends, a line every 30 s
# while it runs; apt's own output goes to the log, shown when a stage fails.
log="${SYSDEPS_LOG:-.cache/install-sysdeps.log}"
mkdir -p "$(dirname "$log")"
stage() {
  local what=$1 start=$SECONDS ticker rc=0
  shift
  echo "install: $what ..."
  ( while sleep 30 >/dev/null 2>&1; do echo "install: $what ... ($((SECONDS - start)) s)"; done ) &
  ticker=$!
  "$@" >>"$log" 2>&1 || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "install: $what failed (status $rc); the end of $log:" >&2
    tail -n 30 "$log" >&2
    return "$rc"
  fi
  echo "install: $what: done in $((SECONDS - start)) s"
}
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  echo "install: system packages missing: ${need[*]} (apt-get's output: $log)"
  stage "apt-get update" $SUDO apt-get update -qq
  stage "installing ${#need[@]} system packages (a few minutes on a fresh machine)" \
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  # Debian's package starts a system ZooKeeper on 2181; ours are private, so keep it from holding the port.
  if [[ " ${need[*]} " == *" zookeeper "* ]]; then
    $SUDO systemctl disable --now zookeeper >/dev/null 2>&1 || true
    $SUDO service zookeeper stop >/dev/null 2>&1 || true
  fi
  # Likewise Debian's Prometheus (9090) and its node exporter (9100): the tests start their own.
  if [[ " ${need[*]} " == *" prometheus "* ]]; then
    for svc in prometheus prometheus-node-exporter; do
      $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
      $SUDO service "$svc" stop >/dev/null 2>&1 || true
    done
  fi
else
  echo "install: system packages: all present"
fi
