"""Record batch compression codecs, by the attribute id Kafka stores in bits 0-2.

All codecs go through ``cramjam`` (one native dependency for all five). Wire details
that matter for interoperability:

- lz4 is the LZ4 *frame* format. The Java client decodes each block on its own and
  rejects frames whose block-independence flag is clear, so we always write
  independent blocks (cramjam's default is linked blocks).
- snappy comes in two shapes: the Java client writes xerial framing (an 8-byte magic,
  two int32 versions, then ``[int32 length][raw snappy block]`` chunks); librdkafka
  writes one raw snappy block. We read both and write xerial, which every client reads.
- gzip is a plain gzip stream; zstd is a plain zstd frame (the content size may be
  absent from the frame header, which cramjam's decoder handles).

The broker decompresses produced batches only through ``decompress_bounded``: it
decodes into a buffer of the allowed size and gives up as soon as the output would
pass it, so a few KiB of compressed zeros cannot make it allocate gigabytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

_NAMES = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
CODEC_NAMES = {codec: name for name, codec in _NAMES.items()}

# xerial snappy-java stream header: magic, then version and minimum compatible version.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)  # 16
# snappy-java's default chunk size; keeps each block small enough for any reader.
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

# The Java client's defaults (KIP-390): zlib's default level and zstd's level 3.
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3


class UnsupportedCompression(ValueError):
    """A compression codec id (or name) this implementation does not know."""


class CorruptCompressedData(ValueError):
    """Compressed bytes that do not decode with the codec the batch names."""


def codec_by_name(name: str) -> int:
    """Map a ``compression.type`` setting ("none", "gzip", ...) to its attribute id."""
    try:
        return _NAMES[name.strip().lower()]
    except KeyError:
        raise UnsupportedCompression(
            f"unknown compression type {name!r}; expected one of {', '.join(_NAMES)}"
        ) from None


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress ``data`` the way Kafka clients do for codec id ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=_GZIP_LEVEL))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        # The streaming compressor only takes bytes.
        compressor.compress(data if isinstance(data, bytes) else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise _unsupported(codec)


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section written by any Kafka client with ``codec``."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptCompressedData(
            f"{CODEC_NAMES[codec]} data does not decompress: {exc}"
        ) from exc
    raise _unsupported(codec)


class DecompressedTooLarge(ValueError):
    """Compressed bytes that expand past the size the caller allows."""


# First guess at the expanded size, as a multiple of the compressed size: most batches
# fit, so the full-limit buffer is only allocated for highly compressible ones.
_FIRST_GUESS_RATIO = 8
_FIRST_GUESS_EXTRA = 64 * 1024


def decompress_bounded(codec: int, data: bytes | bytearray | memoryview, limit: int) -> bytes | bytearray:
    """``decompress`` that refuses output longer than ``limit`` bytes without producing it.

    Raises DecompressedTooLarge past the limit, CorruptCompressedData for bytes that do
    not decode, UnsupportedCompression for an unknown codec.
    """
    if codec == NONE:
        if len(data) > limit:
            raise DecompressedTooLarge(f"{len(data)} bytes exceed the limit of {limit}")
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise _unsupported(codec)
    try:
        if codec == SNAPPY:
            return _snappy_decompress_bounded(memoryview(data), limit)
        guess = min(limit, len(data) * _FIRST_GUESS_RATIO + _FIRST_GUESS_EXTRA)
        while True:
            out = bytearray(guess + 1)
            try:
                n = _DECOMPRESS_INTO[codec](data, out)
            except cramjam.DecompressionError as exc:
                if "whole buffer" not in str(exc):
                    raise
                n = guess + 1
            if n <= guess:
                del out[n:]
                return out  # not copied into bytes: indexing a bytearray is as cheap
            if guess >= limit:
                raise DecompressedTooLarge(
                    f"{CODEC_NAMES[codec]} data expands past the limit of {limit} bytes"
                )
            guess = limit
    except cramjam.DecompressionError as exc:
        raise CorruptCompressedData(f"{CODEC_NAMES[codec]} data does not decompress: {exc}") from exc


_DECOMPRESS_INTO = {
    GZIP: cramjam.gzip.decompress_into,
    LZ4: cramjam.lz4.decompress_into,
    ZSTD: cramjam.zstd.decompress_into,
}


def _snappy_decompress_bounded(view: memoryview, limit: int) -> bytes:
    # Snappy blocks state their expanded length up front: check it before decoding.
    blocks = [view] if view[:len(XERIAL_MAGIC)] != XERIAL_MAGIC else list(_xerial_blocks(view))
    total = 0
    for block in blocks:
        total += int(cramjam.snappy.decompress_raw_len(block))
        if total > limit:
            raise DecompressedTooLarge(f"snappy data expands past the limit of {limit} bytes")
    out = bytearray(total)
    pos = 0
    for block in blocks:
        pos += int(cramjam.snappy.decompress_raw_into(block, memoryview(out)[pos:]))
    if pos != total:
        raise CorruptCompressedData("snappy block decodes to fewer bytes than its header states")
    return bytes(out)


def _xerial_blocks(view: memoryview) -> Iterator[memoryview]:
    """The blocks of a xerial snappy stream, each checked to lie inside it when it is reached."""
    if len(view) < _XERIAL_HEADER_SIZE:
        raise CorruptCompressedData("xerial snappy stream is shorter than its 16-byte header")
    pos = _XERIAL_HEADER_SIZE
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptCompressedData("xerial snappy stream ends inside a block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise CorruptCompressedData(f"xerial snappy block of {size} bytes overruns the stream")
        yield view[pos : pos + size]
        pos += size


def _unsupported(codec: int) -> UnsupportedCompression:
    return UnsupportedCompression(
        f"unsupported compression codec id {codec}; known ids are "
        + ", ".join(f"{c} ({n})" for c, n in CODEC_NAMES.items())
    )


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        # librdkafka (and other non-Java clients): one raw snappy block.
        return bytes(cramjam.snappy.decompress_raw(view))
    parts = [bytes(cramjam.snappy.decompress_raw(block)) for block in _xerial_blocks(view)]
    return parts[0] if len(parts) == 1 else b"".join(parts)
