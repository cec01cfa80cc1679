#!/usr/bin/env bash
# Entrypoint of deploy/zookeeper/Dockerfile: writes /conf/zoo.cfg from the ZOO_* variables the public
# zookeeper image reads (same names, same defaults) unless a zoo.cfg is mounted, writes /data/myid, and
# runs QuorumPeerMain in the foreground as the zookeeper user.
set -euo pipefail
CONF=/conf/zoo.cfg
: "${ZOO_DATA_DIR:=/data}" "${ZOO_DATA_LOG_DIR:=/datalog}" "${ZOO_PORT:=2181}" "${ZOO_TICK_TIME:=2000}"
: "${ZOO_INIT_LIMIT:=5}" "${ZOO_SYNC_LIMIT:=2}" "${ZOO_MAX_CLIENT_CNXNS:=60}" "${ZOO_STANDALONE_ENABLED:=true}"
: "${ZOO_ADMINSERVER_ENABLED:=true}" "${ZOO_AUTOPURGE_PURGEINTERVAL:=0}" "${ZOO_AUTOPURGE_SNAPRETAINCOUNT:=3}"
: "${ZOO_4LW_COMMANDS_WHITELIST:=srvr}" "${ZOO_MY_ID:=1}"

if [[ ! -f "$CONF" ]]; then
  {
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=$ZOO_TICK_TIME"
    echo "initLimit=$ZOO_INIT_LIMIT"
    echo "syncLimit=$ZOO_SYNC_LIMIT"
    echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
    echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
    echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
    echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
    echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
    if [[ -z "${ZOO_SERVERS:-}" ]]; then
      echo "clientPort=$ZOO_PORT"
    else
      # "server.1=zk1:2888:3888;2181 server.2=..." (the client port rides on each server line)
      for server in $ZOO_SERVERS; do
        echo "$server"
      done
    fi
    for cfg in ${ZOO_CFG_EXTRA:-}; do
      echo "$cfg"
    done
  } >"$CONF"
fi
mkdir -p "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR"
[[ -f "$ZOO_DATA_DIR/myid" ]] || echo "$ZOO_MY_ID" >"$ZOO_DATA_DIR/myid"

run=()
if [[ "$(id -u)" == 0 ]]; then
  chown -R zookeeper:zookeeper "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR" /logs /conf
  run=(setpriv --reuid=zookeeper --regid=zookeeper --init-groups)
fi
if [[ $# -gt 0 ]]; then
  exec "${run[@]}" "$@"
fi
# Debian's zookeeper.jar logs through SLF4J; its log4j 1.2 binding sends the log to stdout (CONSOLE).
classpath=/conf:/usr/share/java/zookeeper.jar
for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
  [[ -f "$jar" ]] && classpath="$classpath:$jar"
done
# exec: the JVM is PID 1 and gets the stop signal itself.
# shellcheck disable=SC2086  # JVMFLAGS is a list of flags
exec "${run[@]}" java ${JVMFLAGS:-} -Dzookeeper.log.dir=/logs -Dzookeeper.root.logger=INFO,CONSOLE \
  -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$CONF"
