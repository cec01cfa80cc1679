"""What the pipeline asks the cluster before it runs Spark: its id and where the input topics begin and end."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any


def cluster_id(bootstrap_servers: str, client_config: Mapping[str, Any] | None = None) -> str:
    """The cluster id the brokers report (DescribeCluster): new for every freshly created cluster."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="pipeline-admin", **(client_config or {}))
    try:
        cid = admin.describe_cluster().get("cluster_id")
    finally:
        admin.close()
    if not cid:
        raise RuntimeError(f"the cluster at {bootstrap_servers} reports no cluster id")
    return str(cid)


def offset_range(bootstrap_servers: str, topics: Iterable[str], client_config: Mapping[str, Any] | None = None,
                 timeout: float = 60.0) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(log start offsets, end offsets) of every partition of ``topics``, keyed by (topic, partition)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="pipeline-offsets",
                             enable_auto_commit=False, **(client_config or {}))
    try:
        tps = []
        deadline = time.monotonic() + timeout
        for topic in topics:
            # The first metadata answer may come after the first question: ask until the topic is known.
            while not (parts := consumer.partitions_for_topic(topic)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no metadata for topic {topic} after {timeout}s")
                time.sleep(0.2)
            tps += [TopicPartition(topic, p) for p in sorted(parts)]
        begin = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
    finally:
        consumer.close()
    return ({(tp.topic, tp.partition): o for tp, o in begin.items()},
            {(tp.topic, tp.partition): o for tp, o in end.items()})
