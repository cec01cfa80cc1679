"""The ACL matrix: for each API a client uses, what a principal without ACLs gets, and what granting
exactly the operation Kafka documents for it changes.

Until SASL listeners are used here, every connection is ``User:ANONYMOUS`` (PLAINTEXT), so the
subject and the administrator are told apart by their address, which Kafka's ACLs match too: the
administrator (and the broker talking to itself) connects from 127.0.0.1 and holds ``All`` on every
resource type from that host; the subject connects from 127.0.0.2 and holds only what a case grants
it from there. ACLs are written straight into ZooKeeper in Kafka's layout (as ``kafka-acls.sh
--authorizer-properties zookeeper.connect=...`` does), before the brokers start for the
administrator's, and with a change notification for each grant, so the same steps run against a
kafkette broker and an Apache Kafka broker.

After each grant the matrix waits for a barrier: a fresh topic name the subject was granted DESCRIBE
on, written after the grant, until Metadata stops refusing it (notifications are applied in order).

The brokers run with ``auto.create.topics.enable=true`` so that Metadata's automatic creation (CREATE
on the cluster or on the topic) is covered; every other Metadata request here says
``allow_auto_topic_creation=false``, or names topics that exist.

``run_matrix`` returns every observation by label, so two brokers' answers can be compared whole.

Where the two brokers cannot be asked the same bytes:

* DescribeTopicPartitions: a ZooKeeper-mode Kafka 3.9 broker does not offer it (its schema is for
  KRaft brokers; Kafka closes the connection of a client that sends it), so it is checked on kafkette
  only, against KRaft's DescribeTopicPartitionsRequestHandler.
* UpdateMetadata v8: kafkette's schema (protocol/schemas/UpdateMetadataRequest.json) has ``Type`` as an
  ordinary int8 field after ``IsKRaftController``; Kafka's has it as tagged field 0. Kafka therefore
  reads kafkette's encoding one byte off and closes the connection ("non-nullable field topicStates was
  serialized as null"). The matrix sends each broker the same field values in its own v8 layout:
  kafkette's codec for kafkette, ``kafka_update_metadata_v8`` for Kafka.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from protocol.api_versions import ApiKey
from protocol.client_connection import ClientConnection, Response
from protocol.messages import decode_response, request_type
from protocol.records import NewRecord, build_batch

PRINCIPAL = "User:ANONYMOUS"
ADMIN_HOST, SUBJECT_HOST = "127.0.0.1", "127.0.0.2"
SUPER_USERS = "User:admin"  # nobody here: the same value for both brokers
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
BROKER_OVERRIDES = {"authorizer.class.name": AUTHORIZER, "super.users": SUPER_USERS,
                    "auto.create.topics.enable": "true", "offsets.topic.num.partitions": "3",
                    "transaction.state.log.num.partitions": "3"}

NONE, TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 0, 29, 30, 31, 53
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, INVALID_REQUEST = 3, 5, 42
STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID = 77, 100
NO_SUCH_TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-00000000abcd")
RETRIABLE = frozenset({14, 15, 16, 51})  # coordinator loading / not available / not coordinator, concurrent txns

# Kafka's znode names for resource types and operations.
_TYPES = {"topic": "Topic", "group": "Group", "cluster": "Cluster", "txn": "TransactionalId"}
_OPS = {"read": "Read", "write": "Write", "create": "Create", "delete": "Delete", "alter": "Alter",
        "describe": "Describe", "cluster_action": "ClusterAction", "describe_configs": "DescribeConfigs",
        "alter_configs": "AlterConfigs", "idempotent_write": "IdempotentWrite", "all": "All"}
_CHANGE_TYPES = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER", "txn": "TRANSACTIONAL_ID"}


class AclZk:
    """Kafka's ACL znodes (``/kafka-acl/<Type>/<name>`` and ``/kafka-acl-changes``) under a chroot."""

    def __init__(self, connect: str) -> None:
        self.zk = KazooClient(hosts=connect, timeout=20)
        self.zk.start(timeout=20)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _entries(self, rtype: str, name: str) -> tuple[list[dict[str, str]], int]:
        try:
            data, stat = self.zk.get(f"/kafka-acl/{_TYPES[rtype]}/{name}")
        except NoNodeError:
            return [], -1
        return (json.loads(data)["acls"] if data else []), stat.version

    def update(self, rtype: str, name: str, change: Callable[[list[dict[str, str]]], list[dict[str, str]]],
               notify: bool = True) -> None:
        path = f"/kafka-acl/{_TYPES[rtype]}/{name}"
        acls, version = self._entries(rtype, name)
        data = json.dumps({"version": 1, "acls": change(acls)}).encode()
        if version < 0:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)
        else:
            self.zk.set(path, data, version=version)
        if notify:
            self.zk.create("/kafka-acl-changes/acl_changes_", f"{_CHANGE_TYPES[rtype]}:{name}".encode(),
                           sequence=True, makepath=True)

    def allow(self, rtype: str, name: str, op: str, host: str, notify: bool = True) -> None:
        entry = {"principal": PRINCIPAL, "permissionType": "Allow", "operation": _OPS[op], "host": host}
        self.update(rtype, name, lambda acls: [*acls, entry] if entry not in acls else acls, notify)

    def revoke_host(self, rtype: str, name: str, host: str) -> None:
        self.update(rtype, name, lambda acls: [a for a in acls if a["host"] != host])


def admin_acls(zk: AclZk) -> None:
    """The administrator's (and the broker's own) rights, written before the broker starts."""
    for rtype, name in (("cluster", "kafka-cluster"), ("topic", "*"), ("group", "*"), ("txn", "*")):
        zk.allow(rtype, name, "all", ADMIN_HOST, notify=False)


