"""Compaction's work on one batch: reading where its records sit and rebuilding it with
only the records that survive (pure; ``compaction_filter.py`` decides which)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slipstream.log.record_scan import RecordsUnreadable, read_varint
from slipstream.protocol import compression as _compression
from slipstream.protocol.primitives import write_varint
from slipstream.protocol.record_batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    BatchHeader,
    write_header,
)

# One reader of the records section's zig-zag varints for the log package; its error is
# the compaction job's "skip this batch" signal too.
UnreadableRecords = RecordsUnreadable


@dataclass(slots=True)
class RecordSpan:
    start: int  # the record's first byte (its length varint) in the records section
    end: int
    body: int  # the attributes byte
    rest: int  # first byte after the offset delta (the key length)
    ts_delta: int
    offset_delta: int
    key: bytes | None
    tombstone: bool


def record_spans(header: BatchHeader, batch: bytes | memoryview) -> tuple[bytes, list[RecordSpan]]:
    """The (decompressed) records section and where each record sits in it."""
    section = memoryview(batch)[HEADER_SIZE : header.size]
    try:
        data = (
            bytes(section)
            if header.compression == _compression.NONE
            else _compression.decompress(header.compression, section)
        )
    except Exception as exc:  # unknown codec or undecodable data
        raise UnreadableRecords(str(exc)) from exc
    out: list[RecordSpan] = []
    pos = 0
    end = len(data)
    for _ in range(header.record_count):
        length, body = read_varint(data, pos)
        stop = body + length
        if length < 3 or stop > end:
            raise UnreadableRecords("record length does not fit the batch")
        ts_delta, p = read_varint(data, body + 1)
        offset_delta, rest = read_varint(data, p)
        key_len, p = read_varint(data, rest)
        key = None
        if key_len >= 0:
            key = data[p : p + key_len]
            p += key_len
        value_len, p = read_varint(data, p)
        if p + max(value_len, 0) > stop:
            raise UnreadableRecords("record fields overrun the record")
        out.append(RecordSpan(pos, stop, body, rest, ts_delta, offset_delta, key, value_len < 0))
        pos = stop
    if pos != end:
        raise UnreadableRecords("bytes after the last record")
    return data, out


def delete_horizon(header: BatchHeader) -> int | None:
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


def rebuild_batch(header: BatchHeader, data: bytes, kept: Sequence[RecordSpan], horizon: int | None) -> bytes:
    """The batch with only ``kept`` records: same offsets range, producer fields, codec."""
    old_base = header.base_timestamp
    new_base = horizon if horizon is not None else old_base
    shift = old_base - new_base
    records = bytearray()
    max_ts = -1
    for rec in kept:
        ts = old_base + rec.ts_delta
        if ts > max_ts:
            max_ts = ts
        if shift == 0:
            records += data[rec.start : rec.end]
        else:
            body = bytearray(data[rec.body : rec.body + 1])
            write_varint(body, rec.ts_delta + shift)
            write_varint(body, rec.offset_delta)
            body += data[rec.rest : rec.end]
            write_varint(records, len(body))
            records += body
    if header.is_log_append_time:
        max_ts = header.max_timestamp
    codec = header.compression
    section = records if codec == _compression.NONE else _compression.compress(codec, records)
    attributes = header.attributes & ~DELETE_HORIZON_MASK
    if horizon is not None:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(HEADER_SIZE)
    out += section
    write_header(
        out,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=new_base,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=len(kept),
    )
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The batch with every record removed: its offset range, producer id, epoch and
    sequences kept, no records (Kafka's cleaner keeps a producer's last batch so, and
    writes it uncompressed), so producer state rebuilt from the log still knows the
    producer's last sequence."""
    attributes = header.attributes & ~(DELETE_HORIZON_MASK | COMPRESSION_MASK)
    out = bytearray(HEADER_SIZE)
    write_header(
        out,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=0,
    )
    return bytes(out)
