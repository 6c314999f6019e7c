"""Record batch v2 (magic 2) headers: parse, validate and stamp without touching the records.

The broker stores client batches verbatim; it only reads the 61-byte header, checks
the CRC, and rewrites the base offset (and, for LogAppendTime topics, the max
timestamp, which needs a new CRC). Decoding individual records lives in
``records.py``; nothing here decompresses.

Layout (offsets in bytes)::

    0  base_offset int64         27 base_timestamp int64
    8  batch_length int32        35 max_timestamp int64
    12 partition_leader_epoch    43 producer_id int64
    16 magic int8                51 producer_epoch int16
    17 crc uint32 (CRC32C of 21..end)   53 base_sequence int32
    21 attributes int16          57 record_count int32
    23 last_offset_delta int32   61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import compression
from .schema import fast_frozen_init

HEADER_SIZE = 61
# base_offset + batch_length: what must be read before the rest of the size is known.
LOG_OVERHEAD = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43  # then producer_epoch and base_sequence

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # set: LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_PRODUCER = struct.Struct(">qhi")


class InvalidBatch(ValueError):
    """A batch that cannot be accepted; ``reason`` names the protocol problem."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        # corrupt: bytes damaged (CORRUPT_MESSAGE); otherwise malformed (INVALID_RECORD).
        self.corrupt = corrupt


@fast_frozen_init  # made several times per produced batch: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed 61-byte header of a v2 record batch, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at int32 max, as in Kafka.
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buf: memoryview | bytes, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; the caller guarantees HEADER_SIZE bytes are there."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def write_header(
    out: bytearray,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
) -> None:
    """Fill in the header of a batch being built: ``out`` holds HEADER_SIZE reserved bytes
    and then the whole records section. The length comes from ``out``, then the CRC.
    The fields are in header order (a per-batch caller may pass them by position)."""
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,  # magic
        0,  # crc, patched below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    _UINT32.pack_into(out, CRC_OFFSET, compute_crc(memoryview(out)))


def _crc32c_first_use(data: memoryview | bytes | bytearray) -> int:
    # Imported on first use: the crc32c package's import (importlib.metadata for its
    # version) costs ~25 ms of broker start-up. A serving broker calls load_crc32c once
    # its first requests are answered (broker.serve_forever), so no produce pays it then.
    load_crc32c()
    return int(_crc32c(data))


_crc32c: Callable[[memoryview | bytes | bytearray], int] = _crc32c_first_use


def load_crc32c() -> None:
    """Import the C CRC-32C now (idempotent)."""
    global _crc32c
    from crc32c import crc32c

    _crc32c = crc32c


def compute_crc(batch: memoryview | bytes) -> int:
    return int(_crc32c(batch[ATTRIBUTES_OFFSET:]))


def framed_header(batch: memoryview | bytes) -> BatchHeader:
    """The header of one complete batch (exactly its bytes): magic 2, length matching."""
    if len(batch) < HEADER_SIZE:
        raise InvalidBatch(f"record batch of {len(batch)} bytes is shorter than its header")
    header = parse_header(batch)
    if header.magic != 2:
        raise InvalidBatch(f"unsupported record batch magic {header.magic}; only magic 2 is served")
    if header.size != len(batch):
        raise InvalidBatch(
            f"record batch length field says {header.size} bytes but {len(batch)} were sent"
        )
    return header


def validate_batch(batch: memoryview | bytes) -> BatchHeader:
    """Check one complete batch (exactly its bytes) and return its header."""
    header = framed_header(batch)
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise InvalidBatch("record batch has a negative record count or offset delta")
    if compute_crc(batch) != header.crc:
        raise InvalidBatch("record batch CRC32C does not match its contents", corrupt=True)
    return header


def split_batches(buf: memoryview) -> Iterator[memoryview]:
    """Split a produce payload into batches; a partial or bogus length raises InvalidBatch."""
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise InvalidBatch("truncated record batch header")
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        size = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise InvalidBatch(f"record batch length {length} does not fit the payload")
        yield buf[pos : pos + size]
        pos += size


def scan_valid_prefix(buf: memoryview | bytes) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete, CRC-valid batch from the start.

    Stops silently at the first incomplete or damaged batch: log recovery keeps
    exactly what this yields and truncates the rest.
    """
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        size = header.size
        if header.magic != 2 or header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return
        if pos + size > end:
            return
        if compute_crc(buf[pos + 0 : pos + size]) != header.crc:
            return
        yield pos, header
        pos += size


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Stamp the broker-assigned offset. The CRC does not cover it, so no recompute."""
    _INT64.pack_into(batch, 0, base_offset)


def set_log_append_time(batch: bytearray | memoryview, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as max timestamp; rewrites the CRC."""
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(batch, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(batch, CRC_OFFSET, int(_crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])))


def set_producer_state(
    batch: bytearray | memoryview, producer_id: int, producer_epoch: int, base_sequence: int
) -> None:
    """Rewrite the producer id, epoch and base sequence (a producer renumbering unsent
    batches under a new epoch, KIP-360); rewrites the CRC."""
    _PRODUCER.pack_into(batch, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    _UINT32.pack_into(batch, CRC_OFFSET, int(_crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])))


def recompress(
    batch: memoryview | bytes, header: BatchHeader, codec: int, raw: bytes | bytearray | memoryview | None = None
) -> bytearray:
    """The batch with its records section compressed with ``codec`` instead (a topic's
    ``compression.type``). Records, offsets, timestamps and producer fields are unchanged;
    the attributes, length and CRC are rewritten. ``raw``: the records section already
    decompressed (the produce path has it from its bounded check)."""
    if raw is None:
        section = memoryview(batch)[HEADER_SIZE : header.size]
        raw = section if header.compression == compression.NONE else compression.decompress(header.compression, section)
    body = bytes(raw) if codec == compression.NONE else compression.compress(codec, raw)
    out = bytearray(memoryview(batch)[:HEADER_SIZE])
    out += body
    _INT32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes)
    _UINT32.pack_into(out, CRC_OFFSET, int(_crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])))
    return out
