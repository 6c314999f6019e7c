"""Compression codecs: round trips, wire shapes other clients depend on, bad input."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    CorruptCompressedData,
    UnsupportedCompression,
    codec_by_name,
    compress,
    decompress,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
# Compressible and incompressible parts, bigger than snappy's 32 KiB chunks and
# lz4's 64 KiB blocks so multi-block paths run.
LARGE = (b"slipstream record payload " * 40_000) + os.urandom(300_000)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    "data", [b"", b"x", b"hello hello hello hello", LARGE], ids=["empty", "one", "small", "large"]
)
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_bytearray_and_memoryview(codec: int) -> None:
    data = b"abc" * 1000
    for wrapped in (bytearray(data), memoryview(data)):
        packed = compress(codec, wrapped)
        assert decompress(codec, memoryview(packed)) == data
        assert decompress(codec, bytearray(packed)) == data


@settings(max_examples=50, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip_property(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


def test_codec_by_name() -> None:
    assert [codec_by_name(n) for n in ("none", "gzip", "snappy", "lz4", "zstd")] == CODECS
    assert codec_by_name("GZIP") == GZIP
    with pytest.raises(UnsupportedCompression, match="brotli"):
        codec_by_name("brotli")


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 42])
def test_unknown_codec_id(codec: int) -> None:
    with pytest.raises(UnsupportedCompression, match=f"codec id {codec}"):
        compress(codec, b"data")
    with pytest.raises(UnsupportedCompression):
        decompress(codec, b"data")
    assert issubclass(UnsupportedCompression, ValueError)


# -- gzip / zstd: plain standard streams


def test_gzip_is_a_standard_stream() -> None:
    assert gzip.decompress(compress(GZIP, LARGE)) == LARGE
    assert decompress(GZIP, gzip.compress(b"from the stdlib")) == b"from the stdlib"


def test_zstd_frame_without_content_size() -> None:
    # A streaming compressor cannot know the size up front, so its frame header
    # omits the content size (as zstd-jni's streams do); decompression must cope.
    streamer = cramjam.zstd.Compressor()
    streamer.compress(LARGE)
    frame = bytes(streamer.finish())
    assert frame[:4] == b"\x28\xb5\x2f\xfd"
    descriptor = frame[4]
    assert descriptor >> 6 == 0 and not descriptor & 0x20  # no content-size field
    assert decompress(ZSTD, frame) == LARGE


# -- lz4: the frame format, with the flags the Java client insists on


def test_lz4_writes_frames_java_can_read() -> None:
    frame = compress(LZ4, LARGE)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic (little-endian 0x184D2204)
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # independent blocks: Java rejects linked ones
    assert not flg & 0x03  # reserved bits and dictionary id clear
    assert 4 <= (bd >> 4) & 0x07 <= 7  # block max size 64 KiB..4 MiB


def test_lz4_reads_frames_with_linked_blocks_and_checksums() -> None:
    # cramjam's one-shot frame (linked blocks, content checksum), as e.g. librdkafka may send.
    frame = bytes(cramjam.lz4.compress(LARGE))
    assert decompress(LZ4, frame) == LARGE


# -- snappy: xerial framing (Java) and raw blocks (librdkafka)

# A raw snappy block by hand: varint uncompressed length 5, one literal of 5 bytes
# (tag byte (5 - 1) << 2).
RAW_HELLO = b"\x05\x10hello"
RAW_WORLD = b"\x06\x14 world"


def _xerial(*blocks: bytes) -> bytes:
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    return header + b"".join(struct.pack(">i", len(b)) + b for b in blocks)


def test_snappy_raw_block() -> None:
    assert decompress(SNAPPY, RAW_HELLO) == b"hello"
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(LARGE))) == LARGE


def test_snappy_xerial_known_bytes() -> None:
    assert decompress(SNAPPY, _xerial(RAW_HELLO)) == b"hello"
    assert decompress(SNAPPY, _xerial(RAW_HELLO, RAW_WORLD)) == b"hello world"
    assert decompress(SNAPPY, _xerial()) == b""


def test_snappy_writes_xerial_framing() -> None:
    packed = compress(SNAPPY, LARGE)
    assert packed[:16] == XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
    # Walk the chunks ourselves: each is [int32 length][raw snappy block] of <= 32 KiB.
    pos, out = 16, bytearray()
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + size]))
        assert len(block) <= 32 * 1024
        out += block
        pos += 4 + size
    assert pos == len(packed)
    assert bytes(out) == LARGE


def test_snappy_bad_xerial_framing() -> None:
    with pytest.raises(CorruptCompressedData, match="header"):
        decompress(SNAPPY, XERIAL_MAGIC + b"\x00\x00")
    with pytest.raises(CorruptCompressedData, match="overruns"):
        decompress(SNAPPY, _xerial(RAW_HELLO)[:-2])
    with pytest.raises(CorruptCompressedData, match="block length"):
        decompress(SNAPPY, _xerial(RAW_HELLO) + b"\x00\x00")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_corrupt(codec: int) -> None:
    with pytest.raises(CorruptCompressedData):
        decompress(codec, b"\xff\xfe this is not compressed data")
    assert issubclass(CorruptCompressedData, ValueError)
