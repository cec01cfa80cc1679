"""Delegation tokens in ZooKeeper, laid out as Kafka 3.9's ZooKeeper mode lays them out.

* ``/delegation_token/tokens/<tokenId>`` holds a token's information (never its HMAC, which every
  broker recomputes from the secret key) as Kafka's DelegationTokenManagerZk.toJsonCompatibleMap
  writes it: ``{"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aalice","renewers":[...],
  "issueTimestamp":..,"maxTimestamp":..,"expiryTimestamp":..,"tokenId":".."}``, principals sanitized
  (URL-encoded) as Kafka's Sanitizer does.
* Every change writes a sequential notification ``/delegation_token/token_changes/token_change_<seq>``
  holding the token id; each broker watches them and re-reads the named token (gone: removed).

A Kafka 3.9 broker on the same ZooKeeper reads and writes the same znodes. All functions here block
(kazoo): run them off the event loop.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.security.delegation_token_cache import TokenInformation
from broker.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from controller.zk_client import KafkaZkClient

ROOT = "/delegation_token"
TOKENS = f"{ROOT}/tokens"
CHANGES = f"{ROOT}/token_changes"
CHANGE_PREFIX = "token_change_"
CURRENT_VERSION = 3
# Kafka's ZkNodeChangeNotificationListener deletes notifications older than this once processed.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def _sanitize(text: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encoding with '*' and ' ' encoded too."""
    return urllib.parse.quote(text, safe="-_.")


def _principal(text: str) -> KafkaPrincipal:
    return KafkaPrincipal.parse(urllib.parse.unquote(text))


def encode(info: TokenInformation) -> bytes:
    return json.dumps({
        "version": CURRENT_VERSION,
        "owner": _sanitize(str(info.owner)),
        "tokenRequester": _sanitize(str(info.token_requester)),
        "renewers": [_sanitize(str(r)) for r in info.renewers],
        "issueTimestamp": info.issue_timestamp,
        "maxTimestamp": info.max_timestamp,
        "expiryTimestamp": info.expiry_timestamp,
        "tokenId": info.token_id,
    }, separators=(",", ":")).encode()


def decode(data: bytes) -> TokenInformation | None:
    """Kafka's DelegationTokenManagerZk.fromBytes (versions 1-3; before 3 the requester is the owner)."""
    if not data:
        return None
    doc = json.loads(data)
    version = int(doc["version"])
    if not 0 < version <= CURRENT_VERSION:
        raise ValueError(f"unsupported delegation token znode version {version}")
    owner = _principal(doc["owner"])
    requester = _principal(doc["tokenRequester"]) if version >= 3 else owner
    return TokenInformation(doc["tokenId"], owner, requester, tuple(_principal(r) for r in doc["renewers"]),
                            int(doc["issueTimestamp"]), int(doc["maxTimestamp"]), int(doc["expiryTimestamp"]))


class ZkTokenStore:
    """Kafka's KafkaZkClient token functions through one broker's ZooKeeper session."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self._kz = zk.kazoo

    def _retry(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        # kazoo's retry re-runs the call after a connection loss (same session); errors pass through.
        return self._kz.retry(fn, *args, **kwargs)

    def create_paths(self) -> None:
        """Kafka's createDelegationTokenPaths."""
        self._retry(self._kz.ensure_path, CHANGES)
        self._retry(self._kz.ensure_path, TOKENS)

    def token_ids(self) -> list[str]:
        try:
            return list(self._retry(self._kz.get_children, TOKENS))
        except NoNodeError:
            return []

    def get(self, token_id: str) -> TokenInformation | None:
        try:
            data, _stat = self._retry(self._kz.get, f"{TOKENS}/{token_id}")
        except NoNodeError:
            return None
        return decode(data)

    def set_or_create(self, info: TokenInformation) -> None:
        path, data = f"{TOKENS}/{info.token_id}", encode(info)
        try:
            self._retry(self._kz.set, path, data)
        except NoNodeError:
            try:
                self._retry(self._kz.create, path, data, makepath=True)
            except NodeExistsError:  # created meanwhile by another broker: ours is the newer write
                self._retry(self._kz.set, path, data)

    def delete(self, token_id: str) -> None:
        try:
            self._retry(self._kz.delete, f"{TOKENS}/{token_id}")
        except NoNodeError:
            pass

    def notify(self, token_id: str) -> None:
        """Kafka's createTokenChangeNotification."""
        self._retry(self._kz.create, f"{CHANGES}/{CHANGE_PREFIX}", token_id.encode(), sequence=True, makepath=True)

    def changes(self, watch: Any) -> list[str]:
        """The notifications, oldest first, re-arming ``watch`` on their parent."""
        try:
            names = self._retry(self._kz.get_children, CHANGES, watch=watch)
        except NoNodeError:
            self._retry(self._kz.ensure_path, CHANGES)
            names = self._retry(self._kz.get_children, CHANGES, watch=watch)
        return sorted(n for n in names if n.startswith(CHANGE_PREFIX))

    def read_change(self, name: str) -> tuple[str | None, int]:
        """(token id, creation time in ms) of one notification; (None, 0) when it is gone."""
        try:
            data, stat = self._retry(self._kz.get, f"{CHANGES}/{name}")
        except NoNodeError:
            return None, 0
        return data.decode(), int(stat.ctime)

    def purge_changes(self, names: list[str]) -> None:
        """Delete notifications older than CHANGE_EXPIRATION_MS (as Kafka's listener does)."""
        cutoff = int(time.time() * 1000) - CHANGE_EXPIRATION_MS
        for name in names:
            try:
                stat = self._retry(self._kz.exists, f"{CHANGES}/{name}")
                if stat is not None and stat.ctime < cutoff:
                    self._retry(self._kz.delete, f"{CHANGES}/{name}")
            except NoNodeError:
                pass
