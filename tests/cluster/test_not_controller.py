"""CreateTopics, DeleteTopics and CreatePartitions are controller requests, as in Kafka 3.9's ZooKeeper
mode: a broker that is not the active controller answers every topic NOT_CONTROLLER (41, no message),
before validating anything, and changes nothing; the controller carries them out. Admin clients find
the controller in Metadata and go there by themselves, whichever broker they bootstrapped from.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import request_type
from tests.cluster.helpers import RawClient, ZkView, unique, wait_until
from tests.conftest import attach_cluster, shared_cluster

NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER
_CT = request_type(ApiKey.CREATE_TOPICS)
_DT = request_type(ApiKey.DELETE_TOPICS)
_CP = request_type(ApiKey.CREATE_PARTITIONS)


@pytest.fixture(scope="module")
def shared3() -> Iterator[Any]:
    yield from shared_cluster(3, {"offsets.topic.num.partitions": "3",
                                  "transaction.state.log.num.partitions": "3"})


@pytest.fixture
def cluster(shared3: Any, request: pytest.FixtureRequest) -> Any:
    return attach_cluster(request, shared3)


def roles(cluster: Any) -> tuple[Any, Any]:
    """(the active controller, another broker), once every broker's metadata names that controller."""
    with ZkView(cluster) as zk:
        (cid,) = wait_until(lambda: (lambda c: (c,) if c is not None and c >= 0 else None)(zk.controller()), 30,
                            "a controller in ZooKeeper")
    for b in cluster.brokers:
        with RawClient(b.bootstrap) as raw:
            wait_until(lambda raw=raw: metadata(raw).controller_id == cid, 30,
                       f"broker {b.broker_id} to know controller {cid}")
    controller = next(b for b in cluster.brokers if b.broker_id == cid)
    other = next(b for b in cluster.brokers if b.broker_id != cid)
    return controller, other


