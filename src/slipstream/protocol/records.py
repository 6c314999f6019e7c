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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from itertools import chain, cycle, repeat
from operator import add
from typing import NamedTuple, Protocol, TypeVar

from slipstream.protocol import compression as _compression
from slipstream.protocol.primitives import DecodeError, read_uvarint, read_varint, write_varint
from slipstream.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    InvalidBatch,
    framed_header,
    parse_header,
    validate_batch,
    write_header,
)
from slipstream.protocol.varint_tables import TABLE_LIMIT, UNZIGZAG, UNZIGZAG_2

NO_TIMESTAMP = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

# Ready-made encodings of zigzag values below 2**14 (1- and 2-byte varints): lengths,
# offset deltas and timestamp deltas of a typical batch all land here, so the encoder
# appends a cached bytes object instead of looping bit by bit.
# One byte z below 0x80; above, (z & 0x7F) | 0x80 then z >> 7 - built by C-level
# iterators (the low byte cycles through 0x80-0xFF, the high byte counts up every 0x80).
_VARINT_TABLE: list[bytes] = list(map(bytes, zip(range(0x80)))) + list(
    map(
        bytes,
        zip(
            cycle(range(0x80, 0x100)),
            chain.from_iterable(repeat(high, 0x80) for high in range(1, TABLE_LIMIT >> 7)),
        ),
    )
)
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
    if z < TABLE_LIMIT:
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

    write_header(
        out,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
    )
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
    batch: memoryview | bytes | bytearray,
    *,
    verify_crc: bool = True,
    max_uncompressed: int | None = None,
) -> tuple[BatchHeader, list[Record]]:
    """Decode exactly one batch (decompressing as needed) into its header and records.

    Raises InvalidBatch for a malformed or damaged batch (or, with ``max_uncompressed``,
    one whose records expand past that many bytes), UnsupportedCompression for a codec
    id this module does not know.
    """
    header, data, pos = _open_batch(batch, verify_crc, max_uncompressed)
    fields = _decode_fields(data, pos, header, _Fields, "", -1)
    is_control = header.is_control
    # Field order of _Fields: topic, partition, offset, key, value, timestamp, headers,
    # timestamp_type, leader_epoch.
    # A Record is mutable: it gets its own empty headers list.
    return header, [
        Record(f[2], f[5], f[3], f[4], f[6] or [], f[7], f[8], is_control) for f in fields
    ]


def decode_messages(
    batch: bytes | memoryview,
    cls: type[M],
    topic: str,
    partition: int,
    *,
    verify_crc: bool = True,
) -> tuple[BatchHeader, list[M]]:
    """Decode one batch straight into ``cls`` instances (the consumer's message type).

    One object per record, built with ``tuple.__new__`` in :class:`MessageFields`
    order: the consumers hand these to the application as they are, so nothing is
    re-wrapped per record. Same checks and errors as :func:`decode_batch`.
    """
    header, data, pos = _open_batch(batch, verify_crc)
    return header, _decode_fields(data, pos, header, cls, topic, partition)


def _open_batch(
    batch: memoryview | bytes | bytearray, verify_crc: bool, max_uncompressed: int | None = None
) -> tuple[BatchHeader, bytes, int]:
    """Check one batch; return its header, the bytes holding its records and where they start."""
    view = memoryview(batch)
    header = validate_batch(view) if verify_crc else framed_header(view)
    codec = header.compression
    if codec == _compression.NONE:
        # Records are sliced out of bytes (cheaper than slicing a view and copying);
        # a bytes batch is read in place, anything else is copied once.
        return header, batch if isinstance(batch, bytes) else view.tobytes(), HEADER_SIZE
    try:
        if max_uncompressed is None:
            data = _compression.decompress(codec, view[HEADER_SIZE:])
        else:
            data = bytes(_compression.decompress_bounded(codec, view[HEADER_SIZE:], max_uncompressed))
    except (_compression.CorruptCompressedData, _compression.DecompressedTooLarge) as exc:
        raise InvalidBatch(f"batch at offset {header.base_offset}: {exc}", corrupt=True) from exc
    return header, bytes(data), 0


class MessageFields(NamedTuple):
    """The fields of a consumed record, in the order :func:`decode_messages` builds them.

    Consumer message types subclass this (adding only their own constructor), so the
    decoder can build them with ``tuple.__new__`` whatever their constructor's order.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]]
    timestamp_type: int
    leader_epoch: int


M = TypeVar("M", bound=MessageFields)


class _Fields(MessageFields):
    __slots__ = ()


class _NoHeaders(list[tuple[str, bytes | None]]):
    """The headers of every consumed record that has none: one shared, read-only empty
    list (equal to ``[]``), so the decoder allocates nothing for them."""

    __slots__ = ()

    def _read_only(self, *_args: object, **_kwargs: object) -> None:
        raise TypeError("a consumed record's empty headers are read-only; copy: list(headers)")

    append = extend = insert = remove = clear = sort = reverse = _read_only
    pop = __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]


NO_HEADERS: list[tuple[str, bytes | None]] = _NoHeaders()


def _read_long_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of 3 or more bytes (the record loop inlines the short ones)."""
    z, pos = read_uvarint(data, pos)
    return (z >> 1) ^ -(z & 1), pos


