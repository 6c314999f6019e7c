"""What the produce path checks inside a batch before storing it (Kafka's LogValidator rules).

``validate_batch`` (protocol) has checked the header, the length and the CRC. Here:

- the record count must be positive and agree with the offset range the header claims
  (``last_offset_delta + 1``), as Kafka requires of magic-2 batches (INVALID_RECORD);
- the records section is decompressed with a bound: output past the topic's
  ``max.message.bytes`` is refused as MESSAGE_TOO_LARGE (Kafka's RECORD_TOO_LARGE,
  code 10) before it is produced, so a compression bomb costs nothing; bytes that do
  not decompress are CORRUPT_MESSAGE;
- every record's framing is walked (``record_framing``), inside compressed batches
  too, and exactly ``record_count`` records must be there (INVALID_RECORD).

The walk also notes keyless records, which compacted topics refuse, and the
decompressed section is handed on, so broker-side recompression never inflates a
batch a second time or without a bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..protocol import compression
from ..protocol.compression import (
    CorruptCompressedData,
    DecompressedTooLarge,
    UnsupportedCompression,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import HEADER_SIZE, BatchHeader, InvalidBatch
from ..protocol.record_framing import check_records
from ..protocol.uniform_records import uniform_records_keyless


@dataclass(frozen=True, slots=True)
class CheckedRecords:
    """A batch's records section as checked: the uncompressed bytes and the keyless records."""

    raw: bytes | bytearray | memoryview
    keyless: Sequence[int]


def check_batch_records(batch: memoryview, header: BatchHeader, max_bytes: int) -> CheckedRecords:
    """Check ``batch``'s record count and framing; raise KafkaError with the produce error."""
    count = header.record_count
    if count <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"{_where(header)} reports an invalid record count {count}")
    if header.last_offset_delta + 1 != count:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"{_where(header)} reports {count} records but an offset range of "
            f"{header.last_offset_delta + 1} (last offset delta {header.last_offset_delta})",
        )
    section = batch[HEADER_SIZE:]
    codec = header.compression
    raw: bytes | bytearray | memoryview
    if codec == compression.NONE:
        raw = section  # checked in place when its records share one shape (no copy)
    else:
        try:
            raw = compression.decompress_bounded(codec, section, max_bytes)
        except DecompressedTooLarge as exc:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"{_where(header)}: records expand past max.message.bytes={max_bytes} ({exc})",
            ) from None
        except CorruptCompressedData as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{_where(header)}: {exc}") from None
        except UnsupportedCompression as exc:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None
    # Records of one shape (the usual batch) are checked in C; any other batch, or a
    # faulty one, is walked record by record, which also words the error.
    all_keyless = uniform_records_keyless(raw, count)
    if all_keyless is not None:
        return CheckedRecords(raw, range(count) if all_keyless else ())
    if isinstance(raw, memoryview):
        raw = raw.tobytes()  # the walk indexes bytes much faster than a view
    try:
        keyless = check_records(raw, 0, count, _where(header))
    except InvalidBatch as exc:
        raise KafkaError(ErrorCode.INVALID_RECORD, str(exc)) from None
    return CheckedRecords(raw, keyless)


def _where(header: BatchHeader) -> str:
    """The batch as error messages name it."""
    return f"record batch with base offset {header.base_offset}"