def metadata(raw: RawClient, *topics: str) -> Any:
    mt = request_type(ApiKey.METADATA)
    return raw.request(ApiKey.METADATA, 12, topics=[mt.MetadataRequestTopic(name=t, topic_id=None) for t in topics],
                       allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def create_topics(raw: RawClient, version: int, *names: str, partitions: int = 1, replication: int = 3) -> Any:
    return raw.request(ApiKey.CREATE_TOPICS, version, timeout_ms=30000, validate_only=False, topics=[
        _CT.CreatableTopic(name=n, num_partitions=partitions, replication_factor=replication, assignments=[],
                           configs=[]) for n in names])


def delete_by_name(raw: RawClient, version: int, *names: str) -> Any:
    if version >= 6:
        return raw.request(ApiKey.DELETE_TOPICS, version, timeout_ms=30000,
                           topics=[_DT.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in names])
    return raw.request(ApiKey.DELETE_TOPICS, version, timeout_ms=30000, topic_names=list(names))


def delete_by_id(raw: RawClient, topic_id: uuid.UUID) -> Any:
    return raw.request(ApiKey.DELETE_TOPICS, 6, timeout_ms=30000,
                       topics=[_DT.DeleteTopicState(name=None, topic_id=topic_id)])


def create_partitions(raw: RawClient, *names: str, count: int) -> Any:
    return raw.request(ApiKey.CREATE_PARTITIONS, 3, timeout_ms=30000, validate_only=False, topics=[
        _CP.CreatePartitionsTopic(name=n, count=count, assignments=None) for n in names])


def test_topic_changes_off_the_controller_are_refused(cluster: Any) -> None:
    """Each topic of each request is answered NOT_CONTROLLER with no message, even where the controller
    would refuse it for another reason (a topic named twice, an illegal name); nothing changes. The
    same requests to the controller succeed."""
    controller, other = roles(cluster)
    kept, new = unique("nc-kept"), unique("nc-new")
    with RawClient(controller.bootstrap) as to_controller, RawClient(other.bootstrap) as to_other, \
            ZkView(cluster) as zk:
        assert [t.error_code for t in create_topics(to_controller, 7, kept).topics] == [0]
        wait_until(lambda: len(zk.assignment(kept)) == 1, 30, f"{kept} in ZooKeeper")
        kept_id = wait_until(lambda: metadata(to_other, kept).topics[0].topic_id.int and
                             metadata(to_other, kept).topics[0].topic_id, 30, f"{other.broker_id} to know {kept}")

        for version in (0, 1, 4, 7):
            r = create_topics(to_other, version, new, kept, new, "illegal name!", "__cluster_metadata")
            assert [(t.name, t.error_code) for t in r.topics] == [
                (new, NOT_CONTROLLER), (kept, NOT_CONTROLLER), (new, NOT_CONTROLLER),
                ("illegal name!", NOT_CONTROLLER), ("__cluster_metadata", NOT_CONTROLLER)], version
            if version >= 1:  # Kafka's default message: empty, where DeleteTopics and CreatePartitions have null
                assert all(t.error_message == "" for t in r.topics)
            if version >= 5:
                assert all((t.num_partitions, t.replication_factor, t.topic_config_error_code) == (-1, -1, 0)
                           for t in r.topics)
        # The controller answers the same request topic by topic, for reasons of its own.
        r = create_topics(to_controller, 7, kept, "illegal name!", "__cluster_metadata")
        assert [t.error_code for t in r.topics] == [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                    ErrorCode.INVALID_REQUEST]

        for version in (0, 3, 5, 6):
            r = delete_by_name(to_other, version, kept, new)
            assert [(t.name, t.error_code) for t in r.responses] == [(kept, NOT_CONTROLLER), (new, NOT_CONTROLLER)]
            if version >= 5:
                assert all(t.error_message is None for t in r.responses)
        r = delete_by_id(to_other, kept_id)
        assert [(t.name, t.topic_id, t.error_code) for t in r.responses] == [(None, kept_id, NOT_CONTROLLER)]

        r = create_partitions(to_other, kept, new, kept, count=3)
        assert [(t.name, t.error_code, t.error_message) for t in r.results] == [
            (kept, NOT_CONTROLLER, None), (new, NOT_CONTROLLER, None)]

        # Nothing changed: no new topic, no new partition, no deletion queued.
        assert not zk.zk.topic_exists(new)
        assert list(zk.assignment(kept)) == [0]
        assert not zk.zk.is_topic_marked_for_deletion(kept)
        assert [t.error_code for t in metadata(to_other, kept).topics] == [0]

        # The controller carries each of them out.
        assert [t.error_code for t in create_topics(to_controller, 7, new).topics] == [0]
        assert [(t.name, t.error_code) for t in create_partitions(to_controller, kept, count=3).results] == \
            [(kept, 0)]
        assert len(zk.assignment(kept)) == 3
        assert [(t.name, t.error_code) for t in delete_by_name(to_controller, 6, new).responses] == [(new, 0)]
        assert [(t.name, t.error_code) for t in delete_by_id(to_controller, kept_id).responses] == [(kept, 0)]
        wait_until(lambda: not zk.zk.topic_exists(new) and not zk.zk.topic_exists(kept), 30,
                   "both topics deleted")


def test_admin_clients_bootstrapped_off_the_controller_route_themselves(cluster: Any) -> None:
    """kafka-python's and confluent-kafka's admin clients, given only a broker that is not the
    controller, create topics, add partitions and delete topics."""
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import NewPartitions as CNewPartitions
    from confluent_kafka.admin import NewTopic as CNewTopic
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic

    _, other = roles(cluster)
    with ZkView(cluster) as zk:
        kp = unique("nc-kp")
        admin = KafkaAdminClient(bootstrap_servers=other.bootstrap, client_id=unique("nc-admin"))
        try:
            admin.create_topics([NewTopic(kp, 1, 3)])
            wait_until(lambda: zk.zk.topic_exists(kp), 30, f"{kp} created")
            admin.create_partitions({kp: NewPartitions(2)})
            assert len(zk.assignment(kp)) == 2
            admin.delete_topics([kp])
            wait_until(lambda: not zk.zk.topic_exists(kp), 30, f"{kp} deleted")
        finally:
            admin.close()

        ck = unique("nc-ck")
        c_admin = AdminClient({"bootstrap.servers": other.bootstrap})
        c_admin.create_topics([CNewTopic(ck, num_partitions=1, replication_factor=3)])[ck].result(60)
        c_admin.create_partitions([CNewPartitions(ck, 2)])[ck].result(60)
        assert len(zk.assignment(ck)) == 2
        c_admin.delete_topics([ck])[ck].result(60)
        wait_until(lambda: not zk.zk.topic_exists(ck), 30, f"{ck} deleted")


def test_kafka_topics_bootstrapped_off_the_controller(cluster: Any) -> None:
    """Apache Kafka 3.9.1's kafka-topics, given only a broker that is not the controller, creates a
    topic and adds partitions to it (the Java admin client sends both to the controller)."""
    from tests.kafka_dist import run_java

    _, other = roles(cluster)
    topic = unique("nc-java")
    with ZkView(cluster) as zk:
        run_java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", other.bootstrap, "--create",
                 "--topic", topic, "--partitions", "1", "--replication-factor", "3")
        assert len(zk.assignment(topic)) == 1
        run_java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", other.bootstrap, "--alter",
                 "--topic", topic, "--partitions", "2")
        assert len(zk.assignment(topic)) == 2


