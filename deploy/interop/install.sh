#!/usr/bin/env bash
# The interoperability set (docs/interop.md, tests/interop): Sarama's console producer and consumer and
# our Sarama program (deploy/interop/sarama-client) built with Go from the module proxy, and Burrow.
#
#   bash deploy/interop/install.sh      # prints the directory that holds the binaries
#
# Everything lands in .cache/interop: bin/ (kafka-console-producer, kafka-console-consumer,
# sarama-client, and Burrow: a link to Debian's /usr/bin/Burrow, or a build from the module proxy where
# Debian has no `burrow` package), with Go's module and build caches beside it. Idempotent: a second run
# with the same sources builds nothing; a lock keeps concurrent runs (parallel test processes) apart.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${INTEROP_CACHE:-$repo/.cache/interop}"
bin="$cache/bin"
# Burrow's version when it is built from the module proxy (no Debian package): its last release. Only
# where the proxy serves github.com/linkedin/Burrow (the one this was tested with refuses it).
burrow_module="github.com/linkedin/Burrow@v1.9.5"
log="$cache/install.log"
mkdir -p "$bin"
exec 9>"$cache/.lock"
flock 9

say() { echo "interop: $*" >&2; }
run_logged() {
  if ! "$@" >>"$log" 2>&1; then
    say "failed: $*; the end of $log:"
    tail -n 40 "$log" >&2
    exit 1
  fi
}
: >"$log"

# Go: the one on PATH, or the usual /usr/local/go. Sarama's go.mod asks for a recent Go; with
# GOTOOLCHAIN=auto an older Go (1.21 or later) fetches the toolchain it needs through the module proxy.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  say "no Go toolchain (go on PATH or /usr/local/go/bin/go); install Go 1.21 or later"
  exit 1
fi
export GOFLAGS="-mod=mod -modcacherw -buildvcs=false"
export GOMODCACHE="$cache/gomod" GOCACHE="$cache/gocache" GOPATH="$cache/gopath"
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" GOTOOLCHAIN="${GOTOOLCHAIN_INTEROP:-auto}"
export CGO_ENABLED=0

# The Sarama binaries, rebuilt when the program, its go.mod/go.sum or the Go version change.
src="$here/sarama-client"
digest="$( (cat "$src/go.mod" "$src/go.sum" "$src"/*.go; go version) | sha256sum | cut -c1-16)"
stamp="$bin/.sarama-$digest"
if [ ! -e "$stamp" ]; then
  start=$SECONDS
  say "building Sarama's console tools and sarama-client (Go modules from the proxy) ..."
  (cd "$src" && run_logged go build -o "$bin/sarama-client" .)
  (cd "$src" && run_logged go build -o "$bin/" github.com/IBM/sarama/tools/kafka-console-producer \
    github.com/IBM/sarama/tools/kafka-console-consumer)
  rm -f "$bin"/.sarama-*
  touch "$stamp"
  say "Sarama binaries built in $((SECONDS - start)) s"
fi

# Burrow: Debian's package where apt knows it, else built from the module proxy.
if [ ! -x "$bin/Burrow" ]; then
  if [ ! -x /usr/bin/Burrow ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache show burrow >/dev/null 2>&1; then
      say "apt-get update (looking for Debian's burrow) ..."
      run_logged $SUDO apt-get update -qq -o DPkg::Lock::Timeout=300
    fi
    if apt-cache show burrow >/dev/null 2>&1; then
      say "installing Debian's burrow ..."
      run_logged $SUDO apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 burrow
      # Its service would run Burrow with the package's example configuration (hosts at example.com on
      # :8000); the tests and docs/interop.md start Burrow themselves.
      $SUDO systemctl disable --now burrow >/dev/null 2>&1 || true
      $SUDO service burrow stop >/dev/null 2>&1 || true
    fi
  fi
  if [ -x /usr/bin/Burrow ]; then
    ln -sf /usr/bin/Burrow "$bin/Burrow"
  else
    start=$SECONDS
    say "no Debian burrow package: building $burrow_module from the module proxy ..."
    run_logged env GOBIN="$bin" GOFLAGS="-modcacherw -buildvcs=false" go install "$burrow_module"
    say "Burrow built in $((SECONDS - start)) s"
  fi
fi
echo "$bin"
