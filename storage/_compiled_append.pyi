# The common leader and follower appends, compiled (storage/_compiled_append.c), used through
# storage.compiled_append and tested against PartitionLog.append in tests/storage/test_leader_append.py
# and tests/storage/test_follower_append.py.
from collections.abc import Callable
from typing import Any

def configure(batch_header_cls: type, append_info_cls: type, batch_metadata_cls: type,
              now_ms: Callable[[], int], crc32c: Callable[[Any], int], /) -> bool: ...
def append_batch(log: Any, records: Any, leader_epoch: int, log_append_time_ms: int, /) -> Any: ...
def append_follower(log: Any, records: Any, /) -> Any: ...
