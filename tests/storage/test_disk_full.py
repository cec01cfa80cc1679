"""A full disk (a 2 MiB tmpfs): appends fail with KAFKA_STORAGE_ERROR, nothing acknowledged is lost, and
the log takes writes again once space returns."""

from __future__ import annotations

import os

import pytest

from storage.errors import KafkaStorageError
from storage.log import PartitionLog
from tests.storage.conftest import batch, records_of
from tests.storage.helpers import assert_indexes_agree


@pytest.fixture
def tiny_fs(tmpfs_of):
    return tmpfs_of("2m")


def test_disk_full_then_space_returns(tiny_fs):
    ballast = os.path.join(tiny_fs, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * (512 * 1024))
    cfg = {"segment_bytes": 300 * 1024, "segment_index_bytes": 4096, "index_interval_bytes": 4096}
    lg = PartitionLog(os.path.join(tiny_fs, "full-0"), cfg)
    value = os.urandom(60 * 1024)
    acked: list[int] = []
    error = None
    for i in range(100):
        try:
            info = lg.append(batch([(b"k%d" % i, value, 1000 + i)]))
        except KafkaStorageError as e:
            error = e
            break
        acked.append(info.first_offset)
    assert error is not None and error.disk_full and error.error_code == 56
    assert not lg.is_offline
    assert len(acked) > 5
    # the failed write left no partial batch behind, every acknowledged batch reads back
    assert lg.log_end_offset == len(acked)
    assert [r[0] for r in records_of(lg)] == acked
    assert_indexes_agree(lg)
    with pytest.raises(KafkaStorageError):
        lg.append(batch([(b"again", value, 5000)]))
    assert lg.log_end_offset == len(acked)
    # space comes back: the same log takes writes again
    os.unlink(ballast)
    info = lg.append(batch([(b"after", value, 6000)]))
    assert info.first_offset == len(acked)
    lg.flush()
    lg.close()
    lg = PartitionLog(os.path.join(tiny_fs, "full-0"), cfg, had_clean_shutdown=False)
    recs = records_of(lg)
    assert [r[0] for r in recs] == acked + [len(acked)]
    assert recs[-1][2] == b"after" and all(r[3] == value for r in recs)
    assert_indexes_agree(lg)
    lg.close()
