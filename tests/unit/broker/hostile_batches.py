"""Hand-made record batches a hostile client might send (imported by name, like broker_helpers).

``reframe`` takes the header fields of a real batch and puts any records section under
them, with a correct length and CRC: the damage is inside, where only a record-level
check can see it.
"""

from __future__ import annotations

import struct

from slipstream.protocol import compression
from slipstream.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    compute_crc,
)
from slipstream.protocol.records import ProducerRecord, build_batch


def good_batch(n: int = 1, *, keyed: bool = True, value: bytes = b"v") -> bytes:
    return build_batch(
        [ProducerRecord(f"k{i}".encode() if keyed else None, value) for i in range(n)]
    )


def records_section(batch: bytes) -> bytes:
    """The uncompressed records of an uncompressed batch."""
    return batch[HEADER_SIZE:]


def reframe(
    batch: bytes,
    *,
    records: bytes | None = None,
    count: int | None = None,
    last_offset_delta: int | None = None,
    codec: int | None = None,
    compressed: bytes | None = None,
) -> memoryview:
    """``batch`` with its records section, count, offset delta or codec replaced; valid CRC.

    ``records`` is compressed with ``codec`` unless ``compressed`` gives the exact bytes.
    """
    out = bytearray(batch[:HEADER_SIZE])
    body = records if records is not None else batch[HEADER_SIZE:]
    if codec is not None:
        attributes = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0]
        struct.pack_into(">h", out, ATTRIBUTES_OFFSET, (attributes & ~COMPRESSION_MASK) | codec)
        body = compressed if compressed is not None else compression.compress(codec, body)
    out += body
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    if last_offset_delta is not None:
        struct.pack_into(">i", out, 23, last_offset_delta)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(bytes(out)))
    return memoryview(out)
