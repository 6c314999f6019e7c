"""Tiny builder of magic-2 record batches for the log tests (records are trivial)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from slipstream.protocol.record_batch import parse_header

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, value: bytes) -> bytes:
    body = (
        b"\x00"
        + _varint(timestamp_delta)
        + _varint(offset_delta)
        + _varint(-1)  # null key
        + _varint(len(value))
        + value
        + _varint(0)  # no headers
    )
    return _varint(len(body)) + body


def make_batch(
    timestamps: Sequence[int] = (1000,),
    *,
    base_offset: int = 0,
    value: bytes = b"v",
    compression: int = 0,
    log_append_time: bool = False,
    offset_deltas: Sequence[int] | None = None,
) -> bytearray:
    """A batch with one record per timestamp; the max timestamp is their max."""
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(timestamps)))
    base_ts = timestamps[0]
    records = b"".join(
        _record(d, ts - base_ts, value) for d, ts in zip(deltas, timestamps, strict=True)
    )
    if compression:
        from slipstream.protocol.compression import compress

        records = compress(compression, records)
    attributes = compression | (0x08 if log_append_time else 0)
    length = 61 - 12 + len(records)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            length,
            -1,
            2,
            0,
            attributes,
            deltas[-1],
            base_ts,
            max(timestamps),
            -1,
            -1,
            -1,
            len(timestamps),
        )
    )
    batch = header + records
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


def split(data: bytes) -> list[bytes]:
    """Split concatenated batches."""
    out = []
    pos = 0
    while pos < len(data):
        size = parse_header(data, pos).size
        out.append(data[pos : pos + size])
        pos += size
    return out
