"""Helpers for the integration tests: names, waiting, topics, and a raw wire-protocol client."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from protocol.records import iter_batches

T = TypeVar("T")


def unique(prefix: str) -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until(check: Callable[[], T], timeout: float, what: str | Callable[[], str], interval: float = 0.1) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    if callable(what):
        what = what()
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    """Create a topic with kafka-python's admin client and wait until every partition has a leader."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="it-admin")
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()
    wait_until(lambda: all_served(bootstrap, name, partitions), 15, f"leaders serving all partitions of {name}")


def all_served(bootstrap: str, topic: str, partitions: int) -> bool:
    """Whether the metadata names a leader for each of ``topic``'s partitions and each of those
    leaders answers ListOffsets for its partitions. The metadata can be ahead of a new partition's
    leader (see RawClient.leads); a test that produces right after creating a topic waits for both."""
    with RawClient(bootstrap) as raw:
        md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    address = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    by_leader: dict[int, list[int]] = {}
    for t in md.topics:
        if t.name == topic and t.error_code == 0:
            for p in t.partitions:
                if p.error_code != 0 or p.leader_id not in address:
                    return False
                by_leader.setdefault(p.leader_id, []).append(p.partition_index)
    if sum(len(ps) for ps in by_leader.values()) != partitions:
        return False
    for leader, indexes in by_leader.items():
        with RawClient(address[leader]) as raw:
            if not raw.serves(topic, indexes):
                return False
    return True


def controller_bootstrap(bootstrap: str, timeout: float = 30) -> str:
    """``host:port`` of the active controller, as Metadata names it. CreateTopics, DeleteTopics and
    CreatePartitions go there: any other broker answers them NOT_CONTROLLER, as Kafka does."""

    def ask() -> str | None:
        with RawClient(bootstrap) as raw:
            md = raw.request(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False,
                             include_topic_authorized_operations=False)
        return next((f"{b.host}:{b.port}" for b in md.brokers if b.node_id == md.controller_id), None)

    return wait_until(ask, timeout, f"a controller in the metadata of {bootstrap}")


class RawClient:
    """Requests and responses over a plain socket, encoded with kafkette's own protocol package."""

    def __init__(self, bootstrap: str, client_id: str = "it-raw", timeout: float = 15.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._cid = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        self._cid += 1
        self.send_frame(encode_request(api_key, version, self._cid, self.client_id, new_request(api_key, **fields)))
        cid, body = decode_response(api_key, version, self.recv_frame())
        assert cid == self._cid, f"correlation id {cid}, expected {self._cid}"
        return body

    # -- a few requests the tests need ---------------------------------------------------------------

    def leaders(self, topic: str) -> int:
        """How many partitions of ``topic`` have a leader (0 if the topic is unknown)."""
        md = self.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        for t in md.topics:
            if t.name == topic and t.error_code == 0:
                return sum(1 for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)
        return 0

    def init_producer_id(self) -> tuple[int, int]:
        r = self.request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=-1,
                         producer_id=-1, producer_epoch=-1)
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, partition: int, batch: bytes, acks: int = -1, version: int = 9,
                transactional_id: str | None = None) -> Any:
        """One batch to one partition; returns the partition's response."""
        mt = request_type(ApiKey.PRODUCE)
        body = self.request(ApiKey.PRODUCE, version, transactional_id=transactional_id, acks=acks, timeout_ms=10000,
                            topic_data=[mt.TopicProduceData(name=topic, partition_data=[
                                mt.PartitionProduceData(index=partition, records=batch)])])
        return body.responses[0].partition_responses[0]

    def _list_offset_answers(self, topic: str, partitions: list[int], timestamp: int) -> list[Any]:
        mt = request_type(ApiKey.LIST_OFFSETS)
        r = self.request(ApiKey.LIST_OFFSETS, 7, replica_id=-1, isolation_level=0, topics=[
            mt.ListOffsetsTopic(name=topic, partitions=[
                mt.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=timestamp)
                for i in partitions])])
        return [p for t in r.topics for p in t.partitions]

    def _list_offset_answer(self, topic: str, partition: int, timestamp: int) -> Any:
        return self._list_offset_answers(topic, [partition], timestamp)[0]

    def list_offset(self, topic: str, partition: int, timestamp: int = -1) -> int:
        p = self._list_offset_answer(topic, partition, timestamp)
        assert p.error_code == 0, p
        return p.offset

    def leads(self, topic: str, partition: int = 0) -> bool:
        """Whether this broker serves ``topic``-``partition`` as its leader. The metadata that names a
        new partition's leader can be ahead of that broker: until it has applied its LeaderAndIsr it
        answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER, which clients retry."""
        return self.serves(topic, [partition])

    def serves(self, topic: str, partitions: list[int]) -> bool:
        """Whether this broker serves all of ``partitions`` of ``topic`` as their leader (one request)."""
        answers = self._list_offset_answers(topic, partitions, -1)
        return len(answers) == len(partitions) and all(p.error_code == 0 for p in answers)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 8 << 20,
              max_wait_ms: int = 500) -> Any:
        """A consumer Fetch (v12, by topic name); returns the partition's data with ``records`` as bytes."""
        mt = request_type(ApiKey.FETCH)
        r = self.request(ApiKey.FETCH, 12, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                         max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1, topics=[
                             mt.FetchTopic(topic=topic, partitions=[
                                 mt.FetchPartition(partition=partition, current_leader_epoch=-1,
                                                   fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                                                   partition_max_bytes=max_bytes)])],
                         forgotten_topics_data=[], rack_id="")
        return r.responses[0].partitions[0]

    def fetch_batches(self, topic: str, partition: int, offset: int = 0) -> list[Any]:
        pd = self.fetch(topic, partition, offset)
        assert pd.error_code == 0, pd
        data = bytes(pd.records or b"")
        return list(iter_batches(memoryview(data)))


def _metadata_topic(name: str) -> Any:
    mt = request_type(ApiKey.METADATA)
    return mt.MetadataRequestTopic(name=name, topic_id=None)
