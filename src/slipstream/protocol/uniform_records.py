"""A fast, exact framing check for a records section whose records all share one shape.

Most producers fill a batch with records of one shape: the same key length (or no key),
the same value length, no headers; only the timestamp and offset deltas differ, and
they change only the width of two varints. For such a section one regular expression,
made per shape and cached, matches a whole record with its framing: the length prefix
must be the exact length the fields add up to, each varint must end where it should,
the key and value take exactly their declared bytes, and the header count is zero.
``re`` then tiles the section in C (``subn`` counts the matches and leaves nothing
behind only if the records cover the section exactly), instead of a Python loop of
about a microsecond per record.

This is only a shortcut: it accepts a section exactly when every record matches the
shape, in which case ``record_framing.check_records`` would accept it too with the same
keyless records. Anything else (mixed shapes, headers, a wrong count, damage) returns
None and the caller runs the full walk, which decides and words the error.
"""

from __future__ import annotations

import re

from .primitives import read_varint, write_varint

# Widths (in bytes) of the timestamp- and offset-delta varints a record may use and
# still match: up to ~2^27 ms (37 hours) of timestamps and 2^20 records in one batch.
_TIMESTAMP_DELTA_WIDTHS = (1, 2, 3, 4)
_OFFSET_DELTA_WIDTHS = (1, 2, 3)
# Shapes whose pattern is kept (a broker sees a few shapes per producer, over and over).
_MAX_CACHED_SHAPES = 256
_NULL = -1
_HEAD_BYTES = 32

_patterns: dict[tuple[int, int], re.Pattern[bytes]] = {}


def zigzag_varint(value: int) -> bytes:
    """The canonical (shortest) zigzag varint of ``value``."""
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def first_record_shape(data: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(key length, value length) of the first record, -1 for null; None if that record
    has headers or does not frame (the full walk then decides)."""
    # The fields before the key take at most 5 + 1 + 10 + 10 + 5 bytes: read them from a
    # short copy (indexing bytes is cheaper than indexing a view), then skip the key.
    try:
        head = bytes(data[:_HEAD_BYTES])
        length, pos = read_varint(head, 0)
        stop = pos + length
        pos += 1  # attributes
        _, pos = read_varint(head, pos)  # timestamp delta
        _, pos = read_varint(head, pos)  # offset delta
        key_length, pos = read_varint(head, pos)
        pos += max(key_length, 0)
        value_length, width = read_varint(bytes(data[pos : pos + 5]), 0)
        pos += width + max(value_length, 0)
        if stop > len(data) or pos + 1 != stop or data[pos] != 0:
            return None
    except (IndexError, ValueError):
        return None
    return max(key_length, _NULL), max(value_length, _NULL)


def _varint_of_width(width: int) -> bytes:
    """Any varint exactly ``width`` bytes long: continuation bytes, then a last byte."""
    return rb"[\x80-\xff]" * (width - 1) + rb"[\x00-\x7f]"


def _field(length: int) -> bytes:
    prefix = re.escape(zigzag_varint(length))
    return prefix + (b".{%d}" % length if length > 0 else b"")


def shape_pattern(key_length: int, value_length: int) -> re.Pattern[bytes]:
    """One record of the shape, with every (timestamp, offset) delta width it may use."""
    key = _field(key_length)
    value = _field(value_length)
    fixed = (
        1  # attributes
        + len(zigzag_varint(key_length))
        + max(key_length, 0)
        + len(zigzag_varint(value_length))
        + max(value_length, 0)
        + 1  # header count 0
    )
    branches = []
    for offset_width in _OFFSET_DELTA_WIDTHS:
        for ts_width in _TIMESTAMP_DELTA_WIDTHS:
            length = fixed + ts_width + offset_width
            branches.append(
                re.escape(zigzag_varint(length))
                + b"."  # attributes: any byte, as the walk skips it
                + _varint_of_width(ts_width)
                + _varint_of_width(offset_width)
                + key
                + value
                + b"\x00"
            )
    return re.compile(b"(?:" + b"|".join(branches) + b")", re.DOTALL)


def _pattern_for(shape: tuple[int, int]) -> re.Pattern[bytes]:
    pattern = _patterns.get(shape)
    if pattern is None:
        if len(_patterns) >= _MAX_CACHED_SHAPES:
            _patterns.clear()
        pattern = _patterns[shape] = shape_pattern(*shape)
    return pattern


def check_uniform_records(data: bytes | bytearray | memoryview, count: int) -> list[int] | None:
    """The keyless record indices if ``data`` is exactly ``count`` well-framed records of
    the first record's shape; None when that does not hold (run the full walk)."""
    global _last
    # Batches come in runs of one shape: try the last one's pattern before parsing the
    # first record (a mismatch costs one scan in C, then the shape is read as usual).
    last = _last
    if last is not None:
        shape, pattern = last
        left, matched = pattern.subn(b"", data)
        if not left and matched == count:
            return list(range(count)) if shape[0] == _NULL else []
    found = first_record_shape(data)
    if found is None or (last is not None and found == last[0]):
        return None
    pattern = _pattern_for(found)
    left, matched = pattern.subn(b"", data)
    if left or matched != count:
        return None
    _last = (found, pattern)
    return list(range(count)) if found[0] == _NULL else []


# The shape and pattern of the last batch accepted (None until the first).
_last: tuple[tuple[int, int], re.Pattern[bytes]] | None = None
