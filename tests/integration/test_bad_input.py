"""Bad input never takes the broker down: the offending connection is closed with one clear log line,
and every other client carries on."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import decode_response
from tests.integration.helpers import RawClient, create_topic, unique, wait_until


def _header(api_key: int, version: int, correlation_id: int = 7, flexible: bool = False) -> bytes:
    h = struct.pack(">hhih", api_key, version, correlation_id, 2) + b"it"
    return h + (b"\x00" if flexible else b"")


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# name -> (bytes to send, whether to close our side right after, what the broker's log line says)
CASES: dict[str, tuple[bytes, bool, str]] = {
    "garbage body": (_frame(_header(ApiKey.METADATA, 12, flexible=True) + b"\xff" * 12), False,
                     "invalid request: malformed api key 3 v12"),
    "unknown api key": (_frame(_header(9999, 0)), False, "invalid request: unsupported api key 9999 version 0"),
    "unknown api version": (_frame(_header(ApiKey.METADATA, 99)), False,
                            "invalid request: unsupported api key 3 version 99"),
    "huge frame": (struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64, False,
                   f"frame of {0x7FFFFFF0} bytes exceeds socket.request.max.bytes=104857600"),
    "http request": (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", False,
                     "exceeds socket.request.max.bytes"),
    "negative size": (struct.pack(">i", -5) + b"\x00" * 8, False, "negative frame size -5"),
    "disconnect mid-request": (struct.pack(">i", 100) + b"\x00\x03" + b"\x00" * 8, True,
                               "lost in the middle of a request: closed by peer after 10 of 100 bytes"),
    "disconnect mid-size-prefix": (b"\x00\x00", True,
                                   "lost in the middle of a request: closed by peer after 2 bytes of a size prefix"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_closes_only_that_connection(kafka_cluster: Any, case: str) -> None:
    payload, close_early, logged = CASES[case]
    bootstrap = kafka_cluster.bootstrap
    broker = kafka_cluster.brokers[0]
    topic = unique("bad-input")
    create_topic(bootstrap, topic, partitions=1)
    # Clients connected before the bad one, kept open through it.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send(topic, b"before").get(10)
    bystander = RawClient(bootstrap)
    assert bystander.leaders(topic) == 1

    host, port = bootstrap.rsplit(":", 1)
    bad = socket.create_connection((host, int(port)), timeout=10)
    local_host, local_port = bad.getsockname()[:2]
    peer = f"{local_host}:{local_port}"
    bad.sendall(payload)
    if close_early:
        bad.close()
    else:
        # The broker hangs up on us (recv sees EOF, or a reset if it closed with our bytes unread).
        try:
            assert bad.recv(65536) == b""
        except ConnectionResetError:
            pass
        bad.close()

    lines = wait_until(lambda: [ln for ln in broker.log_text().splitlines() if f"from {peer}" in ln], 10,
                       f"a broker log line about {peer}")
    time.sleep(0.2)  # a second line would come right after the first
    lines = [ln for ln in broker.log_text().splitlines() if f"from {peer}" in ln]
    assert len(lines) == 1, lines
    assert logged in lines[0], lines[0]
    assert "Traceback" not in broker.log_text()

    # The broker is up, and the clients that were connected carry on.
    assert broker.running
    assert bystander.leaders(topic) == 1
    producer.send(topic, b"after").get(10)
    producer.close(5)
    bystander.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        got.extend(m.value for msgs in consumer.poll(timeout_ms=200).values() for m in msgs)
    consumer.close()
    assert got == [b"before", b"after"]


def test_too_new_api_versions_is_answered_and_connection_kept(kafka_cluster: Any) -> None:
    """KIP-511: an ApiVersions request above our range gets error 35 and our ranges, not a hang-up."""
    with RawClient(kafka_cluster.bootstrap) as raw:
        raw.send_frame(_frame(_header(ApiKey.API_VERSIONS, 99, correlation_id=42, flexible=True) + b"\x00" * 3))
        cid, body = decode_response(ApiKey.API_VERSIONS, 0, raw.recv_frame())
        assert cid == 42 and body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == ApiKey.FETCH for k in body.api_keys)
        assert raw.leaders("__no_such_topic__") == 0  # the same connection still serves requests


def test_corrupt_batch_is_refused_and_connection_kept(kafka_cluster: Any) -> None:
    """A produce whose batch is garbage gets CORRUPT_MESSAGE on that partition; nothing is stored."""
    bootstrap = kafka_cluster.bootstrap
    topic = unique("corrupt")
    create_topic(bootstrap, topic, partitions=1)
    with RawClient(bootstrap) as raw:
        junk = b"\x00" * 16 + b"\x02" + b"\xab" * 80  # magic 2, then nonsense (bad CRC, bad lengths)
        r = raw.produce(topic, 0, junk)
        assert r.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), r
        assert raw.list_offset(topic, 0) == 0
        assert raw.leaders(topic) == 1
