"""Handshake failures cost only the connection that failed: a client that never starts the handshake
is dropped after the handshake time limit, plaintext on a TLS port is refused with one log line per
interval, and the broker keeps serving TLS clients meanwhile."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import pytest

from broker.connection import limited_log
from tests.integration.helpers import wait_until
from tests.security.conftest import Certs
from tests.security.test_tls_clients import tls_request


def test_handshake_failures_close_only_their_connection(tls_broker_factory: Any, certs: Certs,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="broker.connection")
    # The limiter is per process: earlier tests' handshake failures must not use up this test's line.
    limited_log._window.pop("ssl-handshake", None)
    limited_log._suppressed.pop("ssl-handshake", None)
    # connections.max.idle.ms caps the handshake time limit: a silent client goes after ~1 s.
    broker = tls_broker_factory({"SSL": "SSL"}, {**certs.broker_ssl_props(), "connections.max.idle.ms": "1000"})
    port = broker.ports["SSL"]
    stats = broker.broker.stats
    failed_before = stats.failed_authentication

    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    # Plaintext Kafka requests on the TLS port, several times: refused, logged once.
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as plain:
            plain.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x03\x00\x00\x00\x01\x00\x00\x00\x00")
            try:
                answer = plain.recv(4096)
            except ConnectionResetError:
                answer = b""
            # EOF or a TLS alert record (content type 21), never a Kafka response.
            assert answer == b"" or answer[0] == 21, answer
    md, _ = tls_request(certs, port)
    assert [b.port for b in md.brokers] == [port], "TLS clients are served meanwhile"

    started = time.monotonic()
    assert silent.recv(1) == b"", "the silent client was disconnected"
    assert time.monotonic() - started < 9, "by the handshake time limit, not the idle sweep alone"
    silent.close()
    wait_until(lambda: stats.failed_authentication >= failed_before + 6, 10, "six failed handshakes counted")
    lines = [r.getMessage() for r in caplog.records if "Failed authentication with /127.0.0.1" in r.getMessage()]
    assert 1 <= len(lines) <= 2, lines  # rate-limited: one line per interval (plus the timed-out one)
    assert broker.thread.is_alive()
