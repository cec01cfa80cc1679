"""SCRAM (RFC 5802 / RFC 7677) as Kafka uses it: the key derivations, the stored credential format and
the four messages. Shared by the broker's SASL server and the clients' SASL step; no I/O.

Kafka's ScramFormatter takes a password's UTF-8 bytes as they are (no SASLprep), and stores a
credential in ZooKeeper (``/config/users/<user>``, key ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``) as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

__all__ = [
    "MAX_ITERATIONS", "MECHANISMS", "MIN_ITERATIONS", "ClientFinalMessage", "ClientFirstMessage", "ScramCredential",
    "ScramError", "ServerFinalMessage", "ServerFirstMessage", "auth_message", "client_key", "client_proof",
    "client_signature", "credential_from_password", "hash_of", "hmac_of", "new_nonce", "salted_password",
    "server_key", "server_signature", "stored_key", "verify_client_proof", "xor",
]

# Mechanism name -> hashlib name.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations for both mechanisms
MAX_ITERATIONS = 16384  # what AlterUserScramCredentials accepts at most


class ScramError(ValueError):
    """A malformed SCRAM message or credential."""


def _digest(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"Unsupported SCRAM mechanism {mechanism}") from None


def hash_of(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_digest(mechanism), data).digest()


def hmac_of(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _digest(mechanism)).digest()


def xor(a: bytes, b: bytes) -> bytes:
    if len(a) != len(b):
        raise ScramError("Argument arrays must be of the same length")
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_digest(mechanism), password.encode("utf-8"), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_of(mechanism, salted, b"Client Key")


def stored_key(mechanism: str, key_of_client: bytes) -> bytes:
    return hash_of(mechanism, key_of_client)


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_of(mechanism, salted, b"Server Key")


def client_signature(mechanism: str, key_stored: bytes, message: bytes) -> bytes:
    return hmac_of(mechanism, key_stored, message)


def client_proof(mechanism: str, salted: bytes, message: bytes) -> bytes:
    """ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)."""
    ck = client_key(mechanism, salted)
    return xor(ck, client_signature(mechanism, stored_key(mechanism, ck), message))


def server_signature(mechanism: str, key_of_server: bytes, message: bytes) -> bytes:
    return hmac_of(mechanism, key_of_server, message)


def verify_client_proof(mechanism: str, key_stored: bytes, message: bytes, proof: bytes) -> bool:
    """Recover ClientKey from the proof and check H(ClientKey) == StoredKey (constant time)."""
    signature = client_signature(mechanism, key_stored, message)
    if len(proof) != len(signature):
        return False
    recovered = xor(proof, signature)
    return hmac.compare_digest(hash_of(mechanism, recovered), key_stored)


def new_nonce() -> str:
    """A printable random nonce (no ',' so it can sit in a message attribute)."""
    return base64.b64encode(os.urandom(24)).decode("ascii").replace("=", "")


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise ScramError(f"Invalid {what}: not base64") from None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def format(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        attrs = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(_unb64(attrs["salt"], "salt"), _unb64(attrs["stored_key"], "stored_key"),
                       _unb64(attrs["server_key"], "server_key"), int(attrs["iterations"]))
        except (KeyError, ValueError) as e:
            raise ScramError(f"Invalid SCRAM credential: {e}") from None


def credential_from_password(mechanism: str, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredential(salt, stored_key(mechanism, client_key(mechanism, salted)),
                           server_key(mechanism, salted), iterations)


# -- messages ---------------------------------------------------------------------------------------


_EXTENSION = re.compile(r"([A-Za-z]+)=([\x01-\x2B\x2D-\x7F]+)")


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ScramError(f"Invalid SCRAM {what} message: '{text}'")
        out.append((item[0], item[2:]))
    return out


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    if any(part[:2] not in ("3D", "2C") for part in name.split("=")[1:]):
        raise ScramError(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


@dataclass(frozen=True, slots=True)
class ClientFirstMessage:
    username: str
    nonce: str
    authorization_id: str = ""
    extensions: tuple[tuple[str, str], ...] = ()  # e.g. ("tokenauth", "true")

    @property
    def gs2_header(self) -> str:
        return f"n,{'a=' + _escape(self.authorization_id) if self.authorization_id else ''},"

    @property
    def bare(self) -> str:
        ext = "".join(f",{k}={v}" for k, v in self.extensions)
        return f"n={_escape(self.username)},r={self.nonce}{ext}"

    def encode(self) -> bytes:
        return (self.gs2_header + self.bare).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> ClientFirstMessage:
        text = data.decode("utf-8", errors="strict")
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            # "p" (channel binding) is not offered by Kafka brokers
            raise ScramError(f"Invalid SCRAM client first message format: '{text}'")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise ScramError(f"Invalid SCRAM client first message format: '{text}'")
        items = parts[2].split(",")
        attrs = _attributes(",".join(items[:2]), "client first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise ScramError(f"Invalid SCRAM client first message format: '{text}'")
        # Kafka's ScramMessages: after the nonce come extensions ALPHA+=VALUE (e.g. tokenauth=true).
        extensions = []
        for item in items[2:]:
            match = _EXTENSION.fullmatch(item)
            if match is None:
                raise ScramError(f"Invalid SCRAM client first message format: '{text}'")
            extensions.append((match.group(1), match.group(2)))
        return cls(_unescape(attrs[0][1]), attrs[1][1], _unescape(authzid[2:]) if authzid else "",
                   tuple(extensions))


@dataclass(frozen=True, slots=True)
class ServerFirstMessage:
    nonce: str  # client nonce + server nonce
    salt: bytes
    iterations: int

    def encode(self) -> bytes:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}".encode()

    @classmethod
    def decode(cls, data: bytes) -> ServerFirstMessage:
        text = data.decode("utf-8")
        attrs = dict(_attributes(text, "server first"))
        if "e" in attrs:
            raise ScramError(f"Server error: {attrs['e']}")
        try:
            return cls(attrs["r"], _unb64(attrs["s"], "salt"), int(attrs["i"]))
        except (KeyError, ValueError):
            raise ScramError(f"Invalid SCRAM server first message format: '{text}'") from None


@dataclass(frozen=True, slots=True)
class ClientFinalMessage:
    channel_binding: str  # base64 of the GS2 header
    nonce: str
    proof: bytes = b""

    @property
    def without_proof(self) -> str:
        return f"c={self.channel_binding},r={self.nonce}"

    def encode(self) -> bytes:
        return f"{self.without_proof},p={_b64(self.proof)}".encode()

    @classmethod
    def decode(cls, data: bytes) -> ClientFinalMessage:
        text = data.decode("utf-8")
        attrs = _attributes(text, "client final")
        keys = [k for k, _ in attrs]
        if keys[:2] != ["c", "r"] or keys[-1] != "p":
            raise ScramError(f"Invalid SCRAM client final message format: '{text}'")
        return cls(attrs[0][1], attrs[1][1], _unb64(attrs[-1][1], "proof"))


@dataclass(frozen=True, slots=True)
class ServerFinalMessage:
    server_signature: bytes = b""
    error: str | None = None

    def encode(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode()
        return f"v={_b64(self.server_signature)}".encode()

    @classmethod
    def decode(cls, data: bytes) -> ServerFinalMessage:
        text = data.decode("utf-8")
        attrs = dict(_attributes(text, "server final"))
        if "e" in attrs:
            return cls(error=attrs["e"])
        if "v" not in attrs:
            raise ScramError(f"Invalid SCRAM server final message format: '{text}'")
        return cls(_unb64(attrs["v"], "server signature"))


def auth_message(first: ClientFirstMessage, server_first: ServerFirstMessage, final: ClientFinalMessage) -> bytes:
    """AuthMessage = client-first-bare + "," + server-first + "," + client-final-without-proof."""
    return f"{first.bare},{server_first.encode().decode()},{final.without_proof}".encode()
