"""num.replica.fetchers: which fetcher replicates a partition, by Kafka's formula (values from Java 17)."""

from __future__ import annotations

from broker.replica_fetcher import fetcher_id_for, java_string_hash


def test_java_string_hash_matches_javas() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("foo") == 101574
    assert java_string_hash("") == 0
    # Non-ASCII: UTF-16 code units, 32-bit overflow (Java: 31 * "héllo-wörld".hashCode() + 5 == 1880623257).
    assert (31 * java_string_hash("héllo-wörld") + 5) & 0xFFFFFFFF == 1880623257


def test_fetcher_ids_follow_kafkas_get_fetcher_id() -> None:
    # Java: Math.abs(31 * "__consumer_offsets".hashCode() + 7) % 3 == 1; Math.abs(31 * "rf3-topic".hashCode() + 2) % 2 == 1
    assert fetcher_id_for(("__consumer_offsets", 7), 3) == 1
    assert fetcher_id_for(("rf3-topic", 2), 2) == 1
    assert {fetcher_id_for(("t", p), 1) for p in range(50)} == {0}
    assert {fetcher_id_for(("t", p), 4) for p in range(50)} == {0, 1, 2, 3}
