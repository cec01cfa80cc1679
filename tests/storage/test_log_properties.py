"""Stateful property test: PartitionLog against a list-of-batches model, across restarts and crashes."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.records import BatchView, build_batch
from storage.log import PartitionLog
from tests.storage.conftest import records_of
from tests.storage.helpers import assert_indexes_agree

CONFIG = {"segment_bytes": 700, "index_interval_bytes": 150, "segment_index_bytes": 240,
          "file_delete_delay_ms": 0, "retention_ms": 10_000, "retention_bytes": -1}

record_st = st.tuples(
    st.binary(min_size=1, max_size=6),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.integers(min_value=0, max_value=400),
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp()
        self.path = self.tmp + "/prop-0"
        self.now = 1_000_000
        self.ts_base = self.now - 20_000
        self.log = PartitionLog(self.path, CONFIG, clock=lambda: self.now)
        # model: batches of (offset, timestamp, key, value)
        self.batches: list[list[tuple[int, int, bytes, bytes | None]]] = []
        self.start = 0

    def teardown(self) -> None:
        try:
            self.log.close()
        except Exception:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.batches[-1][-1][0] + 1 if self.batches else self.log.log_end_offset

    def model_records(self) -> list[tuple[int, int, bytes, bytes | None]]:
        return [r for b in self.batches for r in b if r[0] >= self.start]

    @rule(recs=st.lists(record_st, min_size=1, max_size=5), codec=st.sampled_from([0, 1, 4]))
    def append(self, recs, codec) -> None:
        leo = self.log.log_end_offset
        self.ts_base += 50
        rows = [(k, v, self.ts_base + dt) for k, v, dt in recs]
        info = self.log.append(bytearray(build_batch(rows, compression=codec)), leader_epoch=0)
        assert info.first_offset == leo
        self.batches.append([(leo + i, ts, k, v) for i, (k, v, ts) in enumerate(rows)])

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def set_high_watermark(self, data) -> None:
        self.log.high_watermark = data.draw(st.integers(self.start, self.log.log_end_offset))

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data) -> None:
        target = data.draw(st.integers(self.start, self.log.log_end_offset))
        removed = [b for b in self.batches if b[-1][0] >= target]
        old_leo = self.log.log_end_offset
        self.log.truncate_to(target)
        self.batches = [b for b in self.batches if b[-1][0] < target]
        # a batch holding the target goes whole: the LEO lands on its base offset
        assert self.log.log_end_offset == (removed[0][0][0] if removed else old_leo)
        self.start = min(self.start, self.log.log_end_offset)

    @rule(data=st.data())
    def delete_records(self, data) -> None:
        hw = self.log.high_watermark
        target = data.draw(st.integers(self.log.log_start_offset, hw))
        assert self.log.delete_records(target) == max(target, self.start)
        self.start = max(self.start, target)

    @rule(advance=st.integers(0, 30_000))
    def retention(self, advance) -> None:
        self.now += advance
        self.log.delete_old_segments()
        new_start = self.log.log_start_offset
        threshold = self.now - CONFIG["retention_ms"]
        for r in self.model_records():
            if r[0] < new_start:
                assert r[2] is not None
                assert r[1] < threshold or r[0] < self.log.high_watermark
        assert new_start <= max(self.log.high_watermark, self.start)
        self.start = max(self.start, new_start)

    @rule()
    def restart_clean(self) -> None:
        lg = self.log
        lg.flush()
        lg.close()
        self.log = PartitionLog(self.path, CONFIG, recovery_point=lg.recovery_point, log_start_offset=lg.log_start_offset,
                                high_watermark=lg.high_watermark, had_clean_shutdown=True, clock=lambda: self.now)

    @rule(flush=st.booleans())
    def restart_after_crash(self, flush) -> None:
        lg = self.log
        if flush:
            lg.flush()
        lg.close_quietly()  # descriptors go, nothing trimmed or snapshotted: a kill -9
        self.log = PartitionLog(self.path, CONFIG, recovery_point=lg.recovery_point, log_start_offset=lg.log_start_offset,
                                high_watermark=lg.high_watermark, had_clean_shutdown=False, clock=lambda: self.now)

    @invariant()
    def reads_match_model(self) -> None:
        if not hasattr(self, "log"):
            return
        lg = self.log
        expected = self.model_records()
        assert lg.log_start_offset == self.start or (not self.batches and lg.log_start_offset >= self.start)
        assert lg.log_end_offset == self.leo
        got = records_of(lg)
        assert [(o, ts, k, v) for o, ts, k, v in got] == expected
        for o, *_ in expected[:: max(1, len(expected) // 7)]:
            assert BatchView(lg.read_bytes(o, 1)).last_offset >= o
        for target in {expected[0][1] - 1, expected[len(expected) // 2][1], expected[-1][1] + 1} if expected else ():
            want = next(((o, ts) for o, ts, _, _ in expected if ts >= target), None)
            assert lg.offset_for_timestamp(target) == want, target
        assert_indexes_agree(lg)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
