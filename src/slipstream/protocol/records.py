"""Record batch v2 (magic 2): build batches from records and decode them back.

Used by the producer, the consumers and tools; the broker's data path never decodes
records (it only reads headers, see ``record_batch.py``).

One record inside a batch, all varints zigzag-encoded::

    length varint | attributes int8 (unused, 0) | timestamp_delta varlong
    | offset_delta varint | key_length varint (-1: null) | key
    | value_length varint (-1: null) | value
    | header_count varint | header_count x (key_length varint, key utf-8,
                                             value_length varint (-1: null), value)

The records section (everything after the 61-byte batch header) is what gets
compressed. Control batches (attribute bit 5) carry transaction markers: the key is
``version int16, type int16`` (0 ABORT, 1 COMMIT), the value ``version int16,
coordinator_epoch int32``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from slipstream.protocol import compression as _compression
from slipstream.protocol.primitives import DecodeError, read_uvarint, read_varint, write_varint
from slipstream.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    InvalidBatch,
    compute_crc,
    parse_header,
    validate_batch,
)

NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# Batch header with the CRC written as 0; the CRC is patched in once the body is known.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

# Ready-made encodings of zigzag values below 2**14 (1- and 2-byte varints): lengths,
# offset deltas and timestamp deltas of a typical batch all land here, so the encoder
# appends a cached bytes object instead of looping bit by bit.
_TABLE_LIMIT = 1 << 14
_VARINT_TABLE: list[bytes] = [bytes((z,)) for z in range(0x80)] + [
    bytes(((z & 0x7F) | 0x80, z >> 7)) for z in range(0x80, _TABLE_LIMIT)
]
_NULL = _VARINT_TABLE[1]  # zigzag(-1): null key/value
_ZERO = _VARINT_TABLE[0]


class RecordSpec(Protocol):
    """What ``build_batch`` needs from each record (``ProducerRecord`` fits)."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...
    @property
    def timestamp_ms(self) -> int: ...


@dataclass(slots=True)
class ProducerRecord:
    """A record to be produced. The timestamp is set by the caller (time is injected)."""

    key: bytes | None
    value: bytes | None
    _: KW_ONLY  # headers and timestamp by name: both positional orders are plausible
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int = NO_TIMESTAMP