class WireConnection:
    """A blocking connection from ``source_host`` (an address of the loopback network) through the
    project's sans-I/O client state machine; one request at a time."""

    def __init__(self, bootstrap: str, source_host: str, client_id: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sm = ClientConnection(client_id, max_in_flight=1)
        self.sock = socket.create_connection((host, int(port)), timeout=30, source_address=(source_host, 0))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.responses: deque[Response] = deque()
        self.sm.start()
        self._flush()
        while not self.sm.is_ready:
            self._pump()

    def _flush(self) -> None:
        data = self.sm.data_to_send()
        if data:
            self.sock.sendall(data)

    def _pump(self) -> None:
        n = self.sock.recv_into(self.sm.get_buffer())
        if n == 0:
            raise ConnectionError("connection closed by the broker")
        events = self.sm.buffer_updated(n)
        self._flush()
        self.responses.extend(e for e in events if isinstance(e, Response))

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.sm.send(api_key, body, version=version)
        self._flush()
        while not self.responses:
            self._pump()
        return self.responses.popleft().body

    def close(self) -> None:
        self.sock.close()


def connect(bootstrap: str, source_host: str, client_id: str = "acl-matrix") -> WireConnection:
    return WireConnection(bootstrap, source_host, client_id)


def kafka_update_metadata_v8(controller_id: int, controller_epoch: int, broker_epoch: int) -> bytes:
    """An UpdateMetadata v8 body without topics or brokers, laid out by Kafka's schema: ``Type`` is
    tagged field 0 there (left out at its default), not a field of its own as in kafkette's schema."""
    return (struct.pack(">i?iq", controller_id, False, controller_epoch, broker_epoch)
            + b"\x01"  # TopicStates: empty compact array
            + b"\x01"  # LiveBrokers: empty compact array
            + b"\x00")  # no tagged fields


def raw_call(bootstrap: str, source_host: str, api_key: int, version: int, body: bytes) -> Any:
    """One flexible-version request whose body is given as bytes, on a connection of its own (the
    client state machine encodes bodies with kafkette's schemas only); the response decoded."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    client_id = b"acl-matrix"
    header = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id + b"\x00"
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=30, source_address=(source_host, 0)) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        _corr, response = decode_response(api_key, version, _recv_exactly(sock, size))
    return response


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        got = sock.recv(n - len(chunks))
        if not got:
            raise ConnectionError("connection closed by the broker")
        chunks += got
    return bytes(chunks)


def req(api_key: int, **fields: Any) -> Any:
    return request_type(api_key)(**fields)


def sub(api_key: int, struct: str, /, **fields: Any) -> Any:
    return getattr(request_type(api_key), struct)(**fields)


def call(conn: WireConnection, api_key: int, version: int, **fields: Any) -> Any:
    return conn.request(api_key, version, req(api_key, **fields))


class Matrix:
    """Runs the cases against one broker; ``observed`` maps each label to what the broker answered.
    ``apache_kafka`` says the broker is Apache Kafka (for the one request encoded differently)."""

    def __init__(self, bootstrap: str, zk: AclZk, apache_kafka: bool = False) -> None:
        self.bootstrap = bootstrap
        self.zk = zk
        self.apache_kafka = apache_kafka
        self.admin = connect(bootstrap, ADMIN_HOST, "acl-admin")
        self.subject = connect(bootstrap, SUBJECT_HOST)
        self.observed: dict[str, Any] = {}
        self._barriers = 0

    def close(self) -> None:
        self.admin.close()
        self.subject.close()

    # -- ACLs -------------------------------------------------------------------------------------

    def grant(self, rtype: str, name: str, op: str) -> None:
        self.zk.allow(rtype, name, op, SUBJECT_HOST)
        self.barrier()

    def revoke_cluster(self) -> None:
        self.zk.revoke_host("cluster", "kafka-cluster", SUBJECT_HOST)
        self.barrier()

    def barrier(self, timeout: float = 30.0) -> None:
        """Wait until the broker has applied every ACL change written so far."""
        self._barriers += 1
        name = f"acl-barrier-{self._barriers}"
        self.zk.allow("topic", name, "describe", SUBJECT_HOST)
        deadline = time.monotonic() + timeout
        while True:
            code = self.metadata_code(self.subject, name)
            if code == UNKNOWN_TOPIC_OR_PARTITION:
                return
            assert time.monotonic() < deadline, f"ACL change not applied within {timeout}s (still {code})"
            time.sleep(0.05)

    # -- observations -----------------------------------------------------------------------------

    def see(self, label: str, value: Any, expected: Any = None) -> Any:
        self.observed[label] = value
        if expected is not None:
            assert value == expected, f"{label}: {value!r}, expected {expected!r}"
        return value

    # -- requests the cases share -----------------------------------------------------------------

    def metadata_code(self, conn: WireConnection, topic: str, auto_create: bool = False) -> int:
        r = call(conn, ApiKey.METADATA, 12, topics=[sub(ApiKey.METADATA, "MetadataRequestTopic", name=topic)],
                 allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False)
        return int(r.topics[0].error_code)

    def topic_id(self, topic: str) -> uuid.UUID:
        r = call(self.admin, ApiKey.METADATA, 12, topics=[sub(ApiKey.METADATA, "MetadataRequestTopic", name=topic)],
                 allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        assert r.topics[0].error_code == 0, r
        return r.topics[0].topic_id  # type: ignore[no-any-return]

    def create_topic(self, name: str, partitions: int = 1) -> None:
        r = call(self.admin, ApiKey.CREATE_TOPICS, 7, timeout_ms=30000, validate_only=False, topics=[
            sub(ApiKey.CREATE_TOPICS, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=1,
                assignments=[], configs=[])])
        assert r.topics[0].error_code == 0, r
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = call(self.admin, ApiKey.METADATA, 12, topics=[sub(ApiKey.METADATA, "MetadataRequestTopic", name=name)],
                     allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            t = m.topics[0]
            if t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions):
                return
            time.sleep(0.05)
        raise AssertionError(f"topic {name} has no leader")

    def produce(self, conn: WireConnection, topic: str, transactional_id: str | None = None, pid: int = -1,
                epoch: int = -1) -> int:
        batch = build_batch([NewRecord(b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0 if pid >= 0 else -1, is_transactional=transactional_id is not None)
        r = call(conn, ApiKey.PRODUCE, 9, transactional_id=transactional_id, acks=1, timeout_ms=10000, topic_data=[
            sub(ApiKey.PRODUCE, "TopicProduceData", name=topic, partition_data=[
                sub(ApiKey.PRODUCE, "PartitionProduceData", index=0, records=memoryview(bytearray(batch)))])])
        return int(r.responses[0].partition_responses[0].error_code)

    def find_coordinator(self, conn: WireConnection, key: str, key_type: int) -> int:
        r = call(conn, ApiKey.FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=[key])
        return int(r.coordinators[0].error_code)

    def wait_coordinator(self, key: str, key_type: int) -> None:
        deadline = time.monotonic() + 60
        while self.find_coordinator(self.admin, key, key_type) != 0:
            assert time.monotonic() < deadline, f"no coordinator for {key}"
            time.sleep(0.1)

    def commit(self, conn: WireConnection, group: str, topic: str) -> tuple[int, ...]:
        r = call(conn, ApiKey.OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=[sub(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic", name=topic,
                     partitions=[sub(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=0,
                                     committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])
        return tuple(int(p.error_code) for t in r.topics for p in t.partitions)

    def init_producer_id(self, conn: WireConnection, transactional_id: str | None) -> tuple[int, int, int]:
        deadline = time.monotonic() + 60
        while True:
            r = call(conn, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=transactional_id,
                     transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
            # A coordinator still loading (or not there yet) is no answer about authorization.
            if r.error_code not in RETRIABLE or time.monotonic() > deadline:
                return int(r.error_code), int(r.producer_id), int(r.producer_epoch)
            time.sleep(0.1)


# ================================================================================================
# The cases. Each creates what it needs as the administrator, asks as the subject without ACLs, then
# grants what Kafka documents and asks again. Cluster-wide grants are revoked at the end of their case.

Case = Callable[[Matrix], None]


def case_idempotent_producer(m: Matrix) -> None:
    # Before any topic WRITE grant: InitProducerId without a transactional id also passes with WRITE
    # on any topic (KIP-679), which later cases grant.
    m.see("InitProducerId idempotent, no ACL", m.init_producer_id(m.subject, None)[0], CLUSTER_DENIED)
    m.grant("cluster", "kafka-cluster", "idempotent_write")
    m.see("InitProducerId idempotent, IDEMPOTENT_WRITE", m.init_producer_id(m.subject, None)[0], NONE)
    m.revoke_cluster()
    m.grant("topic", "idem-any", "write")
    m.see("InitProducerId idempotent, WRITE on a topic", m.init_producer_id(m.subject, None)[0], NONE)


def case_metadata(m: Matrix) -> None:
    m.create_topic("md")
    m.see("Metadata named, no ACL", m.metadata_code(m.subject, "md"), TOPIC_DENIED)
    all_topics = call(m.subject, ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                      include_topic_authorized_operations=False)
    m.see("Metadata all topics, no ACL, lists md", "md" in {t.name for t in all_topics.topics}, False)
    m.grant("topic", "md", "describe")
    m.see("Metadata named, DESCRIBE", m.metadata_code(m.subject, "md"), NONE)
    r = call(m.subject, ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
             include_topic_authorized_operations=True)
    listed = {t.name: t.topic_authorized_operations for t in r.topics}
    m.see("Metadata all topics, DESCRIBE, md's operations", listed.get("md"), 1 << 8)


def metadata_v0(conn: WireConnection, topics: list[str]) -> dict[str, int]:
    """Metadata v0, the oldest version advertised: an empty list means every topic, and a missing
    topic is always created automatically (when the broker allows it)."""
    r = call(conn, ApiKey.METADATA, 0, topics=[sub(ApiKey.METADATA, "MetadataRequestTopic", name=t) for t in topics])
    return {t.name: int(t.error_code) for t in r.topics}


def case_metadata_by_id_and_v0(m: Matrix) -> None:
    m.create_topic("old")
    tid = m.topic_id("old")

    def by_id(topic_id: uuid.UUID) -> tuple[int, str | None, bool]:
        r = call(m.subject, ApiKey.METADATA, 12, topics=[
            sub(ApiKey.METADATA, "MetadataRequestTopic", name=None, topic_id=topic_id)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        t = r.topics[0]
        return int(t.error_code), t.name, t.topic_id == topic_id

    m.see("Metadata v0 named, no ACL", metadata_v0(m.subject, ["old"]), {"old": TOPIC_DENIED})
    m.see("Metadata v0 all topics, no ACL, lists old", "old" in metadata_v0(m.subject, []), False)
    # The id is no secret, the name is.
    m.see("Metadata by id, no ACL", by_id(tid), (TOPIC_DENIED, None, True))
    m.see("Metadata by unknown id", by_id(NO_SUCH_TOPIC_ID), (UNKNOWN_TOPIC_ID, None, True))
    m.grant("topic", "old", "describe")
    m.see("Metadata v0 named, DESCRIBE", metadata_v0(m.subject, ["old"]), {"old": NONE})
    m.see("Metadata v0 all topics, DESCRIBE, lists old", "old" in metadata_v0(m.subject, []), True)
    m.see("Metadata by id, DESCRIBE", by_id(tid), (NONE, "old", True))


def case_metadata_auto_create(m: Matrix) -> None:
    """With auto.create.topics.enable, Metadata creates a missing topic the caller may DESCRIBE when it
    also may CREATE it, on the cluster or on the topic; otherwise TOPIC_AUTHORIZATION_FAILED."""
    m.see("Metadata auto-create, no ACL", m.metadata_code(m.subject, "auto1", auto_create=True), TOPIC_DENIED)
    m.grant("topic", "auto1", "describe")
    m.see("Metadata auto-create, DESCRIBE only", m.metadata_code(m.subject, "auto1", auto_create=True),
          TOPIC_DENIED)
    m.see("Metadata no auto-create, DESCRIBE", m.metadata_code(m.subject, "auto1"), UNKNOWN_TOPIC_OR_PARTITION)
    m.grant("topic", "auto1", "create")
    m.see("Metadata auto-create, CREATE on the topic", m.metadata_code(m.subject, "auto1", auto_create=True),
          LEADER_NOT_AVAILABLE)
    m.grant("topic", "auto2", "describe")
    m.grant("cluster", "kafka-cluster", "create")
    m.see("Metadata auto-create, CREATE on the cluster", m.metadata_code(m.subject, "auto2", auto_create=True),
          LEADER_NOT_AVAILABLE)
    m.revoke_cluster()
    # Below v4 every named topic is created when missing.
    m.grant("topic", "auto3", "describe")
    m.see("Metadata v0 auto-create, DESCRIBE only", metadata_v0(m.subject, ["auto3"]), {"auto3": TOPIC_DENIED})
    m.grant("topic", "auto3", "create")
    m.see("Metadata v0 auto-create, CREATE on the topic", metadata_v0(m.subject, ["auto3"]),
          {"auto3": LEADER_NOT_AVAILABLE})


def case_describe_topic_partitions(m: Matrix) -> None:
    """DescribeTopicPartitions (the Java admin's describeTopics), as KRaft's handler answers it: named
    topics without DESCRIBE are TOPIC_AUTHORIZATION_FAILED with no id, and left out of a listing."""
    m.create_topic("dtp")

    def describe(topics: list[str]) -> dict[str, tuple[int, bool, int, int]]:
        r = call(m.subject, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, response_partition_limit=2000, cursor=None,
                 topics=[sub(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "TopicRequest", name=t) for t in topics])
        return {t.name: (int(t.error_code), t.topic_id.int != 0, len(t.partitions), int(t.topic_authorized_operations))
                for t in r.topics}

    m.see("DescribeTopicPartitions named, no ACL", describe(["dtp"]), {"dtp": (TOPIC_DENIED, False, 0, -2147483648)})
    m.see("DescribeTopicPartitions all, no ACL, lists dtp", "dtp" in describe([]), False)
    m.grant("topic", "dtp", "describe")
    m.see("DescribeTopicPartitions named, DESCRIBE", describe(["dtp"]), {"dtp": (NONE, True, 1, 1 << 8)})
    m.see("DescribeTopicPartitions all, DESCRIBE, lists dtp", "dtp" in describe([]), True)


def case_produce_fetch(m: Matrix) -> None:
    m.create_topic("data")
    m.produce(m.admin, "data")
    m.see("Produce, no ACL", m.produce(m.subject, "data"), TOPIC_DENIED)

    def fetch(replica_id: int = -1) -> int:
        r = call(m.subject, ApiKey.FETCH, 12, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, topics=[
                     sub(ApiKey.FETCH, "FetchTopic", topic="data", partitions=[
                         sub(ApiKey.FETCH, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                             last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id="")
        return int(r.responses[0].partitions[0].error_code)

    data_id = m.topic_id("data")

    def fetch_by_id(topic_id: uuid.UUID) -> tuple[int, bool]:
        """Fetch v13, the first version that names topics by id."""
        r = call(m.subject, ApiKey.FETCH, 13, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, topics=[
                     sub(ApiKey.FETCH, "FetchTopic", topic_id=topic_id, partitions=[
                         sub(ApiKey.FETCH, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                             last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id="")
        t = r.responses[0]
        return int(t.partitions[0].error_code), t.topic_id == topic_id

    m.see("Fetch, no ACL", fetch(), TOPIC_DENIED)
    m.see("Fetch as a follower, no ACL", fetch(replica_id=7), TOPIC_DENIED)
    m.see("Fetch by id, no ACL", fetch_by_id(data_id), (TOPIC_DENIED, True))
    m.see("Fetch by unknown id", fetch_by_id(NO_SUCH_TOPIC_ID), (UNKNOWN_TOPIC_ID, True))

    def list_offsets(version: int = 7) -> int:
        """v7, and v1: the oldest version advertised."""
        r = call(m.subject, ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=0, topics=[
            sub(ApiKey.LIST_OFFSETS, "ListOffsetsTopic", name="data", partitions=[
                sub(ApiKey.LIST_OFFSETS, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1,
                    timestamp=-1)])])
        return int(r.topics[0].partitions[0].error_code)

    def epochs() -> int:
        r = call(m.subject, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[
            sub(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic", topic="data", partitions=[
                sub(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderPartition", partition=0,
                    current_leader_epoch=-1, leader_epoch=0)])])
        return int(r.topics[0].partitions[0].error_code)

    m.see("ListOffsets, no ACL", list_offsets(), TOPIC_DENIED)
    m.see("ListOffsets v1, no ACL", list_offsets(1), TOPIC_DENIED)
    m.see("OffsetForLeaderEpoch, no ACL", epochs(), TOPIC_DENIED)
    m.grant("topic", "data", "describe")
    m.see("ListOffsets, DESCRIBE", list_offsets(), NONE)
    m.see("ListOffsets v1, DESCRIBE", list_offsets(1), NONE)
    m.see("OffsetForLeaderEpoch, DESCRIBE", epochs(), NONE)
    m.see("Produce, DESCRIBE only", m.produce(m.subject, "data"), TOPIC_DENIED)
    m.see("Fetch, DESCRIBE only", fetch(), TOPIC_DENIED)
    m.grant("topic", "data", "write")
    m.see("Produce, WRITE", m.produce(m.subject, "data"), NONE)
    m.see("Fetch, WRITE (no READ)", fetch(), TOPIC_DENIED)
    m.see("Fetch by id, WRITE (no READ)", fetch_by_id(data_id), (TOPIC_DENIED, True))
    m.grant("topic", "data", "read")
    m.see("Fetch, READ", fetch(), NONE)
    m.see("Fetch by id, READ", fetch_by_id(data_id), (NONE, True))

    def delete_records() -> int:
        r = call(m.subject, ApiKey.DELETE_RECORDS, 2, timeout_ms=10000, topics=[
            sub(ApiKey.DELETE_RECORDS, "DeleteRecordsTopic", name="data", partitions=[
                sub(ApiKey.DELETE_RECORDS, "DeleteRecordsPartition", partition_index=0, offset=1)])])
        return int(r.topics[0].partitions[0].error_code)

    m.see("DeleteRecords, no DELETE", delete_records(), TOPIC_DENIED)
    m.grant("topic", "data", "delete")
    m.see("DeleteRecords, DELETE", delete_records(), NONE)

    m.grant("cluster", "kafka-cluster", "cluster_action")
    m.see("Fetch as a follower, CLUSTER_ACTION", fetch(replica_id=7) != TOPIC_DENIED, True)
    m.revoke_cluster()


def case_topic_admin(m: Matrix) -> None:
    def create(name: str) -> tuple[int, int, int]:
        r = call(m.subject, ApiKey.CREATE_TOPICS, 7, timeout_ms=30000, validate_only=False, topics=[
            sub(ApiKey.CREATE_TOPICS, "CreatableTopic", name=name, num_partitions=1, replication_factor=1,
                assignments=[], configs=[])])
        t = r.topics[0]
        return int(t.error_code), int(t.topic_config_error_code), int(t.num_partitions)

    m.see("CreateTopics, no ACL", create("made")[0], TOPIC_DENIED)
    m.grant("topic", "made", "create")
    m.see("CreateTopics, CREATE on the topic (no DESCRIBE_CONFIGS)", create("made"), (NONE, TOPIC_DENIED, -1))
    m.grant("topic", "made2", "create")
    m.grant("topic", "made2", "describe_configs")
    m.see("CreateTopics, CREATE and DESCRIBE_CONFIGS", create("made2"), (NONE, NONE, 1))

    def create_partitions() -> int:
        r = call(m.subject, ApiKey.CREATE_PARTITIONS, 3, timeout_ms=30000, validate_only=True, topics=[
            sub(ApiKey.CREATE_PARTITIONS, "CreatePartitionsTopic", name="made", count=2, assignments=None)])
        return int(r.results[0].error_code)

    def create_partitions_twice() -> dict[str, tuple[int, str | None]]:
        """"made" named twice, and a topic the caller may not ALTER: one answer per name."""
        r = call(m.subject, ApiKey.CREATE_PARTITIONS, 3, timeout_ms=30000, validate_only=True, topics=[
            sub(ApiKey.CREATE_PARTITIONS, "CreatePartitionsTopic", name=name, count=2, assignments=None)
            for name in ("made", "made", "unaltered")])
        answers = {res.name: (int(res.error_code), res.error_message) for res in r.results}
        assert len(answers) == len(r.results), r
        return answers

    duplicate = (INVALID_REQUEST, "Duplicate topic in request.")
    denied = (TOPIC_DENIED, "The topic authorization is failed.")
    m.see("CreatePartitions, no ALTER", create_partitions(), TOPIC_DENIED)
    m.see("CreatePartitions, topic named twice, no ALTER", create_partitions_twice(),
          {"made": duplicate, "unaltered": denied})
    m.grant("topic", "made", "alter")
    m.see("CreatePartitions, ALTER", create_partitions(), NONE)
    m.see("CreatePartitions, topic named twice, ALTER", create_partitions_twice(),
          {"made": duplicate, "unaltered": denied})

    def describe_configs(rtype: int, name: str) -> int:
        r = call(m.subject, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                 resources=[sub(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigsResource", resource_type=rtype,
                                resource_name=name, configuration_keys=["cleanup.policy", "log.retention.ms"])])
        return int(r.results[0].error_code)

    def alter_configs(rtype: int, name: str, key: str, value: str) -> tuple[int, int]:
        a = call(m.subject, ApiKey.ALTER_CONFIGS, 2, validate_only=True, resources=[
            sub(ApiKey.ALTER_CONFIGS, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=[
                sub(ApiKey.ALTER_CONFIGS, "AlterableConfig", name=key, value=value)])])
        i = call(m.subject, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=True, resources=[
            sub(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigsResource", resource_type=rtype, resource_name=name,
                configs=[sub(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterableConfig", name=key, config_operation=0,
                             value=value)])])
        return int(a.responses[0].error_code), int(i.responses[0].error_code)

    m.see("DescribeConfigs topic, no ACL", describe_configs(2, "made"), TOPIC_DENIED)
    m.see("DescribeConfigs broker, no ACL", describe_configs(4, "0"), CLUSTER_DENIED)
    m.see("AlterConfigs topic, no ACL", alter_configs(2, "made", "retention.ms", "1000"),
          (TOPIC_DENIED, TOPIC_DENIED))
    m.see("AlterConfigs broker, no ACL", alter_configs(4, "0", "log.cleaner.threads", "2"),
          (CLUSTER_DENIED, CLUSTER_DENIED))
    m.grant("topic", "made", "describe_configs")
    m.see("DescribeConfigs topic, DESCRIBE_CONFIGS", describe_configs(2, "made"), NONE)
    m.grant("topic", "made", "alter_configs")
    m.see("AlterConfigs topic, ALTER_CONFIGS", alter_configs(2, "made", "retention.ms", "1000"), (NONE, NONE))
    m.grant("cluster", "kafka-cluster", "describe_configs")
    m.see("DescribeConfigs broker, DESCRIBE_CONFIGS on the cluster", describe_configs(4, "0"), NONE)
    m.revoke_cluster()
    m.grant("cluster", "kafka-cluster", "alter_configs")
    m.see("AlterConfigs broker, ALTER_CONFIGS on the cluster", alter_configs(4, "0", "log.cleaner.threads", "2"),
          (NONE, NONE))
    m.revoke_cluster()

    def delete_topic(name: str) -> int:
        r = call(m.subject, ApiKey.DELETE_TOPICS, 6, timeout_ms=30000, topics=[
            sub(ApiKey.DELETE_TOPICS, "DeleteTopicState", name=name)])
        return int(r.responses[0].error_code)

    m.see("DeleteTopics, no DELETE", delete_topic("made2"), TOPIC_DENIED)
    m.grant("topic", "made2", "delete")
    m.see("DeleteTopics, DELETE", delete_topic("made2"), NONE)

    def delete_by_id(topic_id: uuid.UUID) -> tuple[int, str | None]:
        r = call(m.subject, ApiKey.DELETE_TOPICS, 6, timeout_ms=30000, topics=[
            sub(ApiKey.DELETE_TOPICS, "DeleteTopicState", name=None, topic_id=topic_id)])
        return int(r.responses[0].error_code), r.responses[0].name

    m.create_topic("made3")
    made3 = m.topic_id("made3")
    m.see("DeleteTopics by id, no ACL", delete_by_id(made3), (TOPIC_DENIED, None))
    m.see("DeleteTopics by unknown id", delete_by_id(NO_SUCH_TOPIC_ID), (UNKNOWN_TOPIC_ID, None))
    m.grant("topic", "made3", "describe")
    m.see("DeleteTopics by id, DESCRIBE only", delete_by_id(made3), (TOPIC_DENIED, "made3"))
    m.grant("topic", "made3", "delete")
    m.see("DeleteTopics by id, DELETE", delete_by_id(made3), (NONE, "made3"))


def case_cluster_admin(m: Matrix) -> None:
    m.create_topic("elect")

    def log_dirs() -> int:
        return int(call(m.subject, ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None).error_code)

    def cluster_ops() -> int:
        r = call(m.subject, ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=1)
        return int(r.cluster_authorized_operations)

    def list_reassignments() -> int:
        return int(call(m.subject, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=10000, topics=None).error_code)

    def describe_quotas() -> int:
        return int(call(m.subject, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=[], strict=False).error_code)

    def describe_scram() -> int:
        return int(call(m.subject, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=[]).error_code)

    m.see("DescribeLogDirs, no ACL", log_dirs(), CLUSTER_DENIED)
    m.see("DescribeCluster operations, no ACL", cluster_ops(), 0)
    m.see("ListPartitionReassignments, no ACL", list_reassignments(), CLUSTER_DENIED)
    m.see("DescribeClientQuotas, no ACL", describe_quotas(), CLUSTER_DENIED)
    m.see("DescribeUserScramCredentials, no ACL", describe_scram(), CLUSTER_DENIED)
    m.grant("cluster", "kafka-cluster", "describe")
    m.see("DescribeLogDirs, DESCRIBE on the cluster", log_dirs(), NONE)
    m.see("DescribeCluster operations, DESCRIBE", cluster_ops(), 1 << 8)
    m.see("ListPartitionReassignments, DESCRIBE", list_reassignments(), NONE)
    m.see("DescribeUserScramCredentials, DESCRIBE", describe_scram(), NONE)
    m.see("DescribeClientQuotas, DESCRIBE only", describe_quotas(), CLUSTER_DENIED)
    m.revoke_cluster()
    m.grant("cluster", "kafka-cluster", "describe_configs")
    m.see("DescribeClientQuotas, DESCRIBE_CONFIGS", describe_quotas(), NONE)
    m.revoke_cluster()

    def elect() -> tuple[int, int]:
        r = call(m.subject, ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=10000, topic_partitions=[
            sub(ApiKey.ELECT_LEADERS, "TopicPartitions", topic="elect", partitions=[0])])
        return int(r.error_code), int(r.replica_election_results[0].partition_result[0].error_code)

    def alter_reassignments() -> int:
        return int(call(m.subject, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout_ms=10000, topics=[]).error_code)

    def alter_quotas() -> int:
        r = call(m.subject, ApiKey.ALTER_CLIENT_QUOTAS, 1, validate_only=True, entries=[
            sub(ApiKey.ALTER_CLIENT_QUOTAS, "EntryData", entity=[
                sub(ApiKey.ALTER_CLIENT_QUOTAS, "EntityData", entity_type="client-id", entity_name="c1")], ops=[
                sub(ApiKey.ALTER_CLIENT_QUOTAS, "OpData", key="producer_byte_rate", value=1024.0, remove=False)])])
        return int(r.entries[0].error_code)

    def alter_scram() -> int:
        r = call(m.subject, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, upsertions=[], deletions=[
            sub(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "ScramCredentialDeletion", name="nobody", mechanism=1)])
        return int(r.results[0].error_code)

    m.see("ElectLeaders, no ACL", elect(), (CLUSTER_DENIED, CLUSTER_DENIED))
    m.see("AlterPartitionReassignments, no ACL", alter_reassignments(), CLUSTER_DENIED)
    m.see("AlterClientQuotas, no ACL", alter_quotas(), CLUSTER_DENIED)
    m.see("AlterUserScramCredentials, no ACL", alter_scram(), CLUSTER_DENIED)
    m.grant("cluster", "kafka-cluster", "alter")
    m.see("ElectLeaders, ALTER (election not needed)", elect(), (NONE, 84))
    m.see("AlterPartitionReassignments, ALTER", alter_reassignments(), NONE)
    m.see("AlterUserScramCredentials, ALTER (no such credential)", alter_scram(), 91)
    m.revoke_cluster()
    m.grant("cluster", "kafka-cluster", "alter_configs")
    m.see("AlterClientQuotas, ALTER_CONFIGS", alter_quotas(), NONE)
    m.revoke_cluster()


def case_controller_apis(m: Matrix) -> None:
    """Controller-to-broker requests from a client: refused without CLUSTER_ACTION; with it they reach
    the broker-epoch fence (epoch 0 is older than any registration) and change nothing."""

    def update_metadata() -> int:
        if m.apache_kafka:  # the same fields in Kafka's v8 layout (see the module doc)
            r = raw_call(m.bootstrap, SUBJECT_HOST, ApiKey.UPDATE_METADATA, 8,
                         kafka_update_metadata_v8(controller_id=0, controller_epoch=1, broker_epoch=0))
            return int(r.error_code)
        return int(call(m.subject, ApiKey.UPDATE_METADATA, 8, controller_id=0, is_k_raft_controller=False,
                        controller_epoch=1, broker_epoch=0, topic_states=[], live_brokers=[]).error_code)

    def leader_and_isr() -> int:
        return int(call(m.subject, ApiKey.LEADER_AND_ISR, 7, controller_id=0, is_k_raft_controller=False,
                        controller_epoch=1, broker_epoch=0, type=0, topic_states=[], live_leaders=[]).error_code)

    def stop_replica() -> int:
        return int(call(m.subject, ApiKey.STOP_REPLICA, 4, controller_id=0, is_k_raft_controller=False,
                        controller_epoch=1, broker_epoch=0, topic_states=[]).error_code)

    m.see("UpdateMetadata, no ACL", update_metadata(), CLUSTER_DENIED)
    m.see("LeaderAndIsr, no ACL", leader_and_isr(), CLUSTER_DENIED)
    m.see("StopReplica, no ACL", stop_replica(), CLUSTER_DENIED)
    m.grant("cluster", "kafka-cluster", "cluster_action")
    m.see("UpdateMetadata, CLUSTER_ACTION (stale broker epoch)", update_metadata(), 77)
    m.see("LeaderAndIsr, CLUSTER_ACTION (stale broker epoch)", leader_and_isr(), 77)
    m.see("StopReplica, CLUSTER_ACTION (stale broker epoch)", stop_replica(), 77)
    m.revoke_cluster()


def case_broker_to_controller_apis(m: Matrix) -> None:
    """What brokers send each other, from a client: ControlledShutdown and AlterPartition (to the
    controller) need CLUSTER_ACTION and then meet the broker-epoch fence (epoch 0 is stale);
    WriteTxnMarkers (to partition leaders) needs ALTER or CLUSTER_ACTION on the cluster, and then
    answers a marker for a partition that does not exist with UNKNOWN_TOPIC_OR_PARTITION."""

    def controlled_shutdown() -> int:
        return int(call(m.subject, ApiKey.CONTROLLED_SHUTDOWN, 3, broker_id=0, broker_epoch=0).error_code)

    def alter_partition() -> int:
        return int(call(m.subject, ApiKey.ALTER_PARTITION, 3, broker_id=0, broker_epoch=0, topics=[]).error_code)

    def write_markers() -> tuple[int, ...]:
        r = call(m.subject, ApiKey.WRITE_TXN_MARKERS, 1, markers=[
            sub(ApiKey.WRITE_TXN_MARKERS, "WritableTxnMarker", producer_id=4242, producer_epoch=0,
                transaction_result=False, coordinator_epoch=0, topics=[
                    sub(ApiKey.WRITE_TXN_MARKERS, "WritableTxnMarkerTopic", name="no-such-topic",
                        partition_indexes=[0])])])
        return tuple(int(p.error_code) for mk in r.markers for t in mk.topics for p in t.partitions)

    m.see("ControlledShutdown, no ACL", controlled_shutdown(), CLUSTER_DENIED)
    m.see("AlterPartition, no ACL", alter_partition(), CLUSTER_DENIED)
    m.see("WriteTxnMarkers, no ACL", write_markers(), (CLUSTER_DENIED,))
    m.grant("cluster", "kafka-cluster", "alter")
    m.see("WriteTxnMarkers, ALTER on the cluster", write_markers(), (UNKNOWN_TOPIC_OR_PARTITION,))
    m.see("ControlledShutdown, ALTER only", controlled_shutdown(), CLUSTER_DENIED)
    m.revoke_cluster()
    m.grant("cluster", "kafka-cluster", "cluster_action")
    m.see("WriteTxnMarkers, CLUSTER_ACTION", write_markers(), (UNKNOWN_TOPIC_OR_PARTITION,))
    m.see("ControlledShutdown, CLUSTER_ACTION (stale broker epoch)", controlled_shutdown(), STALE_BROKER_EPOCH)
    m.see("AlterPartition, CLUSTER_ACTION (stale broker epoch)", alter_partition(), STALE_BROKER_EPOCH)
    m.revoke_cluster()


def case_groups(m: Matrix) -> None:
    m.create_topic("offsets")
    m.wait_coordinator("g", 0)
    m.see("FindCoordinator group, no ACL", m.find_coordinator(m.subject, "g", 0), GROUP_DENIED)

    def join() -> int:
        r = call(m.subject, ApiKey.JOIN_GROUP, 9, group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                 member_id="", group_instance_id=None, protocol_type="consumer", reason=None, protocols=[
                     sub(ApiKey.JOIN_GROUP, "JoinGroupRequestProtocol", name="range", metadata=b"")])
        return int(r.error_code)

    def heartbeat() -> int:
        return int(call(m.subject, ApiKey.HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m",
                        group_instance_id=None).error_code)

    def sync() -> int:
        return int(call(m.subject, ApiKey.SYNC_GROUP, 5, group_id="g", generation_id=1, member_id="m",
                        group_instance_id=None, protocol_type="consumer", protocol_name="range",
                        assignments=[]).error_code)

    def leave() -> int:
        return int(call(m.subject, ApiKey.LEAVE_GROUP, 5, group_id="g", members=[
            sub(ApiKey.LEAVE_GROUP, "MemberIdentity", member_id="m", group_instance_id=None, reason=None)]).error_code)

    def offset_fetch() -> tuple[int, tuple[int, ...]]:
        r = call(m.subject, ApiKey.OFFSET_FETCH, 8, require_stable=False, groups=[
            sub(ApiKey.OFFSET_FETCH, "OffsetFetchRequestGroup", group_id="g", topics=[
                sub(ApiKey.OFFSET_FETCH, "OffsetFetchRequestTopics", name="offsets", partition_indexes=[0])])])
        g = r.groups[0]
        return int(g.error_code), tuple(int(p.error_code) for t in g.topics for p in t.partitions)

    def offset_fetch_single(version: int) -> tuple[int | None, tuple[int, ...]]:
        """One group per request (v1-v7); v1 has no top-level error code."""
        r = call(m.subject, ApiKey.OFFSET_FETCH, version, group_id="g", require_stable=False, topics=[
            sub(ApiKey.OFFSET_FETCH, "OffsetFetchRequestTopic", name="offsets", partition_indexes=[0])])
        return (int(r.error_code) if version >= 2 else None,
                tuple(int(p.error_code) for t in r.topics for p in t.partitions))

    def find_coordinator_single(version: int) -> int:
        """One key per request (v0-v3); v0 has no key type (always a group)."""
        return int(call(m.subject, ApiKey.FIND_COORDINATOR, version, key="g", key_type=0).error_code)

    def describe() -> tuple[int, int]:
        r = call(m.subject, ApiKey.DESCRIBE_GROUPS, 5, groups=["g"], include_authorized_operations=True)
        return int(r.groups[0].error_code), int(r.groups[0].authorized_operations)

    def listed() -> bool:
        r = call(m.subject, ApiKey.LIST_GROUPS, 4, states_filter=[])
        return "g" in {g.group_id for g in r.groups}

    def offset_delete() -> tuple[int, tuple[int, ...]]:
        r = call(m.subject, ApiKey.OFFSET_DELETE, 0, group_id="g", topics=[
            sub(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestTopic", name="offsets", partitions=[
                sub(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=0)])])
        return int(r.error_code), tuple(int(p.error_code) for t in r.topics for p in t.partitions)

    m.see("admin commits offsets", m.commit(m.admin, "g", "offsets"), (NONE,))
    m.see("JoinGroup, no ACL", join(), GROUP_DENIED)
    m.see("Heartbeat, no ACL", heartbeat(), GROUP_DENIED)
    m.see("SyncGroup, no ACL", sync(), GROUP_DENIED)
    m.see("LeaveGroup, no ACL", leave(), GROUP_DENIED)
    m.see("OffsetCommit, no ACL", m.commit(m.subject, "g", "offsets"), (GROUP_DENIED,))
    m.see("OffsetFetch, no ACL", offset_fetch(), (GROUP_DENIED, ()))
    m.see("OffsetFetch v7, no ACL", offset_fetch_single(7), (GROUP_DENIED, ()))
    m.see("OffsetFetch v1, no ACL", offset_fetch_single(1), (None, ()))
    m.see("FindCoordinator v0 group, no ACL", find_coordinator_single(0), GROUP_DENIED)
    m.see("FindCoordinator v3 group, no ACL", find_coordinator_single(3), GROUP_DENIED)
    m.see("DescribeGroups, no ACL", describe(), (GROUP_DENIED, -2147483648))
    m.see("ListGroups, no ACL, lists g", listed(), False)
    m.see("OffsetDelete, no ACL", offset_delete(), (GROUP_DENIED, ()))
    m.grant("group", "g", "describe")
    m.see("OffsetFetch, DESCRIBE on the group only", offset_fetch(), (NONE, (TOPIC_DENIED,)))
    m.see("OffsetFetch v7, DESCRIBE on the group only", offset_fetch_single(7), (NONE, (TOPIC_DENIED,)))
    m.see("OffsetFetch v1, DESCRIBE on the group only", offset_fetch_single(1), (None, (TOPIC_DENIED,)))
    m.see("FindCoordinator group, DESCRIBE", m.find_coordinator(m.subject, "g", 0), NONE)
    m.see("FindCoordinator v0 group, DESCRIBE", find_coordinator_single(0), NONE)
    m.see("FindCoordinator v3 group, DESCRIBE", find_coordinator_single(3), NONE)
    m.see("DescribeGroups, DESCRIBE", describe(), (NONE, 1 << 8))
    m.see("ListGroups, DESCRIBE on the group, lists g", listed(), True)
    m.see("JoinGroup, DESCRIBE only", join(), GROUP_DENIED)
    m.see("OffsetCommit, DESCRIBE only", m.commit(m.subject, "g", "offsets"), (GROUP_DENIED,))
    m.grant("group", "g", "read")
    m.see("JoinGroup, READ (member id required)", join(), 79)
    m.see("Heartbeat, READ", heartbeat() != GROUP_DENIED, True)
    m.see("SyncGroup, READ", sync() != GROUP_DENIED, True)
    m.see("LeaveGroup, READ", leave() != GROUP_DENIED, True)
    m.see("OffsetCommit, READ on the group only", m.commit(m.subject, "g", "offsets"), (TOPIC_DENIED,))
    m.see("DescribeGroups, READ and DESCRIBE", describe(), (NONE, (1 << 3) | (1 << 8)))
    m.grant("topic", "offsets", "read")
    m.see("OffsetCommit, READ on group and topic", m.commit(m.subject, "g", "offsets"), (NONE,))
    m.see("OffsetFetch, topic READ (implies DESCRIBE)", offset_fetch(), (NONE, (NONE,)))
    m.see("OffsetFetch v7, topic READ", offset_fetch_single(7), (NONE, (NONE,)))
    m.see("OffsetFetch v1, topic READ", offset_fetch_single(1), (None, (NONE,)))
    m.see("OffsetDelete, READ and DESCRIBE on the group", offset_delete(), (GROUP_DENIED, ()))
    m.grant("group", "g", "delete")
    m.see("OffsetDelete, DELETE group, READ topic", offset_delete(), (NONE, (NONE,)))

    def delete_group(name: str) -> int:
        return int(call(m.subject, ApiKey.DELETE_GROUPS, 2, groups_names=[name]).results[0].error_code)

    m.see("admin commits offsets for g2", m.commit(m.admin, "g2", "offsets"), (NONE,))
    m.see("DeleteGroups, no ACL", delete_group("g2"), GROUP_DENIED)
    m.grant("group", "g2", "delete")
    m.see("DeleteGroups, DELETE", delete_group("g2"), NONE)


def case_transactions(m: Matrix) -> None:
    m.create_topic("txdata")
    r = call(m.subject, ApiKey.DESCRIBE_PRODUCERS, 0, topics=[
        sub(ApiKey.DESCRIBE_PRODUCERS, "TopicRequest", name="txdata", partition_indexes=[0])])
    m.see("DescribeProducers, no ACL", int(r.topics[0].partitions[0].error_code), TOPIC_DENIED)
    m.wait_coordinator("tx", 1)
    m.see("FindCoordinator transaction, no ACL", m.find_coordinator(m.subject, "tx", 1), TXN_DENIED)

    def find_txn_coordinator_v3() -> int:
        return int(call(m.subject, ApiKey.FIND_COORDINATOR, 3, key="tx", key_type=1).error_code)

    m.see("FindCoordinator v3 transaction, no ACL", find_txn_coordinator_v3(), TXN_DENIED)
    m.see("InitProducerId transactional, no ACL", m.init_producer_id(m.subject, "tx")[0], TXN_DENIED)
    m.see("Produce transactional, no ACL", m.produce(m.subject, "txdata", "tx", 1, 0), TXN_DENIED)
    m.grant("txn", "tx", "write")
    code, pid, epoch = m.init_producer_id(m.subject, "tx")
    m.see("InitProducerId transactional, WRITE", code, NONE)
    m.grant("txn", "tx", "describe")
    m.see("FindCoordinator transaction, DESCRIBE", m.find_coordinator(m.subject, "tx", 1), NONE)
    m.see("FindCoordinator v3 transaction, DESCRIBE", find_txn_coordinator_v3(), NONE)

    def add_partitions() -> tuple[int, ...]:
        r = call(m.subject, ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="tx",
                 v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                     sub(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnTopic", name="txdata", partitions=[0])])
        return tuple(int(p.partition_error_code) for t in r.results_by_topic_v3_and_below
                     for p in t.results_by_partition)

    def add_offsets() -> int:
        return int(call(m.subject, ApiKey.ADD_OFFSETS_TO_TXN, 3, transactional_id="tx", producer_id=pid,
                        producer_epoch=epoch, group_id="txg").error_code)

    def txn_commit() -> tuple[int, ...]:
        r = call(m.subject, ApiKey.TXN_OFFSET_COMMIT, 3, transactional_id="tx", group_id="txg", producer_id=pid,
                 producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None, topics=[
                     sub(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommitRequestTopic", name="txdata", partitions=[
                         sub(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommitRequestPartition", partition_index=0,
                             committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])
        return tuple(int(p.error_code) for t in r.topics for p in t.partitions)

    def describe_txn() -> int:
        return int(call(m.subject, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["tx"])
                   .transaction_states[0].error_code)

    m.see("AddPartitionsToTxn, WRITE on the id only", add_partitions(), (TOPIC_DENIED,))
    m.grant("topic", "txdata", "write")
    m.see("AddPartitionsToTxn, WRITE on id and topic", add_partitions(), (NONE,))
    m.see("AddOffsetsToTxn, no READ on the group", add_offsets(), GROUP_DENIED)
    m.grant("group", "txg", "read")
    m.see("AddOffsetsToTxn, READ on the group", add_offsets(), NONE)
    m.see("TxnOffsetCommit, no READ on the topic", txn_commit(), (TOPIC_DENIED,))
    m.grant("topic", "txdata", "read")
    m.see("TxnOffsetCommit, READ on group and topic", txn_commit() != (TOPIC_DENIED,), True)
    m.see("DescribeTransactions, DESCRIBE", describe_txn(), NONE)
    r = call(m.subject, ApiKey.LIST_TRANSACTIONS, 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
    m.see("ListTransactions, DESCRIBE, lists tx", "tx" in {s.transactional_id for s in r.transaction_states}, True)
    end = call(m.subject, ApiKey.END_TXN, 3, transactional_id="tx", producer_id=pid, producer_epoch=epoch,
               committed=False)
    m.see("EndTxn, WRITE", int(end.error_code), NONE)

    m.see("DescribeTransactions other id, no ACL",
          int(call(m.subject, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["other"])
              .transaction_states[0].error_code), TXN_DENIED)
    end = call(m.subject, ApiKey.END_TXN, 3, transactional_id="other", producer_id=1, producer_epoch=0,
               committed=True)
    m.see("EndTxn other id, no ACL", int(end.error_code), TXN_DENIED)
    r = call(m.subject, ApiKey.DESCRIBE_PRODUCERS, 0, topics=[
        sub(ApiKey.DESCRIBE_PRODUCERS, "TopicRequest", name="txdata", partition_indexes=[0])])
    m.see("DescribeProducers, READ", int(r.topics[0].partitions[0].error_code), NONE)


# Order matters: the idempotent producer case must run before any topic WRITE grant.
CASES: list[Case] = [case_idempotent_producer, case_metadata, case_metadata_by_id_and_v0, case_metadata_auto_create,
                     case_describe_topic_partitions, case_produce_fetch, case_topic_admin, case_cluster_admin,
                     case_controller_apis, case_broker_to_controller_apis, case_groups, case_transactions]

# A ZooKeeper-mode Apache Kafka broker does not offer DescribeTopicPartitions (see the module doc).
KAFKA_CASES: list[Case] = [c for c in CASES if c is not case_describe_topic_partitions]


def run_matrix(bootstrap: str, zk: AclZk, cases: list[Case] = CASES, apache_kafka: bool = False) -> dict[str, Any]:
    m = Matrix(bootstrap, zk, apache_kafka)
    try:
        for case in cases:
            case(m)
    finally:
        m.close()
    return m.observed
