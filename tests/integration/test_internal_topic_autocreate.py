"""A Metadata request that names an internal topic, with auto-creation allowed, creates it as Kafka does:
with the internal topic's own partition count, replication factor and compacted configs, not the
defaults of an ordinary auto-created topic. (Burrow asks for ``__consumer_offsets`` before any group
has used the cluster.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clients.admin import WireClient
from clients.devcluster import LocalCluster
from protocol.api_versions import ApiKey
from protocol.errors import ErrorCode as E
from tests.integration.helpers import RawClient, _metadata_topic, wait_until


@pytest.fixture(scope="module")
def fresh() -> Iterator[LocalCluster]:
    with LocalCluster(1, overrides={"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "1",
                                    "transaction.state.log.num.partitions": "2",
                                    "transaction.state.log.replication.factor": "1",
                                    "transaction.state.log.min.isr": "1", "num.partitions": "7"}) as c:
        yield c


@pytest.mark.parametrize(("topic", "partitions", "expected"), [
    ("__consumer_offsets", 3, {"cleanup.policy": "compact", "compression.type": "producer"}),
    ("__transaction_state", 2, {"cleanup.policy": "compact", "compression.type": "uncompressed",
                                "min.insync.replicas": "1"}),
])
def test_metadata_creates_an_internal_topic_with_its_own_settings(fresh: LocalCluster, topic: str, partitions: int,
                                                                   expected: dict[str, str]) -> None:
    with RawClient(fresh.bootstrap) as raw:
        def ask() -> object | None:
            md = raw.request(ApiKey.METADATA, 12, topics=[_metadata_topic(topic)], allow_auto_topic_creation=True,
                             include_topic_authorized_operations=False)
            t = md.topics[0]
            assert t.error_code in (E.NONE, E.LEADER_NOT_AVAILABLE), t
            assert t.is_internal
            ready = t.error_code == E.NONE and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
            return t if ready else None

        t = wait_until(ask, 30, f"{topic} created by a Metadata request")
    assert len(t.partitions) == partitions  # not num.partitions (7)
    admin = WireClient(fresh.bootstrap, timeout=10.0)
    configs = {e.name: e.value for e in admin.describe_configs(2, topic, list(expected))}
    assert configs == expected
