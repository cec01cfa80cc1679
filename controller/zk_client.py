"""Kafka's operations on ZooKeeper, over kazoo.

``KafkaZkClient`` mirrors the parts of Kafka's ``KafkaZkClient`` (ZooKeeper mode) that kafkette uses:
broker registration, controller election, topics, partition states, configs with change
notifications, producer id blocks, topic deletion, reassignment and ISR-change znodes.

Every method here is synchronous and may block on the network: asyncio code runs them in a thread
executor (``await loop.run_in_executor(None, zk.method, ...)``). Kazoo delivers watches and session
state changes on its own threads; callers bridge them into their loop with
``loop.call_soon_threadsafe``.

Writes made by the controller take ``expected_controller_epoch_zk_version``: the write is sent as a
ZooKeeper multi-op together with a version check on ``/controller_epoch``, so a controller that has
been replaced (a newer one bumped the epoch) cannot change anything: it gets ``ControllerMovedError``.
Requests that fail with a connection loss are retried once the session is connected again, as Kafka
does; an expired session surfaces as ``SessionExpiredError``.

Why one module of ~900 lines: it is a catalogue of small, independent znode operations (most under 20
lines), each mirroring one method of Kafka's client, with the retry, fencing and session handling
they share defined once at the top. Splitting the catalogue by znode family would repeat that shared
machinery or scatter it; bulk reads, the one piece with logic of its own, already live in
``controller/zk_multi_read.py``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
    UnimplementedError,
)
from kazoo.protocol.states import ZnodeStat

from controller import zk_data as zd
from controller import zk_multi_read
from controller.zk_data import (
    BrokerRegistration,
    ControllerRegistration,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    ReplicaAssignment,
    TopicAssignment,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Watch = Callable[[Any], None]

__all__ = [
    "BrokerIdInUseError",
    "ControllerMovedError",
    "InvalidTopicError",
    "KafkaZkClient",
    "TopicExistsError",
    "UpdateResult",
]


class ControllerMovedError(Exception):
    """A controller write was fenced: another broker has been elected (``/controller_epoch`` moved)."""


class BrokerIdInUseError(Exception):
    """``/brokers/ids/<id>`` is held by another live ZooKeeper session."""


class TopicExistsError(Exception):
    """TOPIC_ALREADY_EXISTS semantics (also raised when the topic is marked for deletion)."""


class InvalidTopicError(Exception):
    """The topic name collides with an existing one ('.' and '_' are the same in metric names)."""


class UpdateResult:
    """Outcome of a batch of conditional partition-state writes (Kafka's UpdateLeaderAndIsrResult)."""

    def __init__(self) -> None:
        self.finished: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.failed: dict[TopicPartition, Exception] = {}
        self.to_retry: list[TopicPartition] = []  # BADVERSION: someone else (the leader) changed it

    def __repr__(self) -> str:
        return f"<UpdateResult finished={len(self.finished)} failed={len(self.failed)} retry={self.to_retry}>"


# Fenced partition-state writes per ZooKeeper multi: about 150 bytes each, far below jute.maxbuffer (1 MiB).
_OPS_PER_MULTI = 500

def _split_chroot(connect: str) -> tuple[str, str]:
    i = connect.find("/")
    if i < 0:
        return connect, ""
    chroot = connect[i:].rstrip("/")
    return connect[:i], chroot


class KafkaZkClient:
    """A ZooKeeper session plus Kafka's znode operations.

    ``connect`` is ``zookeeper.connect``: ``host:port[,host:port...][/chroot]``. The chroot is created
    if missing (like Kafka with ``createChrootIfNecessary``).
    """

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 *, create_chroot: bool = True, name: str = "kafkette") -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.create_chroot = create_chroot
        self.name = name
        self.hosts, self.chroot = _split_chroot(connect)
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0)
        self._connected = threading.Event()
        self._closed = False
        self._multi_read_supported = True
        self._lock = threading.Lock()
        self._session_id: int | None = None
        self._listeners: list[Callable[[str], None]] = []
        # Broker registration to restore after a session expiry (like KafkaServer's session handler).
        self._registration: BrokerRegistration | None = None
        self._reregister_callbacks: list[Callable[[int], None]] = []
        self._zk.add_listener(self._on_kazoo_state)

    # ------------------------------------------------------------------------------------------
    # Session

    def start(self, timeout: float | None = None) -> KafkaZkClient:
        if timeout is None:
            timeout = self.connection_timeout_ms / 1000.0
        if self.create_chroot and self.chroot:
            boot = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0)
            boot.start(timeout=timeout)
            try:
                boot.ensure_path(self.chroot)
            finally:
                boot.stop()
                boot.close()
        self._zk.start(timeout=timeout)
        self._session_id = self._zk.client_id[0] if self._zk.client_id else None
        self._connected.set()
        return self

    def close(self) -> None:
        self._closed = True
        self._connected.set()  # wake anyone waiting to retry
        try:
            self._zk.stop()
            self._zk.close()
        except Exception:  # pragma: no cover - best effort on shutdown
            log.debug("error closing ZooKeeper client", exc_info=True)

    @property
    def kazoo(self) -> KazooClient:
        return self._zk

    @property
    def session_id(self) -> int | None:
        cid = self._zk.client_id
        return cid[0] if cid else None

    @property
    def connected(self) -> bool:
        return self._zk.connected

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(state)`` on kazoo's thread, state one of 'suspended', 'expired', 'connected',
        'new_session' (connected again after the old session expired: ephemeral znodes are gone) and
        'closed' (``close()`` was called)."""
        self._listeners.append(fn)

    def remove_state_listener(self, fn: Callable[[str], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _fire(self, state: str) -> None:
        for fn in list(self._listeners):
            try:
                fn(state)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _on_kazoo_state(self, state: str) -> None:
        # Runs on kazoo's thread: must not call ZooKeeper itself.
        if state == KazooState.CONNECTED:
            self._connected.set()
            cid = self._zk.client_id
            new_id = cid[0] if cid else None
            if self._session_id is not None and new_id != self._session_id:
                self._session_id = new_id
                log.info("%s: new ZooKeeper session 0x%x", self.name, new_id or 0)
                self._fire("new_session")
                if self._registration is not None and not self._closed:
                    threading.Thread(target=self._reregister, name=f"{self.name}-zk-reregister",
                                     daemon=True).start()
            else:
                self._session_id = new_id
                self._fire("connected")
        elif state == KazooState.SUSPENDED:
            self._connected.clear()
            self._fire("suspended")
        elif state == KazooState.LOST:
            self._connected.clear()
            if not self._closed:
                log.warning("%s: ZooKeeper session expired", self.name)
                self._fire("expired")
            else:
                self._connected.set()
                self._fire("closed")

    def _reregister(self) -> None:
        reg = self._registration
        if reg is None:
            return
        for _ in range(50):
            try:
                epoch = self.register_broker(reg)
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError):
                time.sleep(0.2)
                continue
            except Exception:
                log.exception("re-registering broker %d after session expiry failed", reg.broker_id)
                return
            for cb in list(self._reregister_callbacks):
                try:
                    cb(epoch)
                except Exception:
                    log.exception("broker re-registration callback failed")
            return

    def on_broker_reregistered(self, fn: Callable[[int], None]) -> None:
        """``fn(new_broker_epoch)`` (kazoo-side thread) after the registration is restored in a new session."""
        self._reregister_callbacks.append(fn)

    def _retry(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; on connection loss wait for the session to come back and run it again."""
        while True:
            try:
                return fn()
            except (ConnectionLoss, OperationTimeoutError):
                if self._closed:
                    raise
                self._connected.wait(self.session_timeout_ms / 1000.0)
                if self._closed:
                    raise
                time.sleep(0.01)

    # ------------------------------------------------------------------------------------------
    # Generic znode access (used by watchers too)

    def exists(self, path: str, watch: Watch | None = None) -> ZnodeStat | None:
        return self._retry(lambda: self._zk.exists(path, watch=watch))

    def get_data(self, path: str, watch: Watch | None = None) -> tuple[bytes, ZnodeStat] | None:
        def op() -> tuple[bytes, ZnodeStat] | None:
            try:
                return self._zk.get(path, watch=watch)
            except NoNodeError:
                return None
        return self._retry(op)

    def get_children(self, path: str, watch: Watch | None = None) -> list[str] | None:
        def op() -> list[str] | None:
            try:
                return self._zk.get_children(path, watch=watch)
            except NoNodeError:
                return None
        return self._retry(op)

    def _get_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Many znodes' data (None where a znode is missing), in few round trips.

        Chunks of paths go as multiRead requests, all sent before the first answer is awaited (a
        failover reads 10,000 partition states this way in a handful of requests). A server without
        multiRead (before ZooKeeper 3.6) answers UNIMPLEMENTED: then one pipelined getData per path.
        """
        if len(paths) > 1 and self._multi_read_supported:
            try:
                return self._retry(lambda: self._multi_read(paths))
            except UnimplementedError:
                log.info("ZooKeeper has no multiRead: reading %d znodes one request each", len(paths))
                self._multi_read_supported = False
        return self._get_many_pipelined(paths)

    def _multi_read(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        chroot = self._zk.chroot or ""
        pending = [zk_multi_read.submit(self._zk, chunk)
                   for chunk in zk_multi_read.chunks([chroot + p for p in paths])]
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for a in pending:
            for r in a.get():
                if isinstance(r, NoNodeError):
                    out.append(None)
                elif isinstance(r, Exception):
                    raise r
                else:
                    out.append(r)
        if len(out) != len(paths):
            raise RuntimeError(f"multiRead answered {len(out)} results for {len(paths)} paths")
        return out

    def _get_many_pipelined(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Pipelined reads: all requests go out before the first answer is awaited."""
        def op() -> list[tuple[bytes, ZnodeStat] | None]:
            pending = [self._zk.get_async(p) for p in paths]
            out: list[tuple[bytes, ZnodeStat] | None] = []
            for a in pending:
                try:
                    out.append(a.get())
                except NoNodeError:
                    out.append(None)
            return out
        return self._retry(op)

    def make_sure_persistent_path_exists(self, path: str) -> None:
        self._retry(lambda: self._zk.ensure_path(path))

    def create_recursive(self, path: str, data: bytes = b"", *, throw_if_exists: bool = True) -> None:
        def op() -> None:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                if throw_if_exists:
                    raise
        self._retry(op)

    def delete_recursive(self, path: str, expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION) -> bool:
        children = self.get_children(path)
        if children is None:
            return False
        for child in children:
            self.delete_recursive(f"{path}/{child}", expected_controller_epoch_zk_version)
        try:
            self._checked_write(expected_controller_epoch_zk_version, "delete", path)
        except NoNodeError:
            pass
        except NotEmptyError:  # a child appeared meanwhile
            return self.delete_recursive(path, expected_controller_epoch_zk_version)
        return True

    def _checked_write(self, expected_controller_epoch_zk_version: int, kind: str, path: str,
                       data: bytes = b"", version: int = -1, ephemeral: bool = False) -> Any:
        """One write; when the version is >= 0, fenced by a check on /controller_epoch."""
        if expected_controller_epoch_zk_version == zd.MATCH_ANY_VERSION:
            def plain() -> Any:
                if kind == "create":
                    return self._zk.create(path, data, ephemeral=ephemeral)
                if kind == "set":
                    return self._zk.set(path, data, version=version)
                return self._zk.delete(path, version=version)
            return self._retry(plain)
        if expected_controller_epoch_zk_version < 0:
            raise ValueError(f"bad controller epoch zk version {expected_controller_epoch_zk_version}")

        def multi() -> Any:
            t = self._zk.transaction()
            t.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
            if kind == "create":
                t.create(path, data, ephemeral=ephemeral)
            elif kind == "set":
                t.set_data(path, data, version)
            else:
                t.delete(path, version)
            return t.commit()
        results = self._retry(multi)
        return self._unwrap_checked(results, expected_controller_epoch_zk_version)

    @staticmethod
    def _unwrap_checked(results: list[Any], expected: int) -> Any:
        check, result = results[0], results[1]
        if isinstance(check, BadVersionError | NoNodeError):
            raise ControllerMovedError(f"controller epoch zkVersion check failed, expected zkVersion {expected}")
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise check
        if isinstance(result, Exception):
            raise result
        return result

    def _checked_writes_async(self, expected: int, ops: list[tuple[str, str, bytes, int]]) -> list[Any]:
        """Many writes, pipelined. Each result is the op's result or the exception it raised.

        Fenced writes (``expected`` >= 0) go as multis of up to ``_OPS_PER_MULTI`` ops behind one check
        on /controller_epoch: a broker coming back with 10,000 partitions costs the controller 20,000
        partition-state writes, and one ZooKeeper transaction (and log sync) each took seconds. A
        multi is all or nothing, so when one of its ops fails (a partition state changed since it was
        read), nothing of it was written and its ops are sent again one multi each, for each op's own
        answer, as before."""
        def plain() -> list[Any]:
            pending = []
            for kind, path, data, version in ops:
                if kind == "create":
                    pending.append(self._zk.create_async(path, data))
                elif kind == "set":
                    pending.append(self._zk.set_async(path, data, version))
                else:
                    pending.append(self._zk.delete_async(path, version))
            return [self._result_of(a) for a in pending]

        def fenced() -> list[Any]:
            chunks = [ops[i:i + _OPS_PER_MULTI] for i in range(0, len(ops), _OPS_PER_MULTI)]
            pending = [(chunk, self._fenced_multi(expected, chunk).commit_async()) for chunk in chunks]
            out: list[Any] = []
            for chunk, a in pending:
                results = self._result_of(a)
                if isinstance(results, list) and len(results) == len(chunk) + 1:
                    check = results[0]
                    if isinstance(check, BadVersionError | NoNodeError):
                        raise ControllerMovedError(
                            f"controller epoch zkVersion check failed, expected zkVersion {expected}")
                    if not any(isinstance(r, Exception) for r in results):
                        out.extend(results[1:])
                        continue
                one_each = [self._fenced_multi(expected, [op]).commit_async() for op in chunk]
                for b in one_each:
                    r = self._result_of(b)
                    if not isinstance(r, Exception):
                        try:
                            r = self._unwrap_checked(r, expected)
                        except ControllerMovedError:
                            raise
                        except Exception as e:  # noqa: BLE001 - this op's own failure is its answer
                            r = e
                    out.append(r)
            return out

        return self._retry(plain if expected == zd.MATCH_ANY_VERSION else fenced)

    def _fenced_multi(self, expected: int, ops: list[tuple[str, str, bytes, int]]) -> Any:
        t = self._zk.transaction()
        t.check(zd.CONTROLLER_EPOCH_PATH, expected)
        for kind, path, data, version in ops:
            if kind == "create":
                t.create(path, data)
            elif kind == "set":
                t.set_data(path, data, version)
            else:
                t.delete(path, version)
        return t

    @staticmethod
    def _result_of(a: Any) -> Any:
        """An async call's result, or the exception it failed with (losing the connection raises, for
        the retry around the whole batch)."""
        try:
            return a.get()
        except (ConnectionLoss, OperationTimeoutError):
            raise
        except Exception as e:  # noqa: BLE001 - per-op failure
            return e

    # ------------------------------------------------------------------------------------------
    # Top level, cluster id, broker sequence ids

    def create_top_level_paths(self) -> None:
        for path in zd.PERSISTENT_PATHS:
            self.make_sure_persistent_path_exists(path)

    def get_cluster_id(self) -> str | None:
        got = self.get_data(zd.CLUSTER_ID_PATH)
        return zd.decode_cluster_id(got[0]) if got else None

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        proposed = proposed or zd.generate_cluster_id()
        try:
            self.create_recursive(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed))
            return proposed
        except NodeExistsError:
            cid = self.get_cluster_id()
            if cid is None:
                raise RuntimeError("/cluster/id was deleted while being read") from None
            return cid

    def generate_broker_sequence_id(self) -> int:
        def op() -> int:
            try:
                return self._zk.set(zd.BROKER_SEQUENCE_ID_PATH, b"").version
            except NoNodeError:
                self._zk.ensure_path(zd.BROKER_SEQUENCE_ID_PATH)
                return self._zk.set(zd.BROKER_SEQUENCE_ID_PATH, b"").version
        return self._retry(op)

    # ------------------------------------------------------------------------------------------
    # Brokers

    def register_broker(self, reg: BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch (the znode's czxid).

        Like Kafka's checked ephemeral create: the node is created empty then filled in one multi-op,
        and a node left by our own session counts as ours. Raises ``BrokerIdInUseError`` when another
        live session holds the id.
        """
        path = zd.broker_path(reg.broker_id)
        data = zd.encode_broker_registration(reg)
        self.make_sure_persistent_path_exists(zd.BROKER_IDS_PATH)

        def op() -> int:
            t = self._zk.transaction()
            t.create(path, b"", ephemeral=True)
            t.set_data(path, data, 0)
            results = t.commit()
            if not isinstance(results[0], Exception) and not isinstance(results[1], Exception):
                return results[1].czxid
            if isinstance(results[0], NodeExistsError):
                got = self.get_data(path)
                if got is None:
                    return op()
                stat = got[1]
                if stat.ephemeralOwner == self.session_id:
                    return stat.czxid
                raise BrokerIdInUseError(
                    f"broker id {reg.broker_id} is registered by another ZooKeeper session "
                    f"(0x{stat.ephemeralOwner:x}): is another broker running with broker.id={reg.broker_id}?")
            err = results[0] if isinstance(results[0], Exception) and not isinstance(
                results[0], RolledBackError) else results[1]
            raise err
        epoch = self._retry(op)
        self._registration = reg
        log.info("registered broker %d at %s with addresses %s, broker epoch %d", reg.broker_id, path,
                 ",".join(ep.connection_string for ep in reg.endpoints), epoch)
        return epoch

    def update_broker_info(self, reg: BrokerRegistration) -> None:
        self._checked_write(zd.MATCH_ANY_VERSION, "set", zd.broker_path(reg.broker_id),
                            zd.encode_broker_registration(reg))
        self._registration = reg

    def deregister_broker(self, broker_id: int) -> None:
        """Remove our registration (controlled shutdown's last step, before closing the session)."""
        self._registration = None
        try:
            self._checked_write(zd.MATCH_ANY_VERSION, "delete", zd.broker_path(broker_id))
        except NoNodeError:
            pass

    def get_sorted_broker_ids(self, watch: Watch | None = None) -> list[int]:
        children = self.get_children(zd.BROKER_IDS_PATH, watch) or []
        return sorted(int(c) for c in children if c.lstrip("-").isdigit())

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        got = self.get_data(zd.broker_path(broker_id))
        if got is None:
            return None
        return zd.decode_broker_registration(broker_id, got[0], got[1].czxid)

    def get_brokers(self, broker_ids: Iterable[int]) -> dict[int, BrokerRegistration]:
        ids = list(broker_ids)
        out: dict[int, BrokerRegistration] = {}
        for bid, got in zip(ids, self._get_many([zd.broker_path(b) for b in ids]), strict=True):
            if got is not None:
                out[bid] = zd.decode_broker_registration(bid, got[0], got[1].czxid)
        return out

    def get_all_brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]:
        """Every registered broker, with its epoch (czxid), by id."""
        return self.get_brokers(self.get_sorted_broker_ids(watch))

    # ------------------------------------------------------------------------------------------
    # Controller

    def get_controller(self, watch: Watch | None = None) -> ControllerRegistration | None:
        """The active controller; with ``watch``, also a watch on /controller (set even when absent)."""
        def op() -> ControllerRegistration | None:
            if watch is not None:
                stat = self._zk.exists(zd.CONTROLLER_PATH, watch=watch)
                if stat is None:
                    return None
            try:
                data, stat = self._zk.get(zd.CONTROLLER_PATH)
            except NoNodeError:
                return None
            return zd.decode_controller(data, stat.version)
        return self._retry(op)

    def get_controller_id(self) -> int | None:
        reg = self.get_controller()
        return reg.broker_id if reg else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zk version of /controller_epoch) or None."""
        got = self.get_data(zd.CONTROLLER_EPOCH_PATH)
        if got is None:
            return None
        return zd.decode_controller_epoch(got[0]), got[1].version

    def _maybe_create_controller_epoch(self) -> tuple[int, int]:
        try:
            self._retry(lambda: self._zk.create(zd.CONTROLLER_EPOCH_PATH,
                                                zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH)))
            return zd.INITIAL_CONTROLLER_EPOCH, zd.INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        except NodeExistsError:
            got = self.get_controller_epoch()
            if got is None:
                raise RuntimeError("/controller_epoch existed before but went away while being read") from None
            return got

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Become controller: one multi-op creates the ephemeral /controller and bumps /controller_epoch
        (conditional on the version just read). Returns (new epoch, its zk version); raises
        ``ControllerMovedError`` when another broker won."""
        cur = self.get_controller_epoch() or self._maybe_create_controller_epoch()
        cur_epoch, cur_version = cur
        new_epoch = cur_epoch + 1

        def op() -> list[Any]:
            t = self._zk.transaction()
            t.create(zd.CONTROLLER_PATH, zd.encode_controller(broker_id), ephemeral=True)
            t.set_data(zd.CONTROLLER_EPOCH_PATH, zd.encode_controller_epoch(new_epoch), cur_version)
            return t.commit()
        results = self._retry(op)
        if not any(isinstance(r, Exception) for r in results):
            return new_epoch, results[1].version
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if errors and isinstance(errors[0], NodeExistsError | BadVersionError):
            # Maybe a retried request of ours went through: check who holds /controller.
            holder = self.get_controller_id()
            if holder == broker_id:
                got = self.get_controller_epoch()
                if got is not None and got[0] == new_epoch:
                    return got
            raise ControllerMovedError(f"controller moved to broker {holder}")
        raise errors[0] if errors else RuntimeError(f"controller registration failed: {results}")

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        try:
            self._checked_write(expected_controller_epoch_zk_version, "delete", zd.CONTROLLER_PATH)
        except NoNodeError:
            pass

    # ------------------------------------------------------------------------------------------
    # Topics

    def get_all_topics(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zd.TOPICS_PATH, watch) or [])

    def topic_exists(self, topic: str) -> bool:
        return self.exists(zd.topic_path(topic)) is not None

    def get_topic_assignment(self, topic: str, watch: Watch | None = None) -> TopicAssignment | None:
        got = self.get_data(zd.topic_path(topic), watch)
        if got is None:
            return None
        return zd.decode_topic_assignment(topic, got[0], got[1].version)

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        names = list(topics)
        out: dict[str, TopicAssignment] = {}
        for t, got in zip(names, self._get_many([zd.topic_path(t) for t in names]), strict=True):
            if got is not None:
                out[t] = zd.decode_topic_assignment(t, got[0], got[1].version)
        return out

    def create_topic(self, topic: str, assignment: Mapping[int, Iterable[int]],
                     configs: Mapping[str, Any] | None = None, topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Create ``/config/topics/<t>`` and ``/brokers/topics/<t>``; the controller does the rest.

        Raises ``TopicExistsError`` when the topic exists (or is still being deleted) and
        ``InvalidTopicError`` when it collides with another topic ('.' vs '_').
        """
        if self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        if self.exists(zd.delete_topic_path(topic)) is not None:
            raise TopicExistsError(f"Topic '{topic}' is marked for deletion.")
        if "." in topic or "_" in topic:
            norm = topic.replace(".", "_")
            for other in self.get_all_topics():
                if other != topic and other.replace(".", "_") == norm:
                    raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {other}")
        topic_id = topic_id or zd.random_uuid()
        self.set_or_create_entity_config(zd.CONFIG_TYPE_TOPIC, topic, configs or {}, notify=False)
        try:
            self.create_recursive(zd.topic_path(topic), zd.encode_topic_assignment(topic_id, assignment))
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None
        return topic_id

    def set_topic_assignment(self, topic: str, topic_id: uuid.UUID | None,
                             assignment: Mapping[int, Iterable[int] | ReplicaAssignment],
                             expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION,
                             expected_version: int = zd.MATCH_ANY_VERSION) -> int:
        """Rewrite a topic's assignment (CreatePartitions, reassignment). Returns the new znode version.
        With ``expected_version`` the write is conditional (``BadVersionError`` if it moved)."""
        stat = self._checked_write(expected_controller_epoch_zk_version, "set", zd.topic_path(topic),
                                   zd.encode_topic_assignment(topic_id, assignment), expected_version)
        return stat.version

    def add_partitions(self, topic: str, new_assignment: Mapping[int, Iterable[int]]) -> TopicAssignment:
        """CreatePartitions: append partitions to a topic. ``new_assignment`` holds only the new ones.
        Raises ``NoNodeError`` when the topic is gone and ``ValueError`` on overlap."""
        while True:
            cur = self.get_topic_assignment(topic)
            if cur is None:
                raise NoNodeError(f"topic {topic} does not exist")
            overlap = set(cur.partitions) & {int(p) for p in new_assignment}
            if overlap:
                raise ValueError(f"partitions {sorted(overlap)} of {topic} already exist")
            merged: dict[int, Any] = dict(cur.partitions)
            merged.update(zd.as_replica_assignments(new_assignment))
            try:
                version = self.set_topic_assignment(topic, cur.topic_id, merged, expected_version=cur.zk_version)
            except BadVersionError:
                continue
            return TopicAssignment(topic, cur.topic_id, merged, version)

    def mark_topic_for_deletion(self, topic: str) -> None:
        self.create_recursive(zd.delete_topic_path(topic), b"", throw_if_exists=False)

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.exists(zd.delete_topic_path(topic)) is not None

    def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zd.DELETE_TOPICS_PATH, watch) or [])

    def remove_topic_deletions(self, topics: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        ops = [("delete", zd.delete_topic_path(t), b"", -1) for t in topics]
        for r in self._checked_writes_async(expected_controller_epoch_zk_version, ops):
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    def delete_topic_znodes(self, topic: str, expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION) -> None:
        """Last step of a topic deletion: assignment + partition states, config, deletion marker."""
        self.delete_recursive(zd.topic_path(topic), expected_controller_epoch_zk_version)
        self.delete_recursive(zd.config_entity_path(zd.CONFIG_TYPE_TOPIC, topic), expected_controller_epoch_zk_version)
        self.delete_recursive(zd.delete_topic_path(topic), expected_controller_epoch_zk_version)

    def get_partitions_for_topic(self, topic: str) -> list[int]:
        ta = self.get_topic_assignment(topic)
        return sorted(ta.partitions) if ta else []

    # ------------------------------------------------------------------------------------------
    # Partition states

    def get_partition_state(self, topic: str, partition: int) -> LeaderIsrAndControllerEpoch | None:
        got = self.get_data(zd.partition_state_path(topic, partition))
        if got is None:
            return None
        return zd.decode_partition_state(got[0], got[1].version)

    def get_partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        tps = list(partitions)
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp, got in zip(tps, self._get_many([zd.partition_state_path(*tp) for tp in tps]), strict=True):
            if got is not None:
                st = zd.decode_partition_state(got[0], got[1].version)
                if st is not None:
                    out[tp] = st
        return out

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION,
                                ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception]:
        """Create partition state znodes (and their parents). Per partition: the state as written
        (zk_version 0) or the exception (``NodeExistsError`` when someone got there first)."""
        e = expected_controller_epoch_zk_version
        topics = sorted({t for t, _ in states})
        parents = [("create", zd.topic_partitions_path(t), b"", -1) for t in topics]
        parents += [("create", zd.topic_partition_path(t, p), b"", -1) for t, p in states]
        for r in self._checked_writes_async(e, parents):
            if isinstance(r, Exception) and not isinstance(r, NodeExistsError):
                raise r
        tps = list(states)
        ops = [("create", zd.partition_state_path(*tp), zd.encode_partition_state(states[tp]), -1) for tp in tps]
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch | Exception] = {}
        for tp, r in zip(tps, self._checked_writes_async(e, ops), strict=True):
            out[tp] = r if isinstance(r, Exception) else states[tp].with_zk_version(0)
        return out

    def update_partition_states(self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
                                expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION) -> UpdateResult:
        """Conditional writes: each state's ``zk_version`` must still be the znode's version.
        Written states come back with their new version (the new partition epoch)."""
        tps = list(states)
        ops = [("set", zd.partition_state_path(*tp), zd.encode_partition_state(states[tp]), states[tp].zk_version)
               for tp in tps]
        res = UpdateResult()
        for tp, r in zip(tps, self._checked_writes_async(expected_controller_epoch_zk_version, ops), strict=True):
            if isinstance(r, BadVersionError):
                res.to_retry.append(tp)
            elif isinstance(r, Exception):
                res.failed[tp] = r
            else:
                res.finished[tp] = states[tp].with_zk_version(r.version)
        return res

    def set_partition_state(self, topic: str, partition: int, state: LeaderIsrAndControllerEpoch,
                            expected_controller_epoch_zk_version: int = zd.MATCH_ANY_VERSION,
                            ) -> LeaderIsrAndControllerEpoch:
        """One conditional write on ``state.zk_version``: ``BadVersionError`` means fenced."""
        stat = self._checked_write(expected_controller_epoch_zk_version, "set", zd.partition_state_path(topic, partition),
                                   zd.encode_partition_state(state), state.zk_version)
        return state.with_zk_version(stat.version)

    # ------------------------------------------------------------------------------------------
    # Configs

    def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        got = self.get_data(zd.config_entity_path(entity_type, entity_name))
        return zd.decode_config(got[0]) if got else {}

    def get_entity_configs(self, entity_type: str, names: Iterable[str]) -> dict[str, dict[str, str]]:
        ns = list(names)
        got = self._get_many([zd.config_entity_path(entity_type, n) for n in ns])
        return {n: (zd.decode_config(g[0]) if g else {}) for n, g in zip(ns, got, strict=True)}

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return self.get_entity_config(zd.CONFIG_TYPE_TOPIC, topic)

    def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return self.get_entity_configs(zd.CONFIG_TYPE_TOPIC, topics)

    def get_all_entities_with_config(self, entity_type: str) -> list[str]:
        return sorted(self.get_children(zd.config_entity_type_path(entity_type)) or [])

    def set_or_create_entity_config(self, entity_type: str, entity_name: str, config: Mapping[str, Any],
                                    *, notify: bool = True) -> None:
        """Write ``/config/<type>/<name>`` (last writer wins) and, with ``notify``, add a change
        notification ``/config/changes/config_change_N`` so every broker reloads it."""
        path = zd.config_entity_path(entity_type, entity_name)
        data = zd.encode_config(config)

        def op() -> None:
            try:
                self._zk.set(path, data)
            except NoNodeError:
                try:
                    self._zk.create(path, data, makepath=True)
                except NodeExistsError:
                    self._zk.set(path, data)
        self._retry(op)
        if notify:
            self.create_config_change_notification(f"{entity_type}/{entity_name}")

    def create_config_change_notification(self, entity_path: str) -> str:
        self.make_sure_persistent_path_exists(zd.CONFIG_CHANGES_PATH)
        return self._retry(lambda: self._zk.create(f"{zd.CONFIG_CHANGES_PATH}/{zd.CONFIG_CHANGE_PREFIX}",
                                                   zd.encode_config_change(entity_path), sequence=True))

    def get_config_change_notifications(self, watch: Watch | None = None) -> list[str]:
        """Sequence znode names under /config/changes, oldest first."""
        return sorted(self.get_children(zd.CONFIG_CHANGES_PATH, watch) or [])

    def read_config_change_notification(self, name: str) -> tuple[tuple[str, str] | None, ZnodeStat | None]:
        got = self.get_data(f"{zd.CONFIG_CHANGES_PATH}/{name}")
        if got is None:
            return None, None
        return zd.decode_config_change(got[0]), got[1]

    def delete_config_change_notifications(self, names: Iterable[str]) -> None:
        for r in self._checked_writes_async(zd.MATCH_ANY_VERSION,
                                            [("delete", f"{zd.CONFIG_CHANGES_PATH}/{n}", b"", -1) for n in names]):
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    # ------------------------------------------------------------------------------------------
    # Producer ids

    def allocate_producer_id_block(self, broker_id: int, block_size: int = zd.PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """Claim the next block of producer ids for ``broker_id`` (Kafka's ZkProducerIdManager):
        read /latest_producer_id_block, write the following block with a conditional update, retry
        on conflict. Blocks never overlap across the cluster."""
        self.make_sure_persistent_path_exists(zd.PRODUCER_ID_BLOCK_PATH)
        while True:
            got = self.get_data(zd.PRODUCER_ID_BLOCK_PATH)
            if got is None:
                self.make_sure_persistent_path_exists(zd.PRODUCER_ID_BLOCK_PATH)
                continue
            data, stat = got
            if data:
                cur = zd.decode_producer_id_block(data)
                if cur.last_producer_id > (1 << 63) - 1 - block_size:
                    raise RuntimeError("producer ids are exhausted")
                block = ProducerIdBlock(broker_id, cur.next_block_first_id, block_size)
            else:
                block = ProducerIdBlock(broker_id, 0, block_size)
            try:
                self._checked_write(zd.MATCH_ANY_VERSION, "set", zd.PRODUCER_ID_BLOCK_PATH,
                                    zd.encode_producer_id_block(block), stat.version)
            except BadVersionError:
                continue
            return block

    # ------------------------------------------------------------------------------------------
    # ISR change notifications (pre-AlterPartition brokers; kept for tools and completeness)

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        return self._retry(lambda: self._zk.create(
            f"{zd.ISR_CHANGE_NOTIFICATION_PATH}/{zd.ISR_CHANGE_PREFIX}", zd.encode_partition_set(partitions),
            sequence=True, makepath=True))

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zd.ISR_CHANGE_NOTIFICATION_PATH, watch) or [])

    def get_partitions_from_isr_changes(self, names: Iterable[str]) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for got in self._get_many([f"{zd.ISR_CHANGE_NOTIFICATION_PATH}/{n}" for n in names]):
            if got is not None:
                out |= zd.decode_partition_set(got[0])
        return out

    def delete_isr_change_notifications(self, names: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        self._delete_notifications(zd.ISR_CHANGE_NOTIFICATION_PATH, names, expected_controller_epoch_zk_version)

    def _delete_notifications(self, path: str, names: Iterable[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete notification znodes under ``path`` as the controller of that epoch (gone already is fine)."""
        ops = [("delete", f"{path}/{n}", b"", -1) for n in names]
        for r in self._checked_writes_async(expected_controller_epoch_zk_version, ops):
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r

    # ------------------------------------------------------------------------------------------
    # Log dir failure notifications (KIP-112): a broker whose log dir failed asks the controller to
    # find out, through LeaderAndIsr, which of its replicas are gone.

    def propagate_log_dir_event(self, broker_id: int) -> str:
        return self._retry(lambda: self._zk.create(
            f"{zd.LOG_DIR_EVENT_NOTIFICATION_PATH}/{zd.LOG_DIR_EVENT_PREFIX}", zd.encode_log_dir_event(broker_id),
            sequence=True, makepath=True))

    def get_log_dir_event_notifications(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.get_children(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, watch) or [])

    def get_brokers_from_log_dir_events(self, names: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for got in self._get_many([f"{zd.LOG_DIR_EVENT_NOTIFICATION_PATH}/{n}" for n in names]):
            if got is not None:
                broker = zd.decode_log_dir_event(got[0])
                if broker is not None:
                    out.add(broker)
        return out

    def delete_log_dir_event_notifications(self, names: Iterable[str], expected_controller_epoch_zk_version: int
                                           ) -> None:
        self._delete_notifications(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, names, expected_controller_epoch_zk_version)

    # ------------------------------------------------------------------------------------------
    # Reassignment and preferred replica election znodes

    def get_partition_reassignment(self, watch: Watch | None = None) -> dict[TopicPartition, list[int]]:
        def op() -> Any:
            if watch is not None:
                if self._zk.exists(zd.REASSIGN_PARTITIONS_PATH, watch=watch) is None:
                    return None
            try:
                return self._zk.get(zd.REASSIGN_PARTITIONS_PATH)
            except NoNodeError:
                return None
        got = self._retry(op)
        if not got:
            return {}
        try:
            return zd.decode_reassignment(got[0])
        except (zd.ZkDataError, KeyError, TypeError, ValueError):
            log.warning("ignoring partition reassignment with invalid json: %r", got[0])
            return {}

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Iterable[int]]) -> None:
        self.create_recursive(zd.REASSIGN_PARTITIONS_PATH, zd.encode_reassignment(reassignment))

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        try:
            self._checked_write(expected_controller_epoch_zk_version, "delete", zd.REASSIGN_PARTITIONS_PATH)
        except NoNodeError:
            pass

    def get_preferred_replica_election(self, watch: Watch | None = None) -> set[TopicPartition]:
        def op() -> Any:
            if watch is not None and self._zk.exists(zd.PREFERRED_REPLICA_ELECTION_PATH, watch=watch) is None:
                return None
            try:
                return self._zk.get(zd.PREFERRED_REPLICA_ELECTION_PATH)
            except NoNodeError:
                return None
        got = self._retry(op)
        return zd.decode_partition_set(got[0]) if got else set()

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        self.create_recursive(zd.PREFERRED_REPLICA_ELECTION_PATH, zd.encode_partition_set(partitions))

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        try:
            self._checked_write(expected_controller_epoch_zk_version, "delete", zd.PREFERRED_REPLICA_ELECTION_PATH)
        except NoNodeError:
            pass
