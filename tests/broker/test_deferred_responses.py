"""A produce that only waits for acks=all hands its wait back to the connection
(broker/deferred_response.py): the connection reads and handles the next requests meanwhile, and
writes every answer in request order.

The first tests drive a real ``Connection`` over a socket pair with a handler whose deferred answers
the test completes by hand (tests/security/test_tls_deferred_responses.py does the same over TLS). Two
run a 2-broker cluster: with the follower stopped, three pipelined acks=all produces on one connection
(idempotent, then transactional) are all appended before any is answered, and the answers come back in
order once the follower fetches them. The last three count the connection's sends: answers made
together leave in one, and a fetch-like answer's header waits in the socket for its file data.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
from collections.abc import Callable
from typing import Any

import uvloop

from broker.connection import CloseConnection, Connection, Parts
from broker.deferred_response import DeferredResponse
from broker.request_queue import RequestPermits
from protocol.api_versions import ApiKey
from protocol.messages import decode_response, encode_request, new_request, request_type
from protocol.records import NewRecord, build_batch
from tests.cluster.helpers import Admin, cluster_options, unique
from tests.integration.helpers import RawClient, wait_until
from tests.txn.ctp import read_all
from tests.txn.test_txn_protocol import Txn


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Scripted:
    """A handler: ``D<n>`` is answered later (when the test sets ``release[n]``), ``P<n>`` at once,
    ``C`` closes the connection. Every request handled is logged, every deferred wait that was
    cancelled too."""

    def __init__(self) -> None:
        self.handled: list[bytes] = []
        self.release: dict[bytes, asyncio.Future[None]] = {}
        self.cancelled: list[bytes] = []

    async def __call__(self, conn: Connection, frame: memoryview) -> Parts | DeferredResponse | None:
        payload = bytes(frame)
        self.handled.append(payload)
        if payload == b"C":
            raise CloseConnection()
        if payload.startswith(b"D"):
            fut = self.release[payload] = asyncio.get_running_loop().create_future()
            return DeferredResponse(self._later(payload, fut))
        return [_frame(payload)]

    async def _later(self, payload: bytes, fut: asyncio.Future[None]) -> Parts:
        try:
            await fut
        except asyncio.CancelledError:
            self.cancelled.append(payload)
            raise
        return [_frame(payload)]


async def _until(cond: Callable[[], bool], what: str) -> None:
    for _ in range(20_000):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"timed out waiting for {what}")


async def _read_frames(client: socket.socket, n: int) -> list[bytes]:
    loop = asyncio.get_running_loop()
    buf = b""
    out: list[bytes] = []
    while len(out) < n:
        chunk = await loop.sock_recv(client, 65536)
        if not chunk:
            raise AssertionError(f"connection closed after {out}")
        buf += chunk
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
            size = struct.unpack(">i", buf[:4])[0]
            out.append(buf[4:4 + size])
            buf = buf[4 + size:]
    return out


def _nothing_to_read(client: socket.socket) -> bool:
    try:
        client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def _run(scenario: Callable[[socket.socket, Connection, Scripted, RequestPermits], Any],
         handler: Scripted | None = None) -> Any:
    scripted = handler or Scripted()

    async def main() -> Any:
        with socket.create_server(("127.0.0.1", 0)) as server:
            client = socket.create_connection(server.getsockname())
            accepted, _ = server.accept()
        client.setblocking(False)
        permits = RequestPermits(1 << 20)
        conn = Connection(accepted, scripted, max_request_bytes=1 << 20, listener="PLAINTEXT", permits=permits)
        task = asyncio.ensure_future(conn.serve())
        try:
            return await scenario(client, conn, scripted, permits)
        finally:
            client.close()
            await asyncio.wait([task], timeout=30)
            assert task.done()

    return uvloop.run(main())


def test_requests_after_a_deferred_one_are_handled_at_once_and_answered_in_order() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"D1", b"P2", b"D3", b"P4")))
        await _until(lambda: len(h.handled) == 4, "all four requests handled")
        assert h.handled == [b"D1", b"P2", b"D3", b"P4"]
        assert _nothing_to_read(client), "an answer went out ahead of the deferred first one"
        assert conn.busy
        h.release[b"D3"].set_result(None)  # the later one is ready first: it still waits for D1
        for _ in range(10):
            await asyncio.sleep(0)
        assert _nothing_to_read(client)
        h.release[b"D1"].set_result(None)
        assert await _read_frames(client, 4) == [b"D1", b"P2", b"D3", b"P4"]
        await _until(lambda: not conn.busy, "the queue to empty")
        # Without a deferred answer waiting, answers go out directly again.
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"P5"))
        assert await _read_frames(client, 1) == [b"P5"]

    _run(scenario)


def test_at_most_five_answers_wait_and_the_next_request_stays_in_the_socket() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, permits: RequestPermits) -> None:
        sent = [b"D1"] + [b"P%d" % i for i in range(2, 9)]
        await asyncio.get_running_loop().sock_sendall(client, b"".join(_frame(p) for p in sent))
        await _until(lambda: len(h.handled) == 5, "five requests handled")
        for _ in range(50):
            await asyncio.sleep(0)
        assert h.handled == sent[:5], "a sixth request was read while five answers waited"
        assert permits.in_flight == 5  # each waiting answer keeps its request's permit
        h.release[b"D1"].set_result(None)
        assert await _read_frames(client, 8) == sent
        await _until(lambda: permits.in_flight == 0, "every permit back")

    _run(scenario)


def test_a_request_that_closes_the_connection_lets_the_answers_before_it_out_first() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(client, _frame(b"D1") + _frame(b"P2") + _frame(b"C") + _frame(b"P4"))
        await _until(lambda: b"C" in h.handled, "the closing request handled")
        h.release[b"D1"].set_result(None)
        assert await _read_frames(client, 2) == [b"D1", b"P2"]
        assert await loop.sock_recv(client, 1) == b"", "the connection stayed open"
        assert h.handled == [b"D1", b"P2", b"C"]

    _run(scenario)


def test_a_closing_connection_waits_for_its_queued_answers_only_while_the_client_stays() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, permits: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"D1") + _frame(b"C"))
        await _until(lambda: b"C" in h.handled, "the closing request handled")
        for _ in range(10):
            await asyncio.sleep(0)
        assert not conn.closed, "the answer queued before the closing request was not waited for"
        client.close()  # the client leaves: the wait for D1 ends with the connection
        await _until(lambda: conn.closed, "the connection closed")
        await _until(lambda: h.cancelled == [b"D1"], "the deferred wait cancelled")
        assert permits.in_flight == 0

    _run(scenario)


def test_a_client_that_leaves_stops_the_deferred_work_and_gives_the_permits_back() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, permits: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, _frame(b"D1") + _frame(b"P2"))
        await _until(lambda: len(h.handled) == 2, "both requests handled")
        assert permits.in_flight == 2
        client.close()
        await _until(lambda: conn.closed, "the connection closed")
        await _until(lambda: h.cancelled == [b"D1"], "the deferred wait cancelled")
        assert permits.in_flight == 0
        assert not conn.busy

    _run(scenario)


def _produce_frame(cid: int, topic: str, batch: bytes, transactional_id: str | None = None) -> bytes:
    mt = request_type(ApiKey.PRODUCE)
    body = new_request(ApiKey.PRODUCE, transactional_id=transactional_id, acks=-1, timeout_ms=60_000, topic_data=[
        mt.TopicProduceData(name=topic, partition_data=[mt.PartitionProduceData(index=0, records=batch)])])
    return encode_request(ApiKey.PRODUCE, 9, cid, "pipelined", body)


def _log_end_offset(raw: RawClient, topic: str, replica_id: int) -> int:
    """The leader's LEO, as it answers a replica's ListOffsets (a consumer's would be the HW)."""
    mt = request_type(ApiKey.LIST_OFFSETS)
    r = raw.request(ApiKey.LIST_OFFSETS, 7, replica_id=replica_id, isolation_level=0, topics=[
        mt.ListOffsetsTopic(name=topic, partitions=[
            mt.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    p = r.topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def _pipeline_with_the_follower_stopped(cluster: Any, topic: str, leader: int, frames: list[bytes],
                                        start: int) -> list[Any]:
    """Send ``frames`` (acks=all produces of one batch of one record each) back to back on one
    connection to the leader while the only follower is stopped; check they are all appended before
    any is answered; let the follower go on; return the answers' partition responses, in order."""
    follower = 1 - leader
    pid = cluster.brokers[follower].process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        with RawClient(cluster.brokers[leader].bootstrap, timeout=60) as producer, \
                RawClient(cluster.brokers[leader].bootstrap) as probe:
            producer.send_frame(b"".join(frames))
            # All are in the leader's log while the first still waits for the follower: a connection
            # answering one request at a time would have read only the first.
            wait_until(lambda: _log_end_offset(probe, topic, follower) == start + len(frames), 30,
                       "the pipelined batches appended")
            producer.sock.setblocking(False)
            try:
                producer.sock.recv(1, socket.MSG_PEEK)
                raise AssertionError("a produce was answered before the follower had its batches")
            except BlockingIOError:
                pass
            producer.sock.setblocking(True)
            os.kill(pid, signal.SIGCONT)
            answers = [decode_response(ApiKey.PRODUCE, 9, producer.recv_frame()) for _ in frames]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [cid for cid, _ in answers] == list(range(1, len(frames) + 1))
    return [body.responses[0].partition_responses[0] for _, body in answers]


def _two_brokers(cluster_factory: Callable[..., Any], prefix: str) -> tuple[Any, str, int]:
    # The follower is stopped for a moment: neither its ZooKeeper session nor its ISR place may lapse.
    cluster = cluster_factory(2, **cluster_options(**{
        "replica.lag.time.max.ms": "60000", "zookeeper.session.timeout.ms": "30000",
        "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1"}))
    topic = unique(prefix)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic, 1, 2, configs={"min.insync.replicas": "2"})
        leader = admin.describe(topic)[0]["leader"]
    return cluster, topic, leader


def test_pipelined_acks_all_produces_are_appended_while_the_first_waits_for_the_follower(
        cluster_factory: Callable[..., Any]) -> None:
    cluster, topic, leader = _two_brokers(cluster_factory, "pipelined-acks")
    with RawClient(cluster.brokers[leader].bootstrap) as raw:
        wait_until(lambda: raw.produce(topic, 0, build_batch([(None, b"warm")]), acks=-1).error_code == 0, 30,
                   "a first acks=all produce to succeed")
    frames = [_produce_frame(cid, topic, build_batch([(None, b"v%d" % cid)])) for cid in (1, 2, 3)]
    parts = _pipeline_with_the_follower_stopped(cluster, topic, leader, frames, start=1)
    assert [(p.error_code, p.base_offset) for p in parts] == [(0, 1), (0, 2), (0, 3)]
    with RawClient(cluster.brokers[leader].bootstrap) as raw:
        values = [r.value for b in raw.fetch_batches(topic, 0) for r in b.records()]
    assert values == [b"warm", b"v1", b"v2", b"v3"]


def test_pipelined_transactional_produces_are_appended_and_answered_in_order(
        cluster_factory: Callable[..., Any]) -> None:
    cluster, topic, leader = _two_brokers(cluster_factory, "pipelined-txn")
    txn = Txn(cluster.bootstrap, unique("pipelined-txn"))
    try:
        assert txn.init().error_code == 0
        assert txn.add(topic, [0]) == 0
        # The first write opens the transaction on the leader (after KIP-890 verification with the
        # coordinator, which may be the broker about to be stopped); the next ones need no question.
        assert txn.produce(topic, 0, [b"t0"]).error_code == 0

        def batch(seq: int) -> bytes:
            return build_batch([NewRecord(None, b"t%d" % seq)], producer_id=txn.pid, producer_epoch=txn.epoch,
                               base_sequence=seq, is_transactional=True)

        frames = [_produce_frame(seq, topic, batch(seq), txn.txn_id) for seq in (1, 2, 3)]
        parts = _pipeline_with_the_follower_stopped(cluster, topic, leader, frames, start=1)
        assert [(p.error_code, p.base_offset) for p in parts] == [(0, 1), (0, 2), (0, 3)]
        assert txn.end(commit=True) == 0
    finally:
        txn.close()
    # The markers are written after EndTxn's answer: the LSO moves past the transaction soon after.
    wait_until(lambda: read_all(cluster.bootstrap, topic, "read_committed") == [b"t0", b"t1", b"t2", b"t3"], 30,
               "the committed transaction readable")


class _CountingSocket:
    """The connection's socket, with every send() recorded (its flags too)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sends: list[tuple[bytes, int]] = []

    def send(self, data: Any, flags: int = 0) -> int:
        n = self._sock.send(data, flags)
        self.sends.append((bytes(data[:n]), flags))
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def test_answers_completed_together_go_out_in_one_send_in_request_order() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        counting = _CountingSocket(conn.sock)
        conn.sock = counting  # type: ignore[assignment]
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"D1", b"D2", b"D3", b"P4")))
        await _until(lambda: len(h.handled) == 4, "all four requests handled")
        h.release[b"D3"].set_result(None)
        h.release[b"D2"].set_result(None)
        for _ in range(10):
            await asyncio.sleep(0)
        assert _nothing_to_read(client) and counting.sends == []
        h.release[b"D1"].set_result(None)  # the head is ready: everything behind it is too
        assert await _read_frames(client, 4) == [b"D1", b"D2", b"D3", b"P4"]
        assert counting.sends == [(b"".join(_frame(p) for p in (b"D1", b"D2", b"D3", b"P4")), 0)]
        await _until(lambda: not conn.busy, "the queue to empty")

        # An answer behind the head that is still waiting stops the run: the head goes alone, and
        # the rest follow once it is made.
        counting.sends.clear()
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"D5", b"D6", b"P7")))
        await _until(lambda: len(h.handled) == 7, "three more requests handled")
        h.release[b"D5"].set_result(None)
        assert await _read_frames(client, 1) == [b"D5"]
        h.release[b"D6"].set_result(None)
        assert await _read_frames(client, 2) == [b"D6", b"P7"]
        assert [data for data, _ in counting.sends] == [_frame(b"D5"), _frame(b"D6") + _frame(b"P7")]

    _run(scenario)


def test_a_failed_answer_behind_ready_ones_lets_them_out_and_then_closes() -> None:
    async def scenario(client: socket.socket, conn: Connection, h: Scripted, permits: RequestPermits) -> None:
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"D1", b"D2", b"D3")))
        await _until(lambda: len(h.handled) == 3, "all three requests handled")
        h.release[b"D3"].set_result(None)
        h.release[b"D2"].set_exception(RuntimeError("the deferred work failed"))
        for _ in range(10):
            await asyncio.sleep(0)
        h.release[b"D1"].set_result(None)
        assert await _read_frames(client, 1) == [b"D1"]
        assert await asyncio.get_running_loop().sock_recv(client, 1) == b"", "the connection stayed open"
        await _until(lambda: conn.closed and permits.in_flight == 0, "the connection closed, permits back")

    _run(scenario)


def test_bytes_before_a_file_region_are_held_for_its_data_and_regions_stop_a_coalesced_run(tmp_path: Any) -> None:
    from protocol.schema import FileRegion

    data_file = tmp_path / "segment"
    data_file.write_bytes(b"x" * 1000 + b"REGION-DATA" + b"y" * 1000)
    fd = os.open(data_file, os.O_RDONLY)

    class WithRegion(Scripted):
        async def _later(self, payload: bytes, fut: asyncio.Future[None]) -> Parts:
            await fut
            if payload == b"D2":  # a fetch-like answer: its size and header, then the file's bytes
                return [struct.pack(">i", 2 + 11) + b"H2", FileRegion(fd, 1000, 11)]
            return [_frame(payload)]

    async def scenario(client: socket.socket, conn: Connection, h: Scripted, _p: RequestPermits) -> None:
        counting = _CountingSocket(conn.sock)
        conn.sock = counting  # type: ignore[assignment]
        await asyncio.get_running_loop().sock_sendall(client, b"".join(
            _frame(p) for p in (b"D1", b"D2", b"P3")))
        await _until(lambda: len(h.handled) == 3, "all three requests handled")
        h.release[b"D2"].set_result(None)
        for _ in range(10):
            await asyncio.sleep(0)
        h.release[b"D1"].set_result(None)
        assert await _read_frames(client, 3) == [b"D1", b"H2REGION-DATA", b"P3"]
        assert counting.sends == [(_frame(b"D1"), 0), (struct.pack(">i", 13) + b"H2", socket.MSG_MORE),
                                  (_frame(b"P3"), 0)]

    try:
        _run(scenario, WithRegion())
    finally:
        os.close(fd)
