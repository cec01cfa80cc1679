# The compiled record scanner (protocol/_record_scan.c): same signature as
# protocol.record_scan.scan_records_python, which it is tested against.
from protocol.record_scan import RecordScan
from protocol.records import ReadableBuffer

def configure(error_type: type[Exception], result_type: type[RecordScan], /) -> None: ...
def scan_records(
    buf: ReadableBuffer, pos: int, end: int, first_index: int, count: int, *, partial: bool = ...,
    max_record_size: int = ..., release_gil: bool = ...,
) -> RecordScan: ...