def _decode_fields(
    data: bytes, pos: int, header: BatchHeader, cls: type[M], topic: str, partition: int
) -> list[M]:
    # The per-record loop of every consumer. It only parses and checks: each record
    # leaves its timestamp delta, key and value in three lists (list.append is
    # specialized to a few ns), everything constant across the batch is left out, and
    # the messages are built afterwards in C by map/zip (below). Each varint is read
    # inline with 1- and 2-byte table fast paths. Keep it flat: a function call per
    # field would double its cost.
    base_offset = header.base_offset
    count = header.record_count
    end = len(data)
    ts_deltas: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    # Exceptions, rare enough to keep out of the common path: records whose offset
    # delta is not their index (compacted batches), records that have headers.
    odd_offsets: list[tuple[int, int]] = []
    with_headers: list[tuple[int, list[tuple[str, bytes | None]]]] = []
    unzz = UNZIGZAG
    unzz2 = UNZIGZAG_2
    long_varint = _read_long_varint
    offset_delta = 0
    try:
        for i in range(count):
            b = data[pos]
            if b < 0x80:
                length = unzz[b]
                pos += 1
            else:
                v = unzz2[b + data[pos + 1] * 0x80]
                if v is None:
                    length, pos = long_varint(data, pos)
                else:
                    length = v
                    pos += 2
            stop = pos + length
            if length < 0 or stop > end:
                raise InvalidBatch(
                    f"record of {length} bytes overruns the batch at offset {base_offset}"
                )
            # pos + 1: the attributes byte is unused in v2
            b = data[pos + 1]
            if b < 0x80:
                ts_deltas.append(unzz[b])
                pos += 2
            else:
                v = unzz2[b + data[pos + 2] * 0x80]
                if v is None:
                    v, pos = long_varint(data, pos + 1)
                else:
                    pos += 3
                ts_deltas.append(v)
            b = data[pos]
            if b < 0x80:
                offset_delta = unzz[b]
                pos += 1
            else:
                v = unzz2[b + data[pos + 1] * 0x80]
                if v is None:
                    offset_delta, pos = long_varint(data, pos)
                else:
                    offset_delta = v
                    pos += 2
            if offset_delta != i:
                odd_offsets.append((i, offset_delta))
            b = data[pos]
            if b == 1:  # zigzag -1: null key, the usual case
                keys.append(None)
                pos += 1
            else:
                if b < 0x80:
                    n = unzz[b]
                    pos += 1
                else:
                    v = unzz2[b + data[pos + 1] * 0x80]
                    if v is None:
                        n, pos = long_varint(data, pos)
                    else:
                        n = v
                        pos += 2
                if n < 0:
                    keys.append(None)
                else:
                    keys.append(data[pos : pos + n])
                    pos += n
            b = data[pos]
            if b < 0x80:
                n = unzz[b]
                pos += 1
            else:
                v = unzz2[b + data[pos + 1] * 0x80]
                if v is None:
                    n, pos = long_varint(data, pos)
                else:
                    n = v
                    pos += 2
            if n < 0:
                values.append(None)
            else:
                values.append(data[pos : pos + n])
                pos += n
            if data[pos] == 0:
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos)
                with_headers.append((i, headers))
            if pos != stop:
                raise InvalidBatch(
                    f"record at offset {base_offset + offset_delta} declares {length} bytes "
                    f"but its fields take {length + pos - stop}"
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

    offsets: Iterable[int] = range(base_offset, base_offset + count)
    if odd_offsets:
        offsets = list(offsets)
        for i, offset_delta in odd_offsets:
            offsets[i] = base_offset + offset_delta
    # With LogAppendTime every record carries the broker's time, stored as max timestamp.
    if header.is_log_append_time:
        timestamps: Iterable[int] = repeat(header.max_timestamp)
        ts_type = LOG_APPEND_TIME
    else:
        timestamps = map(add, repeat(header.base_timestamp), ts_deltas)
        ts_type = CREATE_TIME
    all_headers: Iterable[list[tuple[str, bytes | None]]] = repeat(NO_HEADERS)
    if with_headers:
        all_headers = [NO_HEADERS] * count
        for i, headers in with_headers:
            all_headers[i] = headers
    # One object per record, made in C: tuple.__new__(cls, fields) keeps the zip's
    # tuple as it is (an exact tuple), so zip reuses it for the next record and no
    # per-record argument tuple is allocated or built in bytecode. Field order is
    # MessageFields'.
    fields = zip(
        repeat(topic),
        repeat(partition),
        offsets,
        keys,
        values,
        timestamps,
        all_headers,
        repeat(ts_type),
        repeat(header.partition_leader_epoch),
    )
    new: Callable[[type[M], tuple[object, ...]], M] = tuple.__new__
    return list(map(new, repeat(cls), fields))


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
