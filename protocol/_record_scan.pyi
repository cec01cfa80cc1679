# The compiled record scanner (protocol/_record_scan.c): scan_records has the same signature as
# protocol.record_scan.scan_records_python, which it is tested against; check_plain_batch is the one-call
# acceptance of a plain produced batch that broker.log_validator tries first.
from collections.abc import Callable

from protocol.record_scan import RecordScan
from protocol.records import ReadableBuffer

def configure(error_type: type[Exception], result_type: type[RecordScan],
              crc32c: Callable[[ReadableBuffer], int] = ..., /) -> None: ...
def check_plain_batch(buf: ReadableBuffer, max_message_bytes: int, now_ms: int, before_max_ms: int,
                      after_max_ms: int, create_time: bool, compacted: bool, /) -> tuple[int, int] | None: ...
def scan_records(
    buf: ReadableBuffer, pos: int, end: int, first_index: int, count: int, *, partial: bool = ...,
    max_record_size: int = ..., release_gil: bool = ...,
) -> RecordScan: ...
