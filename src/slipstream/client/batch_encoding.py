"""A producer batch's bytes: records encoded into a magic-2 record batch (optionally
compressed, CRC32C), and the size estimate ``send`` checks a record against.

The header layout is the protocol's (:func:`~slipstream.protocol.record_batch.write_header`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..protocol import compression as _compression
from ..protocol.primitives import write_varint
from ..protocol.record_batch import HEADER_SIZE, TRANSACTIONAL_MASK, write_header

SEQ_MOD = 1 << 31

# Record overhead estimate beyond key/value/header bytes: length, attributes, two
# deltas, key/value lengths, header count (a few varints).
RECORD_OVERHEAD = 12

Headers = Sequence[tuple[str, bytes | None]]
RecordTuple = tuple[bytes | None, bytes | None, Headers, int]

# zigzag varints below 2**14 as ready-made bytes (lengths and deltas of nearly every record)
_TABLE_LIMIT = 1 << 14
_VT: list[bytes] = [bytes((z,)) for z in range(0x80)] + [
    bytes(((z & 0x7F) | 0x80, z >> 7)) for z in range(0x80, _TABLE_LIMIT)
]


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    if z < _TABLE_LIMIT:
        return _VT[z]
    out = bytearray()
    write_varint(out, n)
    return bytes(out)


def _headers_bytes(headers: Headers) -> bytes:
    out = bytearray(_varint(len(headers)))
    for name, hvalue in headers:
        kb = name.encode()
        out += _varint(len(kb))
        out += kb
        if hvalue is None:
            out += b"\x01"
        else:
            out += _varint(len(hvalue))
            out += hvalue
    return bytes(out)


def encode_records(records: Sequence[RecordTuple], base_ts: int) -> tuple[bytearray, int]:
    """The records section of a v2 batch (uncompressed); returns it and the max timestamp."""
    out = bytearray()
    vt = _VT
    lim = _TABLE_LIMIT
    max_ts = base_ts
    for delta, (key, value, headers, ts) in enumerate(records):
        if ts > max_ts:
            max_ts = ts
        d = ts - base_ts
        z = (d << 1) ^ (d >> 63)
        part = (
            b"\x00"
            + (vt[z] if z < lim else _varint(d))
            + (vt[delta << 1] if delta < 8192 else _varint(delta))
        )
        if key is None:
            part += b"\x01"
        else:
            n = len(key) << 1
            part += (vt[n] if n < lim else _varint(len(key))) + key
        if value is None:
            part += b"\x01"
        else:
            n = len(value) << 1
            part += (vt[n] if n < lim else _varint(len(value))) + value
        part += _headers_bytes(headers) if headers else b"\x00"
        n = len(part) << 1
        out += vt[n] if n < lim else _varint(len(part))
        out += part
    return out, max_ts


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    compression: int = _compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytearray:
    """One magic-2 record batch (base offset 0, CreateTime) with a valid CRC32C;
    ``transactional`` sets the batch's transactional attribute bit."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = records[0][3]
    body, max_ts = encode_records(records, base_ts)
    if compression != _compression.NONE:
        body = bytearray(_compression.compress(compression, body))
    out = bytearray(HEADER_SIZE)
    out += body
    # By position, in header order: keywords cost a one-record batch about a tenth more.
    write_header(
        out,
        0,  # base offset: the broker assigns it
        -1,  # partition leader epoch
        compression | (TRANSACTIONAL_MASK if transactional else 0),
        len(records) - 1,  # last offset delta
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return out


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Estimated encoded size of one record (used for batch_size and buffer_memory)."""
    size = RECORD_OVERHEAD
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if headers:
        for name, hvalue in headers:
            size += len(name) + 2 + (len(hvalue) if hvalue is not None else 0)
    return size


# --------------------------------------------------------------------------- batches
