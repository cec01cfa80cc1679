"""Our ApiVersions answer against a live Apache Kafka 3.9.1's (ZooKeeper mode, Maven Central jars), API by API.

Every API's version range must be Kafka's, except the differences listed in ``ALLOWED``, each with its
reason (the README's "API versions" section carries the same list). An API only one side offers
counts as a difference too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.api_versions import ApiKey
from tests.integration.helpers import RawClient

INTER_BROKER = ("spoken only between kafkette brokers, so implemented (and advertised) at one version, "
                "Kafka 3.9's newest")

# api key -> (our range, Kafka 3.9.1's range, reason); None: not offered.
ALLOWED: dict[int, tuple[tuple[int, int] | None, tuple[int, int] | None, str]] = {
    ApiKey.LEADER_AND_ISR: ((7, 7), (0, 7), INTER_BROKER),
    ApiKey.STOP_REPLICA: ((4, 4), (0, 4), INTER_BROKER),
    ApiKey.UPDATE_METADATA: ((8, 8), (0, 8), INTER_BROKER),
    ApiKey.CONTROLLED_SHUTDOWN: ((3, 3), (0, 3), INTER_BROKER),
    ApiKey.ALTER_PARTITION: ((3, 3), (0, 3), INTER_BROKER),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: ((0, 0), None, "DescribeTopicPartitions, which a ZooKeeper-mode Kafka 3.9 "
                                                     "does not offer, is served as a KRaft broker serves it (the "
                                                     "3.9 Java admin's describeTopics uses it when offered)"),
}


@pytest.fixture(scope="module")
def kafkette_bootstrap() -> Iterator[str]:
    from clients.devcluster import LocalCluster

    with LocalCluster(1, metrics_base_port=None) as cluster:
        yield cluster.bootstrap


def api_versions(bootstrap: str) -> tuple[dict[int, tuple[int, int]], Any]:
    with RawClient(bootstrap) as raw:
        body = raw.request(ApiKey.API_VERSIONS, 3, client_software_name="kafkette-tests",
                           client_software_version="1")
    assert body.error_code == 0
    return {int(k.api_key): (k.min_version, k.max_version) for k in body.api_keys}, body


def test_api_versions_match_kafka_391_zookeeper_mode(apache_kafka: Any, kafkette_bootstrap: str) -> None:
    theirs, their_body = api_versions(apache_kafka.bootstrap)
    ours, our_body = api_versions(kafkette_bootstrap)
    differences = {}
    for key in sorted(set(theirs) | set(ours)):
        if ours.get(key) != theirs.get(key):
            differences[key] = (ours.get(key), theirs.get(key))
    unexplained = {}
    for key, diff in differences.items():
        allowed = ALLOWED.get(key)
        if allowed is None or (allowed[0], allowed[1]) != diff:
            with contextlib.suppress(ValueError):
                key = ApiKey(key).name  # type: ignore[assignment]
            unexplained[key] = diff
    assert not unexplained, f"ApiVersions differs from Kafka 3.9.1's, (ours, Kafka's): {unexplained}"
    # The listed differences are real: Kafka's side of each is what the list says.
    for key, (_ours, kafka, _why) in ALLOWED.items():
        assert theirs.get(key) == kafka, (key, theirs.get(key))
    # Neither side advertises features in ZooKeeper mode.
    assert (list(our_body.supported_features), list(their_body.supported_features)) == ([], [])
    assert list(our_body.finalized_features) == list(their_body.finalized_features) == []
