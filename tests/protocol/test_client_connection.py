"""The sans-I/O client connection: correlation, in-flight limit, negotiation, partial frames, auth steps.

The "broker" here is the protocol package's own server side (``decode_request`` and
``encode_response_bytes``), so every byte the state machine sends is parsed as a broker would.
"""

from __future__ import annotations

import pytest

from protocol.api_versions import SUPPORTED, ApiKey
from protocol.client_connection import (
    AuthenticationError,
    ClientConnection,
    ConnectionClosedError,
    ConnectionReady,
    ConnectionState,
    CorrelationMismatchError,
    InFlightLimitError,
    NoCommonVersionError,
    NotReadyError,
    Response,
    StepRequest,
)
from protocol.framing import FrameReader, size_prefix
from protocol.messages import (
    api_versions_body,
    decode_request,
    encode_response_bytes,
    new_request,
    new_response,
    response_type,
)

_AV = response_type(ApiKey.API_VERSIONS)


def requests_in(data: bytes) -> list:
    return [decode_request(f) for f in FrameReader().feed(data)]


def answer(req, body) -> bytes:
    return encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id, body)


def versions_body(ranges: dict[int, tuple[int, int]]):
    return _AV(error_code=0, throttle_time_ms=0, api_keys=[
        _AV.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items()])


def ready_connection(ranges: dict[int, tuple[int, int]] | None = None, **kwargs) -> ClientConnection:
    c = ClientConnection("test", **kwargs)
    c.start()
    (av,) = requests_in(c.data_to_send())
    assert av.api_key == ApiKey.API_VERSIONS and av.api_version == 3
    assert av.body.client_software_name == "kafkette"
    body = api_versions_body() if ranges is None else versions_body(ranges)
    events = c.receive_data(answer(av, body))
    assert events == [ConnectionReady()] and c.is_ready
    return c


def metadata_request():
    return new_request(ApiKey.METADATA, topics=[], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False)


def metadata_response(**kw):
    return new_response(ApiKey.METADATA, throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=kw.get("ctl", 1),
                        topics=[])


def test_responses_are_matched_to_requests_in_order() -> None:
    c = ready_connection()
    ids = [c.send(ApiKey.METADATA, metadata_request(), token=f"t{i}") for i in range(3)]
    assert len(set(ids)) == 3 and c.in_flight == 3
    reqs = requests_in(c.data_to_send())
    assert [r.header.correlation_id for r in reqs] == ids
    assert all(r.header.client_id == "test" for r in reqs)
    data = b"".join(answer(r, metadata_response(ctl=i)) for i, r in enumerate(reqs))
    events = c.receive_data(data)
    assert [(type(e), e.correlation_id, e.token, e.body.controller_id) for e in events] == [
        (Response, ids[i], f"t{i}", i) for i in range(3)]
    assert c.in_flight == 0


def test_a_mismatched_correlation_id_kills_the_connection() -> None:
    c = ready_connection()
    c.send(ApiKey.METADATA, metadata_request(), token="a")
    second = c.send(ApiKey.METADATA, metadata_request(), token="b")
    first_req, second_req = requests_in(c.data_to_send())
    # The broker answers the second request first: the stream is out of step.
    with pytest.raises(CorrelationMismatchError):
        c.receive_data(answer(second_req, metadata_response()))
    assert c.state is ConnectionState.CLOSED
    assert isinstance(c.close_reason, CorrelationMismatchError)
    assert [r.token for r in c.close()] == ["a", "b"]  # never answered: the wrapper fails them
    assert c.close() == []  # each reported once
    with pytest.raises(ConnectionClosedError):
        c.send(ApiKey.METADATA, metadata_request())
    with pytest.raises(ConnectionClosedError):
        c.receive_data(answer(first_req, metadata_response()))
    assert second != first_req.header.correlation_id


def test_an_unsolicited_response_kills_the_connection() -> None:
    c = ready_connection()
    with pytest.raises(CorrelationMismatchError):
        c.receive_data(size_prefix(4) + (7).to_bytes(4, "big"))
    assert c.closed


def test_close_returns_the_requests_that_will_never_be_answered() -> None:
    c = ready_connection()
    for t in "xyz":
        c.send(ApiKey.METADATA, metadata_request(), token=t)
    lost = c.close(ConnectionError("reset"))
    assert [r.token for r in lost] == ["x", "y", "z"]
    assert c.closed and c.data_to_send() == b""


