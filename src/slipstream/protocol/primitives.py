"""Kafka wire primitives: fixed-width ints, (zigzag) varints, strings, bytes, UUIDs.

Readers take (buf, pos) and return (value, new_pos); writers append to a bytearray.
These are the building blocks the schema compiler emits calls to, and what
hand-written codecs (headers, record batches) share.
"""

from __future__ import annotations

import struct
import uuid

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


class DecodeError(ValueError):
    """Bytes that do not parse as the expected message (maps to INVALID_REQUEST / CORRUPT_MESSAGE)."""


def read_uvarint(buf: memoryview | bytes | bytearray, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise DecodeError("truncated varint") from None
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint is too long")


def write_uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf: memoryview | bytes | bytearray, pos: int) -> tuple[int, int]:
    """Zigzag-encoded signed varint (varint and varlong share the encoding)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    write_uvarint(out, (value << 1) ^ (value >> 63))


def uvarint_size(value: int) -> int:
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def _need(buf: memoryview | bytes, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise DecodeError(f"field of {n} bytes runs past the end of the message")


def read_string(buf: memoryview | bytes, pos: int) -> tuple[str | None, int]:
    (n,) = INT16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return str(buf[pos : pos + n], "utf-8"), pos + n


def read_compact_string(buf: memoryview | bytes, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return str(buf[pos : pos + n], "utf-8"), pos + n


def write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    out += INT16.pack(len(data))
    out += data


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


def read_bytes(buf: memoryview | bytes, pos: int) -> tuple[bytes | None, int]:
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return bytes(buf[pos : pos + n]), pos + n


def read_compact_bytes(buf: memoryview | bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return bytes(buf[pos : pos + n]), pos + n


def read_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    """Record batches stay a view into the request buffer: never copied on decode."""
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return buf[pos : pos + n], pos + n


def read_compact_records(buf: memoryview, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return buf[pos : pos + n], pos + n


def read_uuid(buf: memoryview | bytes, pos: int) -> tuple[uuid.UUID, int]:
    _need(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def read_array_length(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    (n,) = INT32.unpack_from(buf, pos)
    return n, pos + 4


def read_compact_array_length(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def skip_tagged_fields(buf: memoryview | bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _need(buf, pos, size)
        pos += size
    return pos