def test_automatic_creation_works_off_the_controller(cluster: Any) -> None:
    """Metadata's automatic topic creation is the broker's own path, not a controller request: a broker
    that is not the controller creates the topic it was asked about."""
    _, other = roles(cluster)
    topic = unique("nc-auto")
    mt = request_type(ApiKey.METADATA)
    with RawClient(other.bootstrap) as raw:
        r = raw.request(ApiKey.METADATA, 12, topics=[mt.MetadataRequestTopic(name=topic, topic_id=None)],
                        allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        assert [(t.name, t.error_code) for t in r.topics] == [(topic, ErrorCode.LEADER_NOT_AVAILABLE)]
        wait_until(lambda: raw.leaders(topic) == 1, 30, f"a leader for {topic}")


def test_elections_and_reassignments_off_the_controller_are_refused(cluster: Any) -> None:
    """ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments are not forwarded: off
    the controller, NOT_CONTROLLER on each partition (ElectLeaders: every partition the broker knows when
    none is named) or at the top level with Kafka's message, and no reassignment starts. kafka-python's
    admin client, bootstrapped off the controller, gets its answers from the controller."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    controller, other = roles(cluster)
    topic = unique("nc-elect")
    el, ar = request_type(ApiKey.ELECT_LEADERS), request_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    with RawClient(controller.bootstrap) as to_controller, RawClient(other.bootstrap) as to_other, \
            ZkView(cluster) as zk:
        assert [t.error_code for t in create_topics(to_controller, 7, topic, partitions=2).topics] == [0]
        wait_until(lambda: to_other.leaders(topic) == 2, 30, f"{other.broker_id} to know {topic}")
        before = zk.assignment(topic)

        r = to_other.request(ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=30000, topic_partitions=[
            el.TopicPartitions(topic=topic, partitions=[1, 0, 1]), el.TopicPartitions(topic="unknown", partitions=[0])])
        assert r.error_code == 0
        assert [(t.topic, [(p.partition_id, p.error_code, p.error_message) for p in t.partition_result])
                for t in r.replica_election_results] == [
            (topic, [(1, NOT_CONTROLLER, None), (0, NOT_CONTROLLER, None)]), ("unknown", [(0, NOT_CONTROLLER, None)])]
        r = to_other.request(ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=30000, topic_partitions=None)
        refused = {t.topic: sorted(p.partition_id for p in t.partition_result if p.error_code == NOT_CONTROLLER)
                   for t in r.replica_election_results}
        md = to_other.request(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
        assert refused == {t.name: sorted(p.partition_index for p in t.partitions) for t in md.topics}
        assert refused[topic] == [0, 1]

        target = [b for b in before[0] if b != before[0][0]] + [before[0][0]]
        r = to_other.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout_ms=30000, topics=[
            ar.ReassignableTopic(name=topic, partitions=[ar.ReassignablePartition(partition_index=0, replicas=target)])])
        assert (r.error_code, r.error_message, r.responses) == (
            NOT_CONTROLLER, "This is not the correct controller for this cluster.", [])
        r = to_other.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=30000, topics=None)
        assert (r.error_code, r.error_message, r.topics) == (
            NOT_CONTROLLER, "This is not the correct controller for this cluster.", [])
        assert zk.assignment(topic) == before and not zk.zk.get_partition_reassignment()

        admin = KafkaAdminClient(bootstrap_servers=other.bootstrap, client_id=unique("nc-admin"))
        try:
            assert admin.list_partition_reassignments() == {}
            assert admin.alter_partition_reassignments({TopicPartition(topic, 0): target}) == \
                {TopicPartition(topic, 0): None}
            wait_until(lambda: zk.assignment(topic)[0] == target, 30, "the reassignment to finish")
        finally:
            admin.close()


def test_scram_credential_changes_off_the_controller_are_refused(cluster: Any) -> None:
    """AlterUserScramCredentials off the controller: NOT_CONTROLLER for each user named (sorted, once),
    no credential written; the controller takes the same request."""
    us = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    controller, other = roles(cluster)
    user = unique("nc-user")
    fields = {"deletions": [us.ScramCredentialDeletion(name="nc-nobody", mechanism=1)],
              "upsertions": [us.ScramCredentialUpsertion(name=user, mechanism=1, iterations=4096, salt=b"s" * 16,
                                                         salted_password=b"p" * 32),
                             us.ScramCredentialUpsertion(name=user, mechanism=2, iterations=4096, salt=b"s" * 16,
                                                         salted_password=b"p" * 64)]}
    with RawClient(other.bootstrap) as to_other, ZkView(cluster) as zk:
        r = to_other.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, **fields)
        assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
            ("nc-nobody", NOT_CONTROLLER, None), (user, NOT_CONTROLLER, None)]
        assert zk.zk.kazoo.exists(f"/config/users/{user}") is None
    with RawClient(controller.bootstrap) as to_controller:
        r = to_controller.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, upsertions=fields["upsertions"],
                                  deletions=[])
        assert [(x.user, x.error_code) for x in r.results] == [(user, 0)]


@pytest.mark.slow  # make test keeps its budget; make test-slow runs it
def test_not_controller_comes_before_authorization(request: pytest.FixtureRequest) -> None:
    """With Kafka's AclAuthorizer, a caller holding no ACL gets NOT_CONTROLLER from a broker that is not
    the controller for topic changes (checked before authorization, as in Kafka) and
    TOPIC_AUTHORIZATION_FAILED from the controller; ElectLeaders and the reassignment APIs authorize
    first, so that caller gets CLUSTER_AUTHORIZATION_FAILED from either."""
    from clients.devcluster import LocalCluster
    from tests.security.acl_matrix import BROKER_OVERRIDES, SUBJECT_HOST, call, connect
    from tests.security.test_acl_matrix import prepare_acls

    denied_topic, denied_cluster = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    el = request_type(ApiKey.ELECT_LEADERS)
    cluster = LocalCluster(2, overrides=BROKER_OVERRIDES, metrics_base_port=None)
    zk = None
    try:
        cluster.zk.start()
        zk = prepare_acls(cluster.zk.connect_string, cluster.chroot)
        cluster.start()
        attach_cluster(request, cluster)
        controller, other = roles(cluster)
        topic = unique("nc-acl")
        with RawClient(controller.bootstrap) as admin:  # 127.0.0.1: the administrator's address
            assert [t.error_code for t in create_topics(admin, 7, topic, replication=2).topics] == [0]
        for broker, topic_error in ((other, NOT_CONTROLLER), (controller, denied_topic)):
            conn = connect(broker.bootstrap, SUBJECT_HOST)
            try:
                r = call(conn, ApiKey.CREATE_TOPICS, 7, timeout_ms=5000, validate_only=False, topics=[
                    _CT.CreatableTopic(name=unique("nc-acl"), num_partitions=1, replication_factor=1,
                                       assignments=[], configs=[])])
                assert [t.error_code for t in r.topics] == [topic_error], broker.broker_id
                r = call(conn, ApiKey.DELETE_TOPICS, 6, timeout_ms=5000,
                         topics=[_DT.DeleteTopicState(name=topic, topic_id=uuid.UUID(int=0))])
                assert [t.error_code for t in r.responses] == [topic_error], broker.broker_id
                r = call(conn, ApiKey.CREATE_PARTITIONS, 3, timeout_ms=5000, validate_only=False,
                         topics=[_CP.CreatePartitionsTopic(name=topic, count=2, assignments=None)])
                assert [t.error_code for t in r.results] == [topic_error], broker.broker_id
                r = call(conn, ApiKey.ELECT_LEADERS, 2, election_type=0, timeout_ms=5000,
                         topic_partitions=[el.TopicPartitions(topic=topic, partitions=[0])])
                assert (r.error_code, [p.error_code for t in r.replica_election_results
                                       for p in t.partition_result]) == (denied_cluster, [denied_cluster])
                r = call(conn, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout_ms=5000, topics=None)
                assert r.error_code == denied_cluster
            finally:
                conn.close()
    finally:
        if zk is not None:
            zk.close()
        cluster.__exit__(None, None, None)


# ================================================================================================
# Side by side with Apache Kafka 3.9.1 (ZooKeeper mode): the same requests to a broker that is not
# the controller get the very same response bytes.


class KafkaPair:
    """Two Apache Kafka 3.9.1 brokers on one ZooKeeper: broker 0 (started first, the controller) and
    broker 1 (``follower``)."""

    def __init__(self) -> None:
        from tests.ops.kafka_broker import KafkaZkBroker

        self.first = KafkaZkBroker()
        self.process: Any = None
        self.port = 0

    def start(self) -> KafkaPair:
        import subprocess

        from clients.devcluster import wait_for_port
        from clients.zookeeper_server import free_port
        from tests.kafka_dist import classpath

        first = self.first.start()
        self.port = free_port()
        props = {"broker.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "log.dirs": str(first.dir / "data-1"), "zookeeper.connect": f"{first.zk.connect_string}/kafka",
                 "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "5",
                 "group.initial.rebalance.delay.ms": "0"}
        cfg = first.dir / "server-1.properties"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", *first.jvm_options, "-cp", classpath(), "kafka.Kafka", str(cfg)],
            stdout=open(first.dir / "kafka-1.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        wait_for_port("127.0.0.1", self.port, 120, self.process)
        with RawClient(self.follower) as raw:
            wait_until(lambda: (lambda md: md.controller_id == 0 and len(md.brokers) == 2)(metadata(raw)), 120,
                       "Kafka broker 1 to see broker 0 as the controller")
        return self

    @property
    def follower(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except Exception:
                self.process.kill()
                self.process.wait()
        self.first.stop()


def refused_requests(topic: str) -> list[tuple[str, int, int, dict[str, Any]]]:
    """(what, api key, version, fields): controller requests, each with topics that exist and do not,
    named twice, illegal or reserved."""
    el, ar = request_type(ApiKey.ELECT_LEADERS), request_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
    lr = request_type(ApiKey.LIST_PARTITION_REASSIGNMENTS)
    names = [topic, "nc-missing", topic, "illegal name!", "__cluster_metadata"]

    def creatable(n: str) -> Any:
        return _CT.CreatableTopic(name=n, num_partitions=2, replication_factor=1, assignments=[],
                                  configs=[_CT.CreatableTopicConfig(name="retention.ms", value="1000")])

    out: list[tuple[str, int, int, dict[str, Any]]] = []
    for v in range(8):
        out.append((f"CreateTopics v{v}", ApiKey.CREATE_TOPICS, v,
                    {"timeout_ms": 5000, "validate_only": v >= 1, "topics": [creatable(n) for n in names]}))
    for v in range(6):
        out.append((f"DeleteTopics v{v}", ApiKey.DELETE_TOPICS, v, {"timeout_ms": 5000, "topic_names": names}))
    out.append(("DeleteTopics v6", ApiKey.DELETE_TOPICS, 6, {"timeout_ms": 5000, "topics": [
        _DT.DeleteTopicState(name=topic, topic_id=uuid.UUID(int=0)),
        _DT.DeleteTopicState(name=None, topic_id=uuid.UUID("7f8e3c5a-1b2d-4e6f-8a9b-0c1d2e3f4a5b"))]}))
    for v in range(4):
        out.append((f"CreatePartitions v{v}", ApiKey.CREATE_PARTITIONS, v, {
            "timeout_ms": 5000, "validate_only": False,
            "topics": [_CP.CreatePartitionsTopic(name=topic, count=4, assignments=None)]}))
    for v in range(3):
        out.append((f"ElectLeaders v{v}", ApiKey.ELECT_LEADERS, v, {
            "election_type": 0, "timeout_ms": 5000,
            "topic_partitions": [el.TopicPartitions(topic=topic, partitions=[0])]}))
    out.append(("AlterPartitionReassignments v0", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 5000, "topics": [ar.ReassignableTopic(name=topic, partitions=[
            ar.ReassignablePartition(partition_index=0, replicas=[0, 1])])]}))
    out.append(("ListPartitionReassignments v0", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                {"timeout_ms": 5000, "topics": None}))
    out.append(("ListPartitionReassignments v0, named", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                {"timeout_ms": 5000, "topics": [lr.ListPartitionReassignmentsTopics(name=topic, partition_indexes=[0])]}))
    us = request_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    out.append(("AlterUserScramCredentials v0", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [us.ScramCredentialDeletion(name="nc-b", mechanism=1)],
        "upsertions": [us.ScramCredentialUpsertion(name=n, mechanism=1, iterations=4096, salt=b"s" * 16,
                                                   salted_password=b"p" * 32) for n in ("nc-b", "nc-a")]}))
    return out


def answers(bootstrap: str, requests: list[tuple[str, int, int, dict[str, Any]]]) -> dict[str, bytes]:
    from protocol.messages import encode_request, new_request

    out = {}
    with RawClient(bootstrap, client_id="nc-side-by-side") as raw:
        for cid, (what, api_key, version, fields) in enumerate(requests, 1):
            raw.send_frame(encode_request(api_key, version, cid, "nc-side-by-side", new_request(api_key, **fields)))
            out[what] = raw.recv_frame()
    return out


@pytest.mark.slow
def test_refusals_are_kafkas_byte_for_byte(cluster: Any) -> None:
    """Every controller request above, sent to a broker that is not the controller of a kafkette cluster
    and of an Apache Kafka 3.9.1 cluster (the same topic existing on both): the same response bytes."""
    controller, other = roles(cluster)
    topic = unique("nc-same")
    kafka = KafkaPair()
    try:
        kafka.start()
        for bootstrap, on in ((controller.bootstrap, "kafkette"), (kafka.first.bootstrap, "Kafka")):
            with RawClient(bootstrap) as raw:
                assert [t.error_code for t in create_topics(raw, 7, topic, partitions=2, replication=1).topics] == \
                    [0], on
        for bootstrap in (other.bootstrap, kafka.follower):
            with RawClient(bootstrap) as raw:
                wait_until(lambda raw=raw: raw.leaders(topic) == 2, 60, f"{bootstrap} to know {topic}")
        requests = refused_requests(topic)
        theirs = answers(kafka.follower, requests)
        ours = answers(other.bootstrap, requests)
        from protocol.messages import decode_response

        differ = {what: (decode_response(api_key, version, theirs[what])[1], decode_response(api_key, version,
                                                                                          ours[what])[1])
                  for what, api_key, version, _ in requests if theirs[what] != ours[what]}
        assert differ == {}, "\n".join(f"{w}:\n  Kafka:    {a}\n  kafkette: {b}" for w, (a, b) in differ.items())
        assert len(theirs) == len(requests)
    finally:
        kafka.stop()
