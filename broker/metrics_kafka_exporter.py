"""kafka_exporter's families (danielqsj/kafka_exporter), served by the brokers themselves.

kafka_exporter is one process that asks the cluster for its topics and groups; its dashboards and
alerts sum over series that each name one topic, partition or group once. So that the same queries work
over three brokers' endpoints, each series comes from exactly one broker:

* ``kafka_brokers``, ``kafka_broker_info`` and ``kafka_topic_partitions``: the active controller;
* ``kafka_topic_partition_*``: the partition's leader (``current_offset`` is the high watermark, what
  kafka_exporter's ListOffsets(latest) returns; ``oldest_offset`` the log start offset). A partition
  without a leader has no series, as kafka_exporter cannot read its offsets either;
* ``kafka_consumergroup_*``: the group's coordinator. Lag is the high watermark minus the committed
  offset, for partitions the coordinator holds a replica of.

Labels are kafka_exporter's: ``topic``, ``partition``, ``consumergroup`` (and ``id``, ``address``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from broker.metrics import MetricsSource

_PARTITION_LABELS = ["topic", "partition"]


def cluster_metrics(broker: MetricsSource, active_controller: bool) -> list[Metric]:
    brokers = GaugeMetricFamily("kafka_brokers", "Number of Brokers in the Kafka Cluster.")
    info = GaugeMetricFamily("kafka_broker_info", "Information about the Kafka Broker.", labels=["id", "address"])
    partitions = GaugeMetricFamily("kafka_topic_partitions", "Number of partitions for this Topic",
                                   labels=["topic"])
    if active_controller:
        metadata = broker.metadata
        brokers.add_metric([], len(metadata.brokers))
        listener = next(iter(broker.bound), None)  # the first listener, as a client bootstraps from it
        for broker_id in sorted(metadata.brokers):
            endpoint = metadata.endpoint(broker_id, listener) if listener is not None else None
            address = f"{endpoint[0]}:{endpoint[1]}" if endpoint is not None else ""
            info.add_metric([str(broker_id), address], 1)
        for name, topic in sorted(metadata.topics.items()):
            partitions.add_metric([name], len(topic.partitions))
    return [brokers, info, partitions]


def partition_metrics(broker_id: int, partitions: dict[tuple[str, int], Any], offline: set[tuple[str, int]]
                      ) -> list[Metric]:
    current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                "Current Offset of a Broker at Topic/Partition", labels=_PARTITION_LABELS)
    oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset", "Oldest Offset of a Broker at Topic/Partition",
                               labels=_PARTITION_LABELS)
    leader = GaugeMetricFamily("kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition",
                               labels=_PARTITION_LABELS)
    replicas = GaugeMetricFamily("kafka_topic_partition_replicas", "Number of Replicas for this Topic/Partition",
                                 labels=_PARTITION_LABELS)
    in_sync = GaugeMetricFamily("kafka_topic_partition_in_sync_replica",
                                "Number of In-Sync Replicas for this Topic/Partition", labels=_PARTITION_LABELS)
    preferred = GaugeMetricFamily("kafka_topic_partition_leader_is_preferred",
                                  "1 if Topic/Partition is using the Preferred Broker", labels=_PARTITION_LABELS)
    under = GaugeMetricFamily("kafka_topic_partition_under_replicated_partition",
                              "1 if Topic/Partition is under Replicated", labels=_PARTITION_LABELS)
    for tp, p in sorted(partitions.items()):
        if not p.is_leader or tp in offline or p.log.is_offline:
            continue
        labels = [tp[0], str(tp[1])]
        with contextlib.suppress(Exception):  # a log closed under us (deleted meanwhile) has no offsets
            current.add_metric(labels, p.high_watermark)
            oldest.add_metric(labels, p.log.log_start_offset)
        leader.add_metric(labels, broker_id)
        replicas.add_metric(labels, len(p.replicas))
        in_sync.add_metric(labels, len(p.isr))
        preferred.add_metric(labels, 1 if p.replicas and p.replicas[0] == broker_id else 0)
        under.add_metric(labels, 1 if len(p.isr) < len(p.replicas) else 0)
    return [current, oldest, leader, replicas, in_sync, preferred, under]


def group_metrics(broker: MetricsSource, partitions: dict[tuple[str, int], Any]) -> list[Metric]:
    labels3 = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Current Offset of a ConsumerGroup at Topic/Partition", labels=labels3)
    current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                    "Current Offset of a ConsumerGroup at Topic for all partitions",
                                    labels=["consumergroup", "topic"])
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
                            labels=labels3)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
                                labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Amount of members in a consumer group",
                                labels=["consumergroup"])
    coordinator = broker.components.group_coordinator
    views = []
    if coordinator is not None:
        with contextlib.suppress(Exception):
            views = coordinator.group_lag_view()
    for g in views:
        members.add_metric([g.group_id], g.members)
        offsets: dict[str, int] = {}
        lags: dict[str, int] = {}
        for (topic, part), off in sorted(g.offsets.items()):
            labels = [g.group_id, topic, str(part)]
            current.add_metric(labels, off)
            offsets[topic] = offsets.get(topic, 0) + off
            p = partitions.get((topic, part))
            if p is None:
                continue  # no replica here: its high watermark is unknown on this broker
            value = max(0, p.high_watermark - off)
            lag.add_metric(labels, value)
            lags[topic] = lags.get(topic, 0) + value
        for topic, value in sorted(offsets.items()):
            current_sum.add_metric([g.group_id, topic], value)
        for topic, value in sorted(lags.items()):
            lag_sum.add_metric([g.group_id, topic], value)
    return [current, current_sum, lag, lag_sum, members]
