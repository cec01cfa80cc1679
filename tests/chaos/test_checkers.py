"""The transactional copy's checker after an unclean election (scenario 13): the copy had read, and
committed past, input records the election then lost, in some partitions. Those partitions' new
records reuse the lost offsets, below the copy's position: counted as lost and noted there, not
violations. Everywhere else the copy must still be exact."""

from __future__ import annotations

from tests.chaos.checkers import Records, Row, check_copy


def _input(p: int, n: int, first: int = 0) -> list[tuple[int, bytes]]:
    return [(first + i, b"in-%d-%d" % (p, first + i)) for i in range(n)]


def _copied(values: list[bytes], txn: str = "t1") -> list[tuple[int, bytes]]:
    return [(i, v + b"|%s/%d" % (txn.encode(), len(values))) for i, v in enumerate(values)]


def _scenario() -> tuple[Records, Records]:
    # Partition 0: the copy took records 0-9, then 10-19, which the election lost; the input now holds
    # 0-9 and new records at offsets 10-14, below the copy's committed position (20).
    # Partition 1: not cut; everything copied.
    source: Records = {0: _input(0, 10) + [(10 + i, b"new-0-%d" % i) for i in range(5)], 1: _input(1, 8)}
    lost = [b"in-0-%d" % i for i in range(10, 20)]
    sink: Records = {0: _copied([v for _, v in _input(0, 10)] + lost), 1: _copied([v for _, v in _input(1, 8)], "t2")}
    return source, sink


def test_a_partition_cut_below_the_copy_counts_its_uncopied_records_as_the_elections_loss() -> None:
    source, sink = _scenario()
    row = check_copy(Row("13", "transactional copy"), source, sink, input_loss_allowed=True)
    assert row.violations == []
    assert (row.acked, row.lost, row.duplicated, row.reordered) == (23, 15, 0, 0)
    assert any("cut below the copy's position" in n and "5 of their new records not copied" in n for n in row.notes)


def test_without_an_unclean_election_the_same_output_breaks_the_promise() -> None:
    source, sink = _scenario()
    row = check_copy(Row("14", "transactional copy"), source, sink)
    assert any("never copied" in v for v in row.violations)
    assert any("no input" in v for v in row.violations)


def test_a_partition_not_cut_must_still_be_copied_whole_and_in_order() -> None:
    source, sink = _scenario()
    sink[1] = _copied([b"in-1-%d" % i for i in (0, 2, 1, 3, 4, 5, 6)], "t2")  # 7 missing, 1 and 2 swapped
    row = check_copy(Row("13", "transactional copy"), source, sink, input_loss_allowed=True)
    assert any("1 input records never copied (first b'in-1-7')" in v for v in row.violations)
    assert any("order violations" in v for v in row.violations)
