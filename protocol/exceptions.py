"""Exceptions raised by the sans-I/O protocol layer.

Every malformed input the decoders can meet surfaces as one ``ProtocolError`` (or a subclass), so a
server has one thing to catch and can turn it into an error response or a clean disconnect.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Bytes that do not form a valid Kafka message (truncated, bad varint, trailing garbage...).

    ``error_code`` is the Kafka error code a broker should answer with when it answers at all
    (INVALID_REQUEST = 42 by default; CORRUPT_MESSAGE = 2 for bad record batches).
    """

    error_code: int = 42

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class FrameTooLargeError(ProtocolError):
    """A size prefix that is negative or above ``socket.request.max.bytes``."""


class UnsupportedVersionError(ProtocolError):
    """A request for an API key or version this broker does not implement (UNSUPPORTED_VERSION)."""

    error_code = 35

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class CorruptRecordError(ProtocolError):
    """A record batch that fails validation (size fields, CRC, varints): CORRUPT_MESSAGE."""

    error_code = 2
