"""One broker process: startup, the listeners, background duties and graceful shutdown.

Startup follows Kafka's ZooKeeper-mode order: ZooKeeper session and cluster id, log recovery, the
listeners, broker registration (whose czxid is the broker epoch), then controller election. Every
broker runs the elector; the winner also runs the controller in this same event loop.

SIGTERM is a graceful shutdown: controlled shutdown through the controller (leadership moves away
first), stop accepting connections, let in-flight requests finish, flush and checkpoint the logs and
write the clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import socket
import threading
import time
from collections.abc import Awaitable
from typing import Any

from broker.config_changes import ConfigChangeListener, load_topic_overrides
from broker.connection import Connection, ConnectionStats, limited_log
from broker.connection_quotas import ConnectionQuotas, TooManyConnections, limits_from, normalise_ip
from broker.connection_rate_quotas import ConnectionRateQuotas, IpQuotaConfigCache
from broker.heap import freeze_after_many_logs
from broker.kafka_apis import KafkaApis
from broker.listeners import Endpoint, inter_broker_and_control_plane, parse_listeners, parse_protocol_map
from broker.log_dir_failure import LogDirFailureHandler
from broker.log_validator import RECORD_SCANNER
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.request_queue import CONTROL_PLANE_QUEUE, RequestPermits
from broker.security.sasl_server import BrokerSasl
from broker.security.tls_connection import TlsConnection
from broker.security.tls_listener import ListenerTls
from broker.wiring import BrokerComponents, build_components, stop_components
from config.registry import BrokerConfig, ConfigError, LogConfig
from controller import zk_data as zd
from controller.zk_client import KafkaZkClient
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

# Longest a TLS handshake may take (capped by connections.max.idle.ms). Kafka has no such setting; its
# idle sweep closes a connection stuck in the handshake after connections.max.idle.ms (10 minutes).
_TLS_HANDSHAKE_TIMEOUT_S = 10.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id: int = config.get("broker.id")
        pmap = parse_protocol_map(config.get("listener.security.protocol.map"))
        self.listeners = parse_listeners("listeners", config.get("listeners"), pmap)
        adv = config.get("advertised.listeners")
        self.advertised = parse_listeners("advertised.listeners", adv, pmap) if adv else self.listeners
        self.inter_broker_listener, self.control_plane_listener = inter_broker_and_control_plane(
            config, self.listeners, self.advertised, pmap)
        if not config.get("zookeeper.connect"):
            raise ConfigError("zookeeper.connect", "", "is required (kafkette runs in ZooKeeper mode)")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.zk: KafkaZkClient | None = None
        self.cluster_id: str | None = None
        self.broker_epoch = -1
        self.metadata = MetadataCache(self.broker_id)
        self.log_manager: LogManager | None = None
        self.cleaner: Any = None
        self.replica_manager: ReplicaManager | None = None
        self.apis = KafkaApis(self.control_plane_listener)
        self.stats = ConnectionStats()
        self.connections: set[Connection] = set()
        # SASL on SASL_PLAINTEXT/SASL_SSL listeners: mechanisms and JAAS are checked here (start-up fails).
        self.sasl = BrokerSasl(lambda: self.config, self.listeners)
        listener_names = [e.name for e in self.listeners]
        self.connection_quotas = ConnectionQuotas(
            limits_from(config.get, listener_get=config.listener_get, listeners=listener_names),
            self.inter_broker_listener, listener_names)
        # KIP-612: max.connection.creation.rate, and connection_creation_rate per IP (from ZooKeeper).
        self.connection_rates = ConnectionRateQuotas(config.get("max.connection.creation.rate"),
                                                     config.get("quota.window.num"),
                                                     config.get("quota.window.size.seconds"))
        for name in listener_names:
            self.connection_rates.set_listener_limit(name, config.listener_get(name, "max.connection.creation.rate"))
        self._throttled_sockets: set[socket.socket] = set()  # over their IP's rate: held, then closed
        # Requests read but not answered: Kafka's data-plane queue, and the control plane's own.
        self.request_permits = RequestPermits(config.get("queued.max.requests"),
                                              config.get("queued.max.request.bytes"))
        self.control_plane_permits = RequestPermits(CONTROL_PLANE_QUEUE)
        self.connections_created: dict[str, int] = {e.name: 0 for e in self.listeners}
        self.connections_closed: dict[str, int] = {e.name: 0 for e in self.listeners}
        self.expired_connections_killed = 0
        self.bound: dict[str, tuple[str, int]] = {}
        self._servers: list[socket.socket] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self._stopping: asyncio.Event | None = None  # created in run(), inside the loop
        self.started_at = time.time()
        self.components = BrokerComponents()  # built in startup() by build_components
        self.config_changes: ConfigChangeListener | None = None  # from startup()
        # SSL / SASL_SSL listeners: their current server context (rotated by dynamic config updates).
        self.listener_tls: dict[str, ListenerTls] = {}
        # The dynamic broker config as stored in ZooKeeper (cluster default, this broker), so that an
        # AlterConfigs can be validated against the config it would produce.
        self._dynamic_default: dict[str, str] = {}
        self._dynamic_broker: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------------
    # Configuration views

    def topic_config(self, topic: str) -> LogConfig:
        return LogConfig.from_broker(self.config, self._topic_overrides.get(topic, {}), strict=False)

    def set_topic_overrides(self, topic: str, overrides: dict[str, str]) -> None:
        self._topic_overrides[topic] = dict(overrides)
        if self.replica_manager is not None:
            self.replica_manager.on_topic_config_change(topic)

    async def load_topic_overrides(self, topics: list[str]) -> None:
        """The overrides of topics whose logs this broker is about to create, fresh from ZooKeeper."""
        if self.zk is not None:
            await load_topic_overrides(self.zk, self.zk_call, topics, self._topic_overrides)

    def forget_topic_overrides(self, topic: str) -> None:
        """The topic's config node is gone (topic deleted): a topic created later under the same name
        starts from the broker defaults."""
        self._topic_overrides.pop(topic, None)

    async def zk_call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking ZooKeeper call off the event loop."""
        assert self.loop is not None
        return await self.loop.run_in_executor(None, lambda: fn(*args, **kwargs))

    @property
    def controller_listener(self) -> str:
        """The listener controller requests travel on (Kafka: control plane, else inter-broker)."""
        return self.control_plane_listener or self.inter_broker_listener

    # ------------------------------------------------------------------------------------------------
    # Lifecycle

    async def run(self) -> int:
        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self.loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.startup()
        except Exception:
            log.exception("broker %d failed to start", self.broker_id)
            await self.shutdown()
            return 1
        log.info("[KafkaServer id=%d] started (cluster id %s, listeners %s)", self.broker_id, self.cluster_id,
                 ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.bound.items()))
        log.info("[KafkaServer id=%d] produce validation scans records with the %s scanner", self.broker_id,
                 RECORD_SCANNER)
        await self._stopping.wait()
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        await self.shutdown()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)
        return 0

    def request_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def startup(self) -> None:
        cfg = self.config
        self.zk = KafkaZkClient(cfg.get("zookeeper.connect"), cfg.get("zookeeper.session.timeout.ms"),
                                cfg.get("zookeeper.connection.timeout.ms"), name=f"broker-{self.broker_id}")
        await self.zk_call(self.zk.start)
        await self.zk_call(self.zk.create_top_level_paths)
        self.cluster_id = await self.zk_call(self.zk.get_or_create_cluster_id)
        self.metadata.cluster_id = self.cluster_id
        await self._load_dynamic_configs()
        self.config_changes = ConfigChangeListener(self.zk, self.zk_call, self.broker_id, asyncio.get_running_loop(),
                                                   self)
        await self.config_changes.start()
        await self.sasl.start(self.zk, self.zk_call, self.config_changes)  # SCRAM credentials from ZooKeeper
        from broker.quota import start_client_quotas

        await start_client_quotas(self.apis, cfg.get, self.zk, self.zk_call, self.config_changes)
        await IpQuotaConfigCache(self.connection_rates, self.zk, self.zk_call).start(self.config_changes)
        self.log_dir_failure = LogDirFailureHandler(
            self.broker_id, list(cfg.log_dir_list), lambda: self.log_manager.online_dirs if self.log_manager else [],
            self.zk_call, self.zk)
        self.log_manager = LogManager(
            list(cfg.log_dir_list), broker_id=self.broker_id, cluster_id=self.cluster_id,
            default_config=LogConfig.from_broker(cfg, {}), topic_config=self.topic_config,
            on_dir_offline=self.log_dir_failure.on_dir_offline,
            retention_check_interval_ms=cfg.get("log.retention.check.interval.ms"),
            flush_offset_checkpoint_interval_ms=cfg.get("log.flush.offset.checkpoint.interval.ms"),
            flush_start_offset_checkpoint_interval_ms=cfg.get("log.flush.start.offset.checkpoint.interval.ms"),
            high_watermark_checkpoint_interval_ms=cfg.get("replica.high.watermark.checkpoint.interval.ms"),
            recovery_threads=cfg.get("num.recovery.threads.per.data.dir"), after_many_logs=freeze_after_many_logs)
        await self.loop.run_in_executor(None, self.log_manager.startup)  # type: ignore[union-attr]
        if cfg.get("log.cleaner.enable"):
            from storage.cleaner import LogCleaner

            # Compaction runs in its own thread, away from the event loop (as Kafka's cleaner threads).
            self.cleaner = LogCleaner(self.log_manager, dedupe_buffer_size=cfg.get("log.cleaner.dedupe.buffer.size"),
                                      io_buffer_size=cfg.get("log.cleaner.io.buffer.size"),
                                      load_factor=cfg.get("log.cleaner.io.buffer.load.factor"),
                                      backoff_ms=cfg.get("log.cleaner.backoff.ms"),
                                      max_io_bytes_per_second=cfg.get("log.cleaner.io.max.bytes.per.second"),
                                      threads=cfg.get("log.cleaner.threads"))
            self.cleaner.start()
        self.replica_manager = await build_components(self)
        # From here on a failed log dir is handled on the event loop (KIP-112: broker/log_dir_failure.py).
        self.log_dir_failure.stop_partitions = self.replica_manager.on_log_dir_failure
        self.log_dir_failure.loop = asyncio.get_running_loop()
        await self._start_listeners()
        self.broker_epoch = await self._register()
        # After a ZooKeeper session expiry the client re-registers us; the new czxid is our epoch.
        self.zk.on_broker_reregistered(self._on_reregistered)
        assert self.components.controller_services is not None
        await self.components.controller_services.start()
        self._tasks.append(asyncio.ensure_future(self._housekeeping()))
        from broker.metrics import start_metrics

        await start_metrics(self)

    def _on_reregistered(self, epoch: int) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(setattr, self, "broker_epoch", epoch)

    async def _register(self) -> int:
        """Register in ZooKeeper. A broker restarted right after a crash finds its id still held by its
        previous, dead session; that registration goes away when the session expires, so wait for it
        (up to one session timeout and a little) before concluding that another broker has the id."""
        from controller.zk_client import BrokerIdInUseError

        assert self.zk is not None and self.loop is not None
        wait_s = self.config.get("zookeeper.session.timeout.ms") / 1000.0 + 5.0
        deadline = self.loop.time() + wait_s
        logged = False
        while True:
            try:
                return await self.zk_call(self.zk.register_broker, self._registration())
            except BrokerIdInUseError as e:
                if self.loop.time() >= deadline or (self._stopping is not None and self._stopping.is_set()):
                    raise
                if not logged:
                    log.warning("%s; waiting up to %.0f s for a previous session of this broker to expire",
                                e, wait_s)
                    logged = True
                await asyncio.sleep(0.5)

    def _registration(self) -> zd.BrokerRegistration:
        eps = tuple(zd.EndPoint(host=self._advertised_host(e), port=self.bound.get(e.name, (e.host, e.port))[1]
                                if e.port == 0 else e.port, listener_name=e.name,
                                security_protocol=e.security_protocol) for e in self.advertised)
        return zd.BrokerRegistration(broker_id=self.broker_id, endpoints=eps, rack=self.config.get("broker.rack"))

    def _advertised_host(self, e: Endpoint) -> str:
        return e.advertised_host

    async def _load_dynamic_configs(self) -> None:
        assert self.zk is not None
        topics = await self.zk_call(self.zk.get_all_entities_with_config, zd.CONFIG_TYPE_TOPIC)
        if topics:
            configs = await self.zk_call(self.zk.get_topic_configs, topics)
            for t, c in configs.items():
                self._topic_overrides[t] = c
        await self.reload_dynamic_broker_config()

    async def reload_dynamic_broker_config(self) -> None:
        """Re-read dynamic broker configs from ZooKeeper (after AlterConfigs or a change notification)."""
        assert self.zk is not None
        default = await self.zk_call(self.zk.get_entity_config, zd.CONFIG_TYPE_BROKER, "<default>")
        mine = await self.zk_call(self.zk.get_entity_config, zd.CONFIG_TYPE_BROKER, str(self.broker_id))
        try:
            self.config = self.config.with_dynamic(dynamic_default=default, dynamic_broker=mine)
        except ConfigError as e:
            log.error("ignoring invalid dynamic broker config in ZooKeeper: %s", e)
            return
        self._dynamic_default, self._dynamic_broker = dict(default or {}), dict(mine or {})
        self._reconfigure_tls()
        if self.replica_manager is not None:
            self.replica_manager.config = self.config
            for topic in {t for t, _ in self.replica_manager.partitions}:
                self.replica_manager.on_topic_config_change(topic)
        await self._reconfigure_connection_quotas()
        fetchers = self.replica_manager.fetcher_manager if self.replica_manager is not None else None
        if fetchers is not None:
            await fetchers.resize(self.config.get("num.replica.fetchers"))
        if self.cleaner is not None:
            threads = self.config.get("log.cleaner.threads")
            if threads != self.cleaner.threads:
                # The threads finish their current pass first, which may take long: not on this path.
                log.info("log.cleaner.threads now %d (was %d): restarting the cleaner threads", threads,
                         self.cleaner.threads)
                self._tasks.append(asyncio.ensure_future(asyncio.get_running_loop().run_in_executor(
                    None, self.cleaner.set_threads, threads)))
            rate = self.config.get("log.cleaner.io.max.bytes.per.second")
            if rate != self.cleaner.throttler.desired_rate_per_s:
                log.info("log cleaner I/O now at most %s bytes a second", rate)
                self.cleaner.throttler.desired_rate_per_s = rate

    def validate_dynamic_update(self, entity: str, configs: dict[str, str]) -> None:
        """Check that a dynamic config update (AlterConfigs for ``entity``: this broker's id or
        "<default>") can be applied here: the TLS listeners must be able to load their new keystores
        and truststores. Raises ConfigError (Kafka: DynamicBrokerConfig.validate)."""
        if entity == "<default>":
            candidate = self.config.with_dynamic(dynamic_default=configs, dynamic_broker=self._dynamic_broker)
        elif entity == str(self.broker_id):
            candidate = self.config.with_dynamic(dynamic_default=self._dynamic_default, dynamic_broker=configs)
        else:
            return
        for listener_tls in self.listener_tls.values():
            listener_tls.validate_reconfiguration(candidate)
        if self.cleaner is not None:
            self._validate_cleaner_threads(candidate.get("log.cleaner.threads"))

    def _validate_cleaner_threads(self, threads: int) -> None:
        """Kafka's LogCleaner.validateReconfiguration."""
        assert self.cleaner is not None
        current = self.cleaner.threads
        if threads == current:
            return
        if threads < 1:
            raise ConfigError("log.cleaner.threads", threads, "Log cleaner threads should be at least 1")
        if threads < current // 2:
            raise ConfigError("log.cleaner.threads", threads,
                              f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if threads > current * 2:
            raise ConfigError("log.cleaner.threads", threads,
                              f"Log cleaner threads cannot be increased to more than double the current value {current}")

    def _reconfigure_tls(self) -> None:
        """Certificate rotation: a TLS listener whose ssl.* values (or keystore files) changed gets a new
        context for its next connections. A change that fails Kafka's checks leaves the old one."""
        for listener_tls in self.listener_tls.values():
            try:
                listener_tls.reconfigure(self.config)
            except ConfigError as e:
                log.error("listener %s keeps its current SSL context: %s", listener_tls.listener, e)

    async def _reconfigure_connection_quotas(self) -> None:
        """max.connections, max.connections.per.ip(.overrides) and max.connection.creation.rate apply to
        the next connections at once."""
        assert self.loop is not None
        config = self.config
        self.connection_rates.set_broker_limit(config.get("max.connection.creation.rate"))
        for e in self.listeners:
            self.connection_rates.set_listener_limit(e.name, config.listener_get(e.name, "max.connection.creation.rate"))
        try:
            # Host names in the overrides are resolved, off the loop (DNS may be slow).
            limits = await self.loop.run_in_executor(None, functools.partial(
                limits_from, config.get, listener_get=config.listener_get, listeners=[e.name for e in self.listeners]))
        except ConfigError as e:
            log.error("ignoring invalid connection limits: %s", e)
            return
        if limits != self.connection_quotas.limits:
            log.info("connection limits now: max.connections=%d (per listener %s), max.connections.per.ip=%d, "
                     "overrides %s", limits.max_connections, dict(limits.per_listener), limits.per_ip,
                     dict(limits.per_ip_overrides) or "none")
            self.connection_quotas.reconfigure(limits)

    def _build_listener_tls(self) -> None:
        """One server SSL context per SSL / SASL_SSL listener, from its listener.name.<l>.ssl.* configs;
        a listener without a usable keystore stops the start-up with Kafka's message."""
        for e in self.listeners:
            if e.uses_tls:
                self.listener_tls[e.name] = ListenerTls.build(self.config, e.name,
                                                              inter_broker=e.name == self.inter_broker_listener)

    async def _start_listeners(self) -> None:
        self._build_listener_tls()
        # Kafka's default backlog (50) is too short for a burst of reconnecting clients on one event loop.
        backlog = max(512, self.config.get("socket.listen.backlog.size"))
        for e in self.listeners:
            sock = socket.socket(socket.AF_INET6 if ":" in e.host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((e.host or "0.0.0.0", e.port))
            except OSError as err:
                sock.close()
                raise ConfigError("listeners", str(e), f"cannot bind: {err.strerror}") from None
            sock.listen(backlog)
            sock.setblocking(False)
            self._servers.append(sock)
            self.bound[e.name] = sock.getsockname()[:2]
            self._tasks.append(asyncio.ensure_future(self._accept_loop(sock, e)))
        self._tasks.append(asyncio.ensure_future(self._expire_idle_connections()))

    def _new_connection(self, sock: socket.socket, endpoint: Endpoint, peer: tuple[str, int],
                        permits: RequestPermits) -> Connection:
        """A plain or TLS connection for ``endpoint`` (SASL is attached to it afterwards)."""
        listener = endpoint.name
        max_bytes = self.config.get("socket.request.max.bytes")
        listener_tls = self.listener_tls.get(listener)
        if listener_tls is None:
            return Connection(sock, self.apis.handle_frame, max_request_bytes=max_bytes, listener=listener,
                              stats=self.stats, permits=permits, peer=peer)
        # A client that connects and never completes the handshake is dropped well before the idle sweep.
        handshake_timeout_s = min(_TLS_HANDSHAKE_TIMEOUT_S, self.config.get("connections.max.idle.ms") / 1000.0)
        return TlsConnection(sock, self.apis.handle_frame, tls=listener_tls,
                             security_protocol=endpoint.security_protocol, handshake_timeout_s=handshake_timeout_s,
                             max_request_bytes=max_bytes, listener=listener, stats=self.stats, permits=permits,
                             peer=peer)

    async def _accept_loop(self, server: socket.socket, endpoint: Endpoint) -> None:
        assert self.loop is not None
        listener = endpoint.name
        rcvbuf = self.config.get("socket.receive.buffer.bytes")
        sndbuf = self.config.get("socket.send.buffer.bytes")
        quotas = self.connection_quotas
        rates = self.connection_rates
        permits = self.control_plane_permits if listener == self.control_plane_listener else self.request_permits
        while True:
            try:
                # At max.connections the acceptor waits; new clients queue in the listen backlog.
                await quotas.wait_for_slot(listener)
                sock, addr = await self.loop.sock_accept(server)
            except (OSError, asyncio.CancelledError):
                return
            ip = normalise_ip(addr[0], lambda h: h)
            protected = quotas.protected(listener)
            delay_ms = rates.record_connection(listener, protected)
            if delay_ms:
                # Over max.connection.creation.rate: this listener accepts nothing more until the rate
                # is back at the limit, and then serves the connection it holds (Kafka's acceptor waits).
                try:
                    await asyncio.sleep(delay_ms / 1000.0)
                except asyncio.CancelledError:
                    sock.close()
                    return
            hold_ms = rates.record_ip_connection(listener, protected, ip)
            if hold_ms:
                # Over its address's connection_creation_rate: never served, closed once the throttle
                # time is over (Kafka's delayed close), so that a client reconnecting in a loop slows down.
                limited_log.log(logging.INFO, "connection_creation_rate",
                                "Throttling connection from %s for %d ms: over its connection_creation_rate of %d",
                                ip, hold_ms, rates.ip_limit(ip))
                self._throttled_sockets.add(sock)
                self.loop.call_later(hold_ms / 1000.0, self._close_throttled, sock)
                continue
            try:
                quotas.inc(listener, ip)
            except TooManyConnections as e:
                limited_log.log(logging.INFO, "max.connections.per.ip",
                                "Rejected connection from %s, address already has the configured maximum of %d "
                                "connections.", e.ip, e.count)
                sock.close()
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if rcvbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                if sndbuf > 0:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
                conn = self._new_connection(sock, endpoint, (ip, addr[1]), permits)
                self.sasl.attach(conn)  # SASL listeners: authentication before any other request
            except OSError:
                quotas.dec(listener, ip)  # reset before we got to it
                sock.close()
                continue
            self.connections.add(conn)
            self.connections_created[listener] = self.connections_created.get(listener, 0) + 1
            task = asyncio.ensure_future(conn.serve())
            task.add_done_callback(functools.partial(self._connection_gone_callback, conn))
            if quotas.max_connections_exceeded() and quotas.protected(listener):
                self._close_lru_connection()

    def _close_throttled(self, sock: socket.socket) -> None:
        if sock in self._throttled_sockets:
            self._throttled_sockets.discard(sock)
            sock.close()

    def _connection_gone_callback(self, conn: Connection, _task: asyncio.Future[None]) -> None:
        self._connection_gone(conn)

    def _connection_gone(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.connection_quotas.dec(conn.listener, conn.client_host)
            self.connections_closed[conn.listener] = self.connections_closed.get(conn.listener, 0) + 1

    def _close_lru_connection(self) -> None:
        """An inter-broker connection took the broker past max.connections: make room as Kafka does,
        by closing the least recently active connection of another listener."""
        quotas = self.connection_quotas
        candidates = [c for c in self.connections if not quotas.protected(c.listener) and c.close_reason is None]
        if not candidates:
            return
        victim = min(candidates, key=lambda c: c.last_active)
        quotas.closed_for_max_connections[victim.listener] = quotas.closed_for_max_connections.get(victim.listener,
                                                                                                   0) + 1
        limited_log.log(logging.INFO, "max.connections", "Closing connection %s on listener %s: the broker is at "
                        "max.connections=%d and an inter-broker connection needs room", victim.peer, victim.listener,
                        quotas.limits.max_connections)
        victim.close("max.connections")

    async def _expire_idle_connections(self) -> None:
        """connections.max.idle.ms: close connections with no traffic for that long (Kafka's Selector
        closes expired channels on each poll). One sweep checks every connection; it runs a few times
        per idle period, so a connection lives at most about 1.25 idle periods."""
        idle_s = self.config.get("connections.max.idle.ms") / 1000.0
        interval = max(0.05, min(idle_s / 4, 30.0))
        while True:
            await asyncio.sleep(interval)
            deadline = time.monotonic() - idle_s
            expired = [c for c in self.connections if not c.busy and c.last_active < deadline
                       and c.close_reason is None]
            for c in expired:
                self.expired_connections_killed += 1
                c.close("connections.max.idle.ms")
            if expired:
                limited_log.log(logging.DEBUG, "idle", "closed %d connections idle for connections.max.idle.ms=%d",
                                len(expired), int(idle_s * 1000))

    async def _housekeeping(self) -> None:
        """Once a second: retention, flushes and checkpoints (in a thread: they touch the disk)."""
        assert self.loop is not None and self.log_manager is not None
        next_producer_expiry = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            try:
                await self.loop.run_in_executor(None, self.log_manager.tick)
            except Exception:
                log.exception("log maintenance failed")
            cfg = self.config
            if time.monotonic() >= next_producer_expiry:
                # Producer ids idle for producer.id.expiration.ms leave the producer state, as Kafka's
                # periodic check does; on the event loop, where appends change the same state.
                next_producer_expiry = time.monotonic() + cfg.get("producer.id.expiration.check.interval.ms") / 1000
                try:
                    removed = self.log_manager.remove_expired_producers(self.log_manager.clock(),
                                                                       cfg.get("producer.id.expiration.ms"))
                    if removed:
                        log.info("removed %d expired producer ids", removed)
                except Exception:
                    log.exception("producer id expiration failed")

    async def shutdown(self) -> None:
        from broker.metrics import stop_metrics

        await stop_metrics(self)

        zk_reachable = await self._zookeeper_reachable_for_shutdown()
        if zk_reachable and self.broker_epoch >= 0 and self.config.get("controlled.shutdown.enable"):
            await self._controlled_shutdown()
        if self.zk is not None and not zk_reachable:
            # Every ZooKeeper call below would wait for a session that cannot come back (Kafka's
            # retryRequestsUntilConnected waits for ever too). Closing the client first makes them fail
            # at once; the session expires on ZooKeeper's side and the controller moves our partitions.
            log.warning("[KafkaServer id=%d] ZooKeeper is unreachable: shutting down without it",
                        self.broker_id)
            await self._close_zookeeper()
        for s in self._servers:
            with contextlib.suppress(OSError):
                s.close()
        # In-flight requests get a moment to finish; idle connections are closed.
        deadline = time.monotonic() + 5.0
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for c in list(self.connections):
            c.close()
        for sock in list(self._throttled_sockets):
            self._close_throttled(sock)
        for t in self._tasks:
            t.cancel()
        # Each step is on its own: one that fails must not keep the logs from closing cleanly.
        if self.config_changes is not None:
            await self._shutdown_step("config change notifications", self.config_changes.stop())
        if self.components.controller_services is not None:
            await self._shutdown_step("controller", self.components.controller_services.stop())
        await self._shutdown_step("broker components", stop_components(self))
        loop = asyncio.get_running_loop()
        if self.cleaner is not None:
            await self._shutdown_step("log cleaner", loop.run_in_executor(None, self.cleaner.stop))
        if self.log_manager is not None:
            await loop.run_in_executor(None, self.log_manager.shutdown, self.broker_epoch)
        if self.zk is not None and zk_reachable:
            await self._close_zookeeper()

    async def _zookeeper_reachable_for_shutdown(self) -> bool:
        """False when ZooKeeper stays unreachable for a session timeout: by then our session is lost
        anyway, and waiting longer only keeps the process from stopping."""
        if self.zk is None:
            return False
        deadline = time.monotonic() + self.config.get("zookeeper.session.timeout.ms") / 1000.0
        while not self.zk.connected:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)
        return True

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown, bounded by its own settings: every attempt may take a controller
        request timeout plus the retry backoff, so a controller that never answers cannot hold us."""
        cfg = self.config
        bound = cfg.get("controlled.shutdown.max.retries") * (
            cfg.get("controller.socket.timeout.ms") + cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000.0
        log.info("[KafkaServer id=%d] Starting controlled shutdown", self.broker_id)
        started = time.monotonic()
        try:
            assert self.components.controller_services is not None
            if await asyncio.wait_for(self.components.controller_services.controlled_shutdown(), bound):
                log.info("[KafkaServer id=%d] Controlled shutdown request returned successfully after %d ms",
                         self.broker_id, (time.monotonic() - started) * 1000)
            else:
                log.warning("[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the controlled "
                            "shutdown attempts failed", self.broker_id)
        except TimeoutError:
            log.warning("controlled shutdown did not finish in %.0f s; shutting down uncleanly", bound)
        except Exception:
            log.exception("controlled shutdown failed; shutting down uncleanly")

    async def _shutdown_step(self, what: str, step: Awaitable[Any]) -> None:
        try:
            await step
        except Exception:
            log.exception("stopping the %s failed; shutting down the rest", what)

    async def _close_zookeeper(self) -> None:
        # In a thread of its own: the shared executor's threads may all be waiting on ZooKeeper.
        assert self.zk is not None
        closer = threading.Thread(target=self.zk.close, name="zookeeper-close", daemon=True)
        closer.start()
        deadline = time.monotonic() + 10.0
        while closer.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
