"""The request decoder the broker actually runs: ``KafkaApis.decode`` (lenient at the end of the body).

``protocol.messages.decode_request`` is strict and is what the other protocol tests exercise; the
broker decodes with ``exact=False`` instead, because Kafka's generated readers ignore bytes after a
body's last field and librdkafka relies on it. These tests hold the production path to the same
standard for everything we advertise: every API and version round-trips, trailing bytes are ignored
(and only trailing bytes), and every truncation is a ``ProtocolError``, never another exception or
a half-decoded request.
"""

from __future__ import annotations

import random

import pytest

from broker.kafka_apis import KafkaApis
from protocol.api_versions import SUPPORTED, ApiKey
from protocol.exceptions import ProtocolError
from protocol.messages import decode_request, encode_request, request_type
from tests.protocol.test_fuzz import random_struct

SEED = 20261123
BODIES_PER_VERSION = 3

ADVERTISED = [(int(k), v) for k, (lo, hi, _name) in SUPPORTED.items() for v in range(lo, hi + 1)]


def _frame(key: int, version: int, body: object, client_id: str | None = "lenient") -> bytes:
    """A request frame as the broker's connection hands it over (no size prefix)."""
    return encode_request(key, version, 1234, client_id, body)[4:]  # type: ignore[arg-type]


def _lenient(frame: bytes) -> object:
    # The connection decodes from a writable buffer it owns; do the same.
    return KafkaApis.decode(memoryview(bytearray(frame)))


def _id(case: tuple[int, int]) -> str:
    key, version = case
    return f"{ApiKey(key).name}-v{version}"


@pytest.mark.parametrize("case", ADVERTISED, ids=[_id(c) for c in ADVERTISED])
def test_every_advertised_version_round_trips_through_the_lenient_decoder(case: tuple[int, int]) -> None:
    key, version = case
    rnd = random.Random(f"{SEED}-{key}-{version}")
    mt = request_type(key)
    for i in range(BODIES_PER_VERSION):
        body = mt() if i == 0 else random_struct(mt.root, version, rnd)
        client_id = None if i == 1 else "lenient"
        frame = _frame(key, version, body, client_id)
        req = _lenient(frame)
        assert (req.header.api_key, req.header.api_version) == (key, version)  # type: ignore[attr-defined]
        assert req.header.correlation_id == 1234 and req.header.client_id == client_id  # type: ignore[attr-defined]
        assert req.size == len(frame)  # type: ignore[attr-defined]
        # The same message as the strict decoder sees, and it encodes back to the very same bytes.
        assert req.body == decode_request(frame).body  # type: ignore[attr-defined]
        assert _frame(key, version, req.body, client_id) == frame  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", ADVERTISED, ids=[_id(c) for c in ADVERTISED])
def test_trailing_bytes_are_ignored(case: tuple[int, int]) -> None:
    key, version = case
    rnd = random.Random(f"{SEED}-trailing-{key}-{version}")
    mt = request_type(key)
    body = random_struct(mt.root, version, rnd)
    frame = _frame(key, version, body)
    expected = decode_request(frame).body
    for extra in (b"\x00", b"\x00\x00\x00", b"\xff" * 7, bytes(rnd.randrange(256) for _ in range(64))):
        req = _lenient(frame + extra)
        assert req.body == expected  # type: ignore[attr-defined]
        assert req.size == len(frame) + len(extra)  # type: ignore[attr-defined]
        with pytest.raises(ProtocolError, match="trailing"):
            decode_request(frame + extra)  # the strict decoder, for contrast


def test_librdkafka_metadata_all_topics_with_padded_null_array() -> None:
    # librdkafka 2.x writes Metadata v9+ "all topics" as a 4-byte placeholder where the compact
    # null array is one byte (0x00), so three zero bytes follow the body's last field.
    mt = request_type(ApiKey.METADATA)
    for version in range(9, SUPPORTED[ApiKey.METADATA][1] + 1):
        body = mt(topics=None, allow_auto_topic_creation=True)
        frame = _frame(ApiKey.METADATA, version, body, "rdkafka")
        req = _lenient(frame + b"\x00\x00\x00")
        assert req.body.topics is None and req.body.allow_auto_topic_creation  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", ADVERTISED, ids=[_id(c) for c in ADVERTISED])
def test_every_truncation_is_a_protocol_error(case: tuple[int, int]) -> None:
    key, version = case
    rnd = random.Random(f"{SEED}-truncated-{key}-{version}")
    mt = request_type(key)
    for body in (mt(), random_struct(mt.root, version, rnd)):
        frame = _frame(key, version, body)
        # Lenient only at the end: every field is still read, so no proper prefix decodes, header
        # included.
        for cut in range(len(frame)):
            with pytest.raises(ProtocolError):
                _lenient(frame[:cut])
