#!/usr/bin/env bash
# Container entrypoint of a kafkette broker.
#
# Builds server.properties from the environment, the convention of Kafka's container images:
# every KAFKA_<NAME> variable becomes a broker config by lower-casing NAME and turning '_' into '.',
# '__' into '_' and '___' into '-':
#   KAFKA_BROKER_ID=1                          -> broker.id=1
#   KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181     -> zookeeper.connect=zookeeper:2181
#   KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=...   -> listener.security.protocol.map=...
# Variables that configure the JVM in Kafka's images (KAFKA_OPTS, KAFKA_HEAP_OPTS, ...) are skipped.
# A base file ($KAFKETTE_BASE_CONFIG, default /etc/kafkette/server.properties if present) is copied
# first, then the files listed in $KAFKETTE_CONFIG_FILES (space-separated; the secured compose profile
# includes the security settings its init service wrote, passwords included, this way); environment
# values are appended after them, so they win.
#
#   docker-entrypoint.sh                 write the file, then run the broker (exec)
#   docker-entrypoint.sh --print-config  write the file to stdout and exit
#   docker-entrypoint.sh CMD ...         run CMD instead (e.g. kafkette topics --list)
# The broker runs as the image's non-root user (kafkette, uid 1000). Started as root, the entrypoint gives
# the log dirs to that user and drops to it (setpriv); started as anyone else, it checks they are writable.
set -euo pipefail

CONFIG_OUT="${KAFKETTE_CONFIG:-/var/lib/kafkette/server.properties}"
RUN_AS="${KAFKETTE_USER:-kafkette}"
BASE_CONFIG="${KAFKETTE_BASE_CONFIG:-/etc/kafkette/server.properties}"

skip_var() {
  case "$1" in
    KAFKA_OPTS|KAFKA_HEAP_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_JMX_OPTS|KAFKA_GC_LOG_OPTS|KAFKA_VERSION|KAFKA_HOME|KAFKA_DEBUG)
      return 0 ;;
  esac
  return 1
}

env_to_name() {
  # KAFKA_A_B__C___D -> a.b_c-d
  local n="${1#KAFKA_}"
  n="${n,,}"
  n="${n//___/-}"
  n="${n//__/@}"
  n="${n//_/.}"
  n="${n//@/_}"
  printf '%s' "$n"
}

render_config() {
  if [[ -f "$BASE_CONFIG" ]]; then
    cat "$BASE_CONFIG"
    echo
  fi
  local f
  for f in ${KAFKETTE_CONFIG_FILES:-}; do
    if [[ ! -r "$f" ]]; then
      echo "docker-entrypoint: $f (KAFKETTE_CONFIG_FILES) is not readable" >&2
      return 1
    fi
    echo "# from $f"
    cat "$f"
    echo
  done
  echo "# from the environment ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  local var
  while IFS= read -r var; do
    skip_var "$var" && continue
    printf '%s=%s\n' "$(env_to_name "$var")" "${!var}"
  done < <(compgen -e | grep '^KAFKA_' | sort)
}

if [[ "${1:-}" == "--print-config" ]]; then
  render_config
  exit 0
fi

if [[ $# -gt 0 ]]; then
  exec "$@"
fi

if [[ -z "${KAFKA_ZOOKEEPER_CONNECT:-}" ]] && ! grep -qs '^zookeeper.connect=' "$BASE_CONFIG"; then
  echo "docker-entrypoint: KAFKA_ZOOKEEPER_CONNECT is not set (kafkette runs in ZooKeeper mode)" >&2
  exit 2
fi
mkdir -p "$(dirname "$CONFIG_OUT")"
# The file may hold passwords (ssl.key.password, sasl.jaas.config): readable by its owner only.
(umask 077 && render_config > "$CONFIG_OUT")
echo "docker-entrypoint: wrote $CONFIG_OUT" >&2

# The data directories: log.dirs, else log.dir (the last value in the file wins, as in the broker).
log_dirs="$(sed -n 's/^[[:space:]]*log\.dirs[[:space:]]*=[[:space:]]*//p' "$CONFIG_OUT" | tail -n 1)"
[[ -n "$log_dirs" ]] || log_dirs="$(sed -n 's/^[[:space:]]*log\.dir[[:space:]]*=[[:space:]]*//p' "$CONFIG_OUT" | tail -n 1)"
[[ -n "$log_dirs" ]] || log_dirs=/tmp/kafka-logs
IFS=',' read -r -a dirs <<<"$log_dirs"

if [[ "$(id -u)" == 0 ]]; then
  # Started as root (e.g. `user: root` for a volume created by someone else): the broker still runs as
  # kafkette, so it must own its data directories and the rendered config.
  for d in "${dirs[@]}"; do
    mkdir -p "$d"
    chown -R "$RUN_AS:$RUN_AS" "$d"
  done
  chown "$RUN_AS:$RUN_AS" "$CONFIG_OUT"
  exec setpriv --reuid="$RUN_AS" --regid="$RUN_AS" --init-groups kafkette broker start --config "$CONFIG_OUT"
fi
for d in "${dirs[@]}"; do
  mkdir -p "$d" 2>/dev/null || true
  if [[ ! -w "$d" ]]; then
    echo "docker-entrypoint: log dir $d is not writable by uid $(id -u); chown it to $(id -u) or start" \
         "the container as root once so that the entrypoint hands it over" >&2
    exit 1
  fi
done
# exec: the broker is the container's main process and receives the stop signal (SIGTERM) itself.
exec kafkette broker start --config "$CONFIG_OUT"