def test_in_flight_limit() -> None:
    c = ready_connection(max_in_flight=2)
    c.send(ApiKey.METADATA, metadata_request())
    c.send(ApiKey.METADATA, metadata_request())
    assert not c.can_send
    with pytest.raises(InFlightLimitError):
        c.send(ApiKey.METADATA, metadata_request())
    # acks=0 produce is never answered, so it takes no slot.
    produce = new_request(ApiKey.PRODUCE, transactional_id=None, acks=0, timeout_ms=100, topic_data=[])
    c.send(ApiKey.PRODUCE, produce, expect_response=False)
    assert c.in_flight == 2
    reqs = requests_in(c.data_to_send())
    assert [r.api_key for r in reqs] == [ApiKey.METADATA, ApiKey.METADATA, ApiKey.PRODUCE]
    c.receive_data(answer(reqs[0], metadata_response()))
    assert c.can_send and c.in_flight == 1
    c.send(ApiKey.METADATA, metadata_request())


def test_requests_wait_for_negotiation() -> None:
    c = ClientConnection("test")
    c.start()
    assert c.state is ConnectionState.NEGOTIATING
    with pytest.raises(NotReadyError):
        c.send(ApiKey.METADATA, metadata_request())


def test_version_negotiation_picks_the_highest_common_version() -> None:
    ours_meta = SUPPORTED[ApiKey.METADATA]
    c = ready_connection({ApiKey.METADATA: (0, 99), ApiKey.FETCH: (0, 7), ApiKey.PRODUCE: (3, 9),
                          ApiKey.LIST_OFFSETS: (50, 60)}, version_caps={ApiKey.PRODUCE: 8})
    assert c.version(ApiKey.METADATA) == ours_meta[1]  # the broker is newer: our maximum
    assert c.version(ApiKey.FETCH) == 7  # the broker is older: its maximum
    assert c.version(ApiKey.PRODUCE) == 8  # capped by the caller's layout
    assert c.version(ApiKey.METADATA, cap=4) == 4
    with pytest.raises(NoCommonVersionError):
        c.version(ApiKey.LIST_OFFSETS)  # disjoint ranges
    with pytest.raises(NoCommonVersionError):
        c.version(ApiKey.DELETE_TOPICS)  # the broker does not have it
    assert not c.supports(ApiKey.DELETE_TOPICS)
    c.send(ApiKey.FETCH, new_request(ApiKey.FETCH, replica_id=-1, max_wait_ms=0, min_bytes=1, topics=[]))
    (req,) = requests_in(c.data_to_send())
    assert req.api_version == 7


def test_api_versions_falls_back_when_the_broker_is_older() -> None:
    c = ClientConnection("test")
    c.start()
    (av,) = requests_in(c.data_to_send())
    # An older broker answers UNSUPPORTED_VERSION with a v0 body naming its ApiVersions range.
    old = _AV(error_code=35, api_keys=[_AV.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=0, max_version=2)])
    assert c.receive_data(encode_response_bytes(ApiKey.API_VERSIONS, 0, av.header.correlation_id, old)) == []
    (retry,) = requests_in(c.data_to_send())
    assert retry.api_key == ApiKey.API_VERSIONS and retry.api_version == 2
    assert c.receive_data(answer(retry, versions_body({ApiKey.METADATA: (0, 5)}))) == [ConnectionReady()]
    assert c.version(ApiKey.METADATA) == 5


def test_pinned_versions_skip_api_versions() -> None:
    c = ClientConnection("broker-1", negotiate_versions=False)
    assert c.start() == [ConnectionReady()]
    assert c.data_to_send() == b""
    c.send(ApiKey.UPDATE_METADATA, new_request(ApiKey.UPDATE_METADATA, controller_id=1, controller_epoch=1,
                                               broker_epoch=1), version=8)
    (req,) = requests_in(c.data_to_send())
    assert (req.api_key, req.api_version) == (ApiKey.UPDATE_METADATA, 8)


def test_partial_frames_byte_by_byte() -> None:
    c = ready_connection()
    ids = [c.send(ApiKey.METADATA, metadata_request(), token=i) for i in range(2)]
    reqs = requests_in(c.data_to_send())
    data = b"".join(answer(r, metadata_response(ctl=7)) for r in reqs)
    events = []
    for i in range(len(data)):
        events += c.receive_data(data[i:i + 1])
        if i < len(data) - 1:
            assert len(events) < 2
    assert [e.correlation_id for e in events] == ids
    assert c.pending_bytes == 0


