"""One kafka-python group member as a process of its own, so a test can kill it like a crash.

    python -m tests.integration.group_member BOOTSTRAP TOPIC GROUP

Prints one JSON object per line on stdout: ``{"assigned": [partitions]}`` after every rebalance and
``{"consumed": [[partition, offset, value], ...]}`` for every non-empty poll (committed synchronously
before it is printed). SIGTERM closes the consumer cleanly (LeaveGroup) and exits 0.
"""

from __future__ import annotations

import json
import signal
import sys

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import CommitFailedError


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    bootstrap, topic, group = sys.argv[1:4]
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, client_id=f"member-{group}", auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000,
        partition_assignment_strategy=[RoundRobinPartitionAssignor])

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: object) -> None:
            pass

        def on_partitions_assigned(self, assigned: object) -> None:
            emit({"assigned": sorted(tp.partition for tp in consumer.assignment())})

    consumer.subscribe([topic], listener=Listener())
    while not stop:
        batch = consumer.poll(timeout_ms=200)
        got = [[tp.partition, m.offset, m.value.decode()] for tp, msgs in batch.items() for m in msgs]
        if got:
            try:
                consumer.commit()
            except CommitFailedError:
                # The group rebalanced under us: these records go to their new owner, from the
                # last committed offsets, so they are not reported as consumed here.
                continue
            emit({"consumed": got})
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
