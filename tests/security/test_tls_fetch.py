"""A fetch of a multi-megabyte log over TLS returns the stored bytes exactly, read from the segment
files in chunks and written through TLS (no sendfile on a TLS connection)."""

from __future__ import annotations

import os
import socket
from typing import Any

from kafka import KafkaProducer

from protocol.records import iter_batches
from tests.integration.helpers import RawClient, create_topic, unique
from tests.security.conftest import Certs

RECORD = 256 * 1024
COUNT = 24  # 6 MiB


def test_multi_megabyte_fetch_over_tls_is_byte_identical(tls_broker_factory: Any, certs: Certs) -> None:
    broker = tls_broker_factory({"SSL": "SSL"}, certs.broker_ssl_props())
    topic = unique("tls-fetch")
    # Small segments: the fetch spans several segment files.
    create_topic(broker.bootstrap(), topic, configs={"segment.bytes": str(2 << 20)})
    values = [os.urandom(RECORD) for _ in range(COUNT)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap(), acks="all", max_request_size=2 * RECORD,
                             batch_size=RECORD)
    for v in values:
        producer.send(topic, value=v, partition=0)
    producer.flush(30)
    producer.close(5)

    def fetch_all(raw: RawClient) -> bytes:
        out = bytearray()
        offset = 0
        while True:
            pd = raw.fetch(topic, 0, offset, max_bytes=64 << 20, max_wait_ms=100)
            assert pd.error_code == 0, pd
            data = bytes(pd.records or b"")
            if not data:
                return bytes(out)
            out += data
            last = list(iter_batches(memoryview(data)))[-1]
            offset = last.base_offset + last.last_offset_delta + 1

    with RawClient(broker.bootstrap()) as plain:
        expected = fetch_all(plain)
    assert len(expected) >= COUNT * RECORD

    stats = broker.broker.stats
    tls_before, sendfile_before = stats.tls_file_bytes, stats.sendfile_bytes
    sock = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=30)
    raw = RawClient.__new__(RawClient)
    raw.sock, raw.client_id, raw._cid = certs.client_context().wrap_socket(sock, server_hostname="127.0.0.1"), "f", 0
    with raw:
        got = fetch_all(raw)
    assert got == expected, "the TLS fetch returned the bytes the plain fetch did"
    assert all(v in got for v in values)
    assert stats.tls_file_bytes - tls_before >= len(expected), "records were read from the files for TLS"
    assert stats.sendfile_bytes == sendfile_before, "nothing went through sendfile on the TLS connection"
