"""UpdateFeatures (57) as a ZooKeeper-mode Kafka 3.9 answers it: every update refused, with Kafka's reasons.

A 3.9 broker in ZooKeeper mode supports no finalized features (its ApiVersions lists none, and so does
ours), so its controller (``KafkaController.processFeatureUpdatesWithActiveController``) refuses every
update, each with the first reason ``validateFeatureUpdate`` finds:

* an empty feature name: "Feature name can not be empty.";
* an unknown upgrade type (v1): "Received unknown upgrade type.";
* a deletion (level below 1, downgrade allowed): "Can not delete non-existing finalized feature.";
* a level below 1 otherwise: "Can not provide versionLevel: N less than 1 without setting the SAFE
  downgradeType in the request.";
* anything else: "Could not apply finalized feature update because the provided feature is not
  supported."

Each is INVALID_REQUEST. The request needs ALTER on the cluster and the active controller
(CLUSTER_AUTHORIZATION_FAILED / NOT_CONTROLLER at the top, no results). A feature named twice is
judged by its first entry and answered once; results come in the order of the controller's Scala
``mutable.HashMap``, which the response is built from.
"""

from __future__ import annotations

from typing import Any

from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import response_type

_UF = response_type(ApiKey.UPDATE_FEATURES)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
# Kafka's default messages for the top-level errors (Errors.java).
_TOP_MESSAGES = {ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed."}


def refused(code: ErrorCode) -> Any:
    """The request refused as a whole (``UpdateFeaturesResponse.createWithErrors`` with no results)."""
    return _UF(error_code=code, error_message=_TOP_MESSAGES.get(code), results=[])


def _reason(feature: str, level: int, upgrade_type: int) -> str:
    if not feature:
        return "Feature name can not be empty."
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "Received unknown upgrade type."
    if level < 1 and upgrade_type != UPGRADE:
        return "Can not delete non-existing finalized feature."
    if level < 1:
        return f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType in the request."
    return "Could not apply finalized feature update because the provided feature is not supported."


def update_features(body: Any, version: int) -> Any:
    """The active controller's answer: a result per feature named."""
    first: dict[str, Any] = {}
    for u in body.feature_updates:
        first.setdefault(u.feature, u)
    results = []
    for feature in scala_hash_map_order(list(first)):
        u = first[feature]
        upgrade_type = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if version == 0 else u.upgrade_type
        results.append(_UF.UpdatableFeatureResult(feature=feature, error_code=ErrorCode.INVALID_REQUEST,
                                                  error_message=_reason(feature, u.max_version_level, upgrade_type)))
    return _UF(error_code=0, error_message=None, results=results)


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def scala_hash_map_order(keys: list[str]) -> list[str]:
    """Iteration order of a Scala 2.13 ``mutable.HashMap`` of these (distinct) string keys, inserted in
    this order: by bucket (improved hash modulo the table size), then by improved hash, then insertion."""
    capacity = 16
    while len(keys) >= capacity * 3 // 4:  # the table doubles before an insertion reaches the threshold
        capacity *= 2

    def improved(k: str) -> int:
        h = _java_string_hash(k)
        h = (h ^ (h >> 16)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h  # a Java int: buckets keep nodes in signed order

    order = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (improved(k) & (capacity - 1), improved(k), order[k]))
