"""Record-level (offset, timestamp) pairs of one batch, for ListOffsets by time.

The log indexes batches; ListOffsets wants the first *record* whose timestamp reaches
a target. This walks a batch's records reading only the length, the timestamp delta
and the offset delta of each (record format v2, zig-zag varints), decompressing the
records section first when the batch is compressed. Not on the produce/fetch path.
"""

from __future__ import annotations

from collections.abc import Iterator

from slipstream.protocol.record_batch import HEADER_SIZE, BatchHeader


class RecordsUnreadable(ValueError):
    """The records section is malformed or uses a codec that cannot be decoded here."""


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise RecordsUnreadable("record varint runs past the end of the batch")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordsUnreadable("record varint longer than 10 bytes")


def _records_section(batch: bytes | memoryview, header: BatchHeader) -> bytes | memoryview:
    payload = memoryview(batch)[HEADER_SIZE : header.size]
    if header.compression == 0:
        return payload
    try:
        from slipstream.protocol.compression import decompress
    except ImportError as exc:  # pragma: no cover - compression module ships with us
        raise RecordsUnreadable("no compression support available") from exc
    try:
        return decompress(header.compression, payload)
    except Exception as exc:  # any codec failure means: cannot read these records
        raise RecordsUnreadable(f"cannot decompress records: {exc}") from exc


def record_offsets_and_timestamps(
    batch: bytes | memoryview, header: BatchHeader
) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) for each record; LogAppendTime batches give every
    record the batch's max timestamp, as Kafka does."""
    data = _records_section(batch, header)
    append_time = header.max_timestamp if header.is_log_append_time else None
    pos = 0
    for _ in range(header.record_count):
        length, body = read_varint(data, pos)
        end = body + length
        if length < 3 or end > len(data):
            raise RecordsUnreadable("record length does not fit the batch")
        ts_delta, p = read_varint(data, body + 1)  # skip the attributes byte
        offset_delta, _ = read_varint(data, p)
        timestamp = append_time if append_time is not None else header.base_timestamp + ts_delta
        yield header.base_offset + offset_delta, timestamp
        pos = end


def first_record_at_or_after(
    batch: bytes | memoryview, header: BatchHeader, timestamp_ms: int, min_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with offset >= ``min_offset`` and
    timestamp >= ``timestamp_ms``; None if the batch has none.

    An unreadable records section gives the batch-level answer instead:
    (max(base offset, min_offset), max timestamp) when the batch qualifies.
    """
    try:
        for offset, timestamp in record_offsets_and_timestamps(batch, header):
            if offset >= min_offset and timestamp >= timestamp_ms:
                return offset, timestamp
        return None
    except RecordsUnreadable:
        if header.max_timestamp >= timestamp_ms and header.last_offset >= min_offset:
            return max(header.base_offset, min_offset), header.max_timestamp
        return None


def record_offsets_and_timestamps_or_batch(
    batch: bytes | memoryview, header: BatchHeader
) -> list[tuple[int, int]]:
    """Like record_offsets_and_timestamps; an unreadable batch counts as one record
    per offset, each at the batch's max timestamp."""
    try:
        return list(record_offsets_and_timestamps(batch, header))
    except RecordsUnreadable:
        return [(o, header.max_timestamp) for o in range(header.base_offset, header.next_offset)]