def test_receiving_into_the_connection_buffer() -> None:
    """The BufferedProtocol path: bytes written into get_buffer(), large frames filled in place."""
    c = ready_connection()
    cid = c.send(ApiKey.METADATA, metadata_request())
    (req,) = requests_in(c.data_to_send())
    big_cluster_id = "x" * 200_000  # bigger than the scratch buffer: the frame gets its own buffer
    data = encode_response_bytes(req.api_key, req.api_version, req.header.correlation_id, new_response(
        ApiKey.METADATA, throttle_time_ms=0, brokers=[], cluster_id=big_cluster_id, controller_id=3, topics=[]))
    events, pos = [], 0
    while pos < len(data):
        buf = c.get_buffer()
        n = min(len(buf), len(data) - pos, 1000)
        buf[:n] = data[pos:pos + n]
        pos += n
        events += c.buffer_updated(n)
    (ev,) = events
    assert ev.correlation_id == cid and ev.body.cluster_id == big_cluster_id


class ScriptedSasl:
    """A SASL/PLAIN-shaped step: SaslHandshake, then one SaslAuthenticate round."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[int] = []

    def start(self, conn: ClientConnection) -> StepRequest | None:
        return StepRequest(ApiKey.SASL_HANDSHAKE, new_request(ApiKey.SASL_HANDSHAKE, mechanism="PLAIN"), version=1)

    def on_response(self, conn: ClientConnection, api_key: int, body) -> StepRequest | None:
        self.seen.append(api_key)
        if body.error_code:
            raise AuthenticationError(f"error {body.error_code}")
        if api_key == ApiKey.SASL_HANDSHAKE:
            return StepRequest(ApiKey.SASL_AUTHENTICATE,
                               new_request(ApiKey.SASL_AUTHENTICATE, auth_bytes=b"\0alice\0secret"))
        return None


def test_auth_steps_run_after_api_versions_and_before_ready() -> None:
    step = ScriptedSasl()
    c = ClientConnection("test", auth_steps=[step])
    c.start()
    (av,) = requests_in(c.data_to_send())
    assert c.receive_data(answer(av, api_versions_body())) == []
    assert c.state is ConnectionState.AUTHENTICATING
    with pytest.raises(NotReadyError):
        c.send(ApiKey.METADATA, metadata_request())
    (hs,) = requests_in(c.data_to_send())
    assert (hs.api_key, hs.api_version, hs.body.mechanism) == (ApiKey.SASL_HANDSHAKE, 1, "PLAIN")
    assert c.receive_data(answer(hs, new_response(ApiKey.SASL_HANDSHAKE, error_code=0, mechanisms=["PLAIN"]))) == []
    (auth,) = requests_in(c.data_to_send())
    assert auth.api_key == ApiKey.SASL_AUTHENTICATE and auth.api_version == c.version(ApiKey.SASL_AUTHENTICATE)
    assert bytes(auth.body.auth_bytes) == b"\0alice\0secret"
    done = c.receive_data(answer(auth, new_response(ApiKey.SASL_AUTHENTICATE, error_code=0, error_message=None,
                                                    auth_bytes=b"", session_lifetime_ms=0)))
    assert done == [ConnectionReady()] and c.is_ready
    assert step.seen == [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]


def test_a_failed_auth_step_closes_the_connection() -> None:
    c = ClientConnection("test", negotiate_versions=False, auth_steps=[ScriptedSasl()])
    assert c.start() == []
    (hs,) = requests_in(c.data_to_send())
    with pytest.raises(AuthenticationError):
        c.receive_data(answer(hs, new_response(ApiKey.SASL_HANDSHAKE, error_code=33, mechanisms=["SCRAM-SHA-512"])))
    assert c.closed


def test_an_undecodable_response_closes_the_connection() -> None:
    c = ready_connection()
    c.send(ApiKey.METADATA, metadata_request())
    (req,) = requests_in(c.data_to_send())
    corr = req.header.correlation_id.to_bytes(4, "big")
    with pytest.raises(Exception) as info:
        c.receive_data(size_prefix(6) + corr + b"\x01\x02")
    assert c.closed and info.value is c.close_reason