@dataclass(slots=True)
class Record:
    """A decoded record, with the batch-level facts a consumer needs about it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_type: int = CREATE_TIME
    # The batch's partition leader epoch: consumers send it back with commits.
    leader_epoch: int = -1
    is_control: bool = False

    @property
    def control_type(self) -> int | None:
        """CONTROL_ABORT / CONTROL_COMMIT for a transaction marker, None for data records."""
        if not self.is_control or self.key is None or len(self.key) < 4:
            return None
        return int(_CONTROL_KEY.unpack_from(self.key)[1])


# ---------------------------------------------------------------------------- encode


def _put(out: bytearray, n: int) -> None:
    """Append ``n`` as a zigzag varint."""
    z = (n << 1) ^ (n >> 63)
    if z < _TABLE_LIMIT:
        out += _VARINT_TABLE[z]
    else:
        write_varint(out, n)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += _NULL
    else:
        _put(out, len(data))
        out += data


def _encode_records(out: bytearray, records: Sequence[RecordSpec], base_ts: int) -> int:
    """Append the records to ``out``; return the max timestamp."""
    max_ts = NO_TIMESTAMP
    for offset_delta, rec in enumerate(records):
        ts = rec.timestamp_ms
        if ts > max_ts:
            max_ts = ts
        body = bytearray(b"\x00")  # attributes: unused in v2
        _put(body, ts - base_ts)
        _put(body, offset_delta)
        _put_bytes(body, rec.key)
        _put_bytes(body, rec.value)
        headers = rec.headers
        if headers:
            _put(body, len(headers))
            for name, hvalue in headers:
                _put_bytes(body, name.encode())
                _put_bytes(body, hvalue)
        else:
            body += _ZERO
        _put(out, len(body))
        out += body
    return max_ts


def build_batch(
    records: Sequence[RecordSpec],
    *,
    base_offset: int = 0,
    compression: int = _compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = CREATE_TIME,
    is_control: bool = False,
) -> bytes:
    """Encode ``records`` as one magic-2 batch with a valid CRC32C.

    The base timestamp is the first record's; the max timestamp is the largest.
    Raises ValueError for an empty batch and UnsupportedCompression for an unknown codec.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    codec = compression
    attributes = codec & COMPRESSION_MASK
    if codec != attributes:
        raise _compression.UnsupportedCompression(f"unsupported compression codec id {codec}")
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK

    base_ts = records[0].timestamp_ms
    out = bytearray(HEADER_SIZE)
    if codec == _compression.NONE:
        max_ts = _encode_records(out, records, base_ts)
    else:
        plain = bytearray()
        max_ts = _encode_records(plain, records, base_ts)
        out += _compression.compress(codec, plain)

    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,  # magic
        0,  # crc, patched below
        attributes,
        len(records) - 1,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(memoryview(out)))
    return bytes(out)


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (one COMMIT or ABORT control record)."""
    if control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise ValueError(f"unknown control record type {control_type}; expected 0 or 1")
    marker = ProducerRecord(
        key=_CONTROL_KEY.pack(0, control_type),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp_ms=timestamp_ms,
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


# ---------------------------------------------------------------------------- decode


def decode_batch(
    batch: memoryview | bytes | bytearray, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[Record]]:
    """Decode exactly one batch (decompressing as needed) into its header and records.

    Raises InvalidBatch for a malformed or damaged batch, UnsupportedCompression for a
    codec id this module does not know.
    """
    view = memoryview(batch)
    if verify_crc:
        header = validate_batch(view)
    else:
        if len(view) < HEADER_SIZE:
            raise InvalidBatch(f"record batch of {len(view)} bytes is shorter than its header")
        header = parse_header(view)
        if header.magic != 2:
            raise InvalidBatch(f"unsupported record batch magic {header.magic}")
        if header.size != len(view):
            raise InvalidBatch(
                f"record batch length field says {header.size} bytes but {len(view)} were given"
            )
    section = view[HEADER_SIZE:]
    codec = header.compression
    if codec == _compression.NONE:
        # One copy up front: slicing bytes is cheaper than slicing a view and copying.
        data = bytes(section)
    else:
        try:
            data = _compression.decompress(codec, section)
        except _compression.CorruptCompressedData as exc:
            raise InvalidBatch(
                f"batch at offset {header.base_offset}: {exc}", corrupt=True
            ) from exc
    return header, _decode_records(data, header)


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.is_log_append_time
    ts_type = LOG_APPEND_TIME if log_append else CREATE_TIME
    # With LogAppendTime every record carries the broker's time, stored as max timestamp.
    append_ts = header.max_timestamp
    epoch = header.partition_leader_epoch
    is_control = header.is_control
    end = len(data)
    records: list[Record] = []
    append = records.append
    pos = 0
    # Varints are read inline with one- and two-byte fast paths (lengths and deltas
    # below 8192 cover nearly every record); longer ones go through the primitive.
    try:
        for _ in range(header.record_count):
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_uvarint(data, pos)
            length = (b >> 1) ^ -(b & 1)
            stop = pos + length
            if length < 0 or stop > end:
                raise InvalidBatch(
                    f"record of {length} bytes overruns the batch at offset {base_offset}"
                )
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_uvarint(data, pos)
            ts_delta = (b >> 1) ^ -(b & 1)
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_uvarint(data, pos)
            offset_delta = (b >> 1) ^ -(b & 1)
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_uvarint(data, pos)
            n = (b >> 1) ^ -(b & 1)
            if n < 0:
                key = None
            else:
                key = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                b = (b & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                b, pos = read_uvarint(data, pos)
            n = (b >> 1) ^ -(b & 1)
            if n < 0:
                value = None
            else:
                value = data[pos : pos + n]
                pos += n
            b = data[pos]
            if b == 0:
                headers: list[tuple[str, bytes | None]] = []
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos)
            if pos != stop:
                raise InvalidBatch(
                    f"record at offset {base_offset + offset_delta} declares {length} bytes "
                    f"but its fields take {length + pos - stop}"
                )
            append(
                Record(
                    base_offset + offset_delta,
                    append_ts if log_append else base_ts + ts_delta,
                    key,
                    value,
                    headers,
                    ts_type,
                    epoch,
                    is_control,
                )
            )
    except (IndexError, DecodeError) as exc:
        raise InvalidBatch(
            f"batch at offset {base_offset} ends inside a record ({exc})", corrupt=True
        ) from exc
    if pos != end:
        raise InvalidBatch(
            f"batch at offset {base_offset} has {end - pos} bytes after its "
            f"{header.record_count} records"
        )
    return records


def _decode_headers(data: bytes, pos: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise InvalidBatch(f"negative record header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, pos = read_varint(data, pos)
        if n < 0:
            raise InvalidBatch(f"negative record header key length {n}")
        try:
            name = data[pos : pos + n].decode()
        except UnicodeDecodeError as exc:
            raise InvalidBatch(f"record header key is not UTF-8: {exc}") from exc
        pos += n
        n, pos = read_varint(data, pos)
        if n < 0:
            headers.append((name, None))
        else:
            headers.append((name, data[pos : pos + n]))
            pos += n
    return headers, pos


def iter_batches(
    buf: memoryview | bytes | bytearray, *, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode each batch of a concatenation (a Fetch response's records), control ones too.

    A trailing partial batch is skipped: brokers may cut the last batch at the fetch
    size limit.
    """
    for _header, batch in _split(buf):
        yield decode_batch(batch, verify_crc=verify_crc)


def iter_records(
    buf: memoryview | bytes | bytearray,
    *,
    include_control: bool = False,
    verify_crc: bool = True,
) -> Iterator[Record]:
    """Every record of a concatenation of batches, in order, skipping control batches
    unless ``include_control``; a trailing partial batch is skipped."""
    for header, batch in _split(buf):
        if header.is_control and not include_control:
            continue
        yield from decode_batch(batch, verify_crc=verify_crc)[1]


def _split(buf: memoryview | bytes | bytearray) -> Iterator[tuple[BatchHeader, memoryview]]:
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while end - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(
                f"record batch at byte {pos} has impossible length {header.batch_length}",
                corrupt=True,
            )
        size = header.size
        if pos + size > end:
            return  # partial trailing batch
        yield header, view[pos : pos + size]
        pos += size
