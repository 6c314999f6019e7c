"""A fast, exact framing check for a records section whose records all share one shape.

Most producers fill a batch with records of one shape: the same key length (or no key),
the same value length, no headers; only the timestamp and offset deltas differ, and
they change only the width of two varints. For such a section one regular expression,
made per shape, matches a whole record with its framing: the length prefix must be the
exact length the fields add up to, each varint must end where it should, the key and
value take exactly their declared bytes, and the header count is zero.

A record's length prefix fixes where it ends, so the section parses one way only, and
``re`` can match many records in one call, in C, with no per-record step in Python or
per-match overhead (``subn`` over single records cost about twice as much). The count
is exact without counting matches: ``count`` is split into its powers of two, and a
pattern matching exactly 2^j records (possessively) is matched for each set bit, each
starting where the previous ended; the section must end exactly there.

The patterns of a shape are compiled when a count needs them and kept. A compile takes
about 0.6 ms warm and 1-3 ms in a broker's first produces - as long as the walk takes a
thousand records or more (about 0.6 µs each) - and the patterns are made per shape, so
none can be made ahead (at import). So the broker's entry (``uniform_records_keyless``)
leaves a batch whose count needs patterns not made yet to the walk until its shape has
walked ``WALK_PER_COMPILE`` records for each of them, then compiles them: a client's
first produce (a few records of a new shape) is walked in microseconds, and what a shape
walks before a compile costs about what the compile costs. ``check_uniform_records``
compiles at once (an exact answer always).

Before the patterns, a cheaper check in strides (``_ShapePatterns.runs_match``): a
producer's records differ only in their deltas, and a record's offset delta is its index,
so between the indices where that varint grows a byte (64, 8192) the records usually
share one length as well as one shape. Such a run is a grid: a record's length prefix,
delta varints, key and value lengths and header count sit at the same place in every
record, so each of those positions is checked across the whole run with one strided
slice (``bytes`` slicing with a step, then ``count`` or ``isascii``, all in C: about
1 ns a record for each position, against about 40 ns a record for the pattern; 770
records of 100 B: 30 -> 14 µs). Where the run is no grid (delta widths changing inside
it, another shape) the lengths do not add up to the section's, which is found before
anything is sliced, and the patterns decide as before. Small batches and long records
go straight to the patterns (``MIN_STRIDED_RECORDS``, ``MAX_STRIDED_RECORD_BYTES``).

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
# Shapes whose patterns are kept (a broker sees a few shapes per producer, over and over).
_MAX_CACHED_SHAPES = 256
_NULL = -1
# Counts from 2^_MAX_COUNT_BITS records on are left to the walk (offset deltas of 3 bytes
# reach 2^20 records, so no such batch matches anyway).
_MAX_COUNT_BITS = 21
_HEAD_BYTES = 32
# Records the walk checks in about the time one pattern takes to compile (warm).
WALK_PER_COMPILE = 1024
# Record indices where a canonical offset-delta varint grows from 1 to 2 to 3 bytes
# (zigzag doubles the value: 2 x 64 = 128 needs a second byte). Runs of the strided
# check end there; batches of more records are left to the patterns.
_OFFSET_WIDTH_ENDS = (64, 8192, 1 << 20)
# Below this many records the patterns cost less than the slices (about 2.5 µs a run).
MIN_STRIDED_RECORDS = 160
# Records longer than this on average are left to the patterns: the section is copied
# out of its view for the slices, and the copy of a long record costs what its pattern costs.
MAX_STRIDED_RECORD_BYTES = 512
# Maps a varint's continuation bytes (0x80-0xff) to ASCII, so ``isascii`` checks them.
_HIGH_BIT_FLIPPED = bytes(b ^ 0x80 for b in range(256))
# Buffers of this size the strided check copies a section into, kept between calls
# (popped and put back, so threads never share one); larger sections get their own copy.
_scratch: list[bytearray] = []
_MAX_SCRATCH_BYTES = 1 << 20

_patterns: dict[tuple[int, int], _ShapePatterns] = {}


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


def record_pattern(key_length: int, value_length: int) -> bytes:
    """The source of a pattern for one record of the shape, with every (timestamp, offset)
    delta width it may use; the commonest widths (fewest bytes, then the wider offset
    delta of a batch past 64 records) are tried first."""
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
    widths = sorted(
        ((offset, ts) for offset in _OFFSET_DELTA_WIDTHS for ts in _TIMESTAMP_DELTA_WIDTHS),
        key=lambda w: (w[0] + w[1], -w[0]),
    )
    branches = []
    for offset_width, ts_width in widths:
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
    return b"(?:" + b"|".join(branches) + b")"


class _RecordGrid:
    """What each byte of a record of one shape and one pair of delta widths must be,
    by position in the record (the strided check's plan for a run of such records)."""

    __slots__ = ("continuations", "exact", "last_bytes", "length")

    def __init__(self, key_length: int, value_length: int, ts_width: int, offset_width: int, length: int) -> None:
        prefix = zigzag_varint(length)
        self.length = len(prefix) + length  # the record's bytes, its length prefix included
        exact: list[tuple[int, int]] = list(enumerate(prefix))
        pos = len(prefix) + 1  # attributes: any byte, as the walk skips it
        continuations: list[int] = []
        last_bytes: list[int] = []
        for width in (ts_width, offset_width):
            continuations.extend(range(pos, pos + width - 1))
            last_bytes.append(pos + width - 1)
            pos += width
        for field_length in (key_length, value_length):
            for byte in zigzag_varint(field_length):
                exact.append((pos, byte))
                pos += 1
            pos += max(field_length, 0)  # the key or value: any bytes
        exact.append((pos, 0))  # header count
        assert pos + 1 == self.length
        self.exact = tuple(exact)
        self.continuations = tuple(continuations)
        self.last_bytes = tuple(last_bytes)


class _ShapePatterns:
    """One shape's patterns: ``runs[j]`` matches exactly 2^j records, made when first used;
    and its record grids by (timestamp, offset) delta width, for the strided check."""

    __slots__ = ("compiled", "fixed_bytes", "grids", "keyless", "min_record_bytes", "record", "runs", "shape", "walked")

    def __init__(self, shape: tuple[int, int]) -> None:
        key_length, value_length = shape
        self.shape = shape
        self.record = record_pattern(key_length, value_length)
        self.keyless = key_length == _NULL
        # A record's length without its two deltas (see record_pattern).
        self.fixed_bytes = (
            1 + len(zigzag_varint(key_length)) + max(key_length, 0)
            + len(zigzag_varint(value_length)) + max(value_length, 0) + 1
        )  # fmt: skip
        self.grids: dict[tuple[int, int], _RecordGrid] = {}
        # Length prefix, attributes and both deltas take a byte at least.
        self.min_record_bytes = (
            4 + len(zigzag_varint(key_length)) + max(key_length, 0)
            + len(zigzag_varint(value_length)) + max(value_length, 0) + 1
        )  # fmt: skip
        self.runs: list[re.Pattern[bytes] | None] = [None] * _MAX_COUNT_BITS
        self.compiled = 0  # bit j set: runs[j] is made
        # Records left to the walk since the last compile, for want of a pattern.
        self.walked = 0

    def runs_match(self, data: bytes | bytearray | memoryview, count: int) -> bool:
        """Whether ``data`` is exactly ``count`` records of this shape, each run between
        offset-width steps (``_OFFSET_WIDTH_ENDS``) of one length (module docstring).
        False says nothing: the patterns decide."""
        if not MIN_STRIDED_RECORDS <= count <= _OFFSET_WIDTH_ENDS[-1]:
            return False
        if len(data) > count * MAX_STRIDED_RECORD_BYTES:
            return False
        runs: list[tuple[int, int, _RecordGrid]] = []
        pos = 0
        first = 0
        offset_width = 1
        while first < count:
            end = min(count, _OFFSET_WIDTH_ENDS[offset_width - 1])
            grid = self._grid_at(data, pos, offset_width)
            if grid is None:
                return False
            runs.append((pos, end - first, grid))
            pos += (end - first) * grid.length
            first = end
            offset_width += 1
        if pos != len(data):
            return False
        if not isinstance(data, memoryview):
            return _grids_hold(data, runs)
        # Strided slices of a memoryview cost ten times those of bytes: the section is
        # copied, into a kept buffer (a fresh one, freed each time, made malloc hand
        # pages back to the kernel and fault them in again: 5% of a broker's time).
        size = len(data)
        if size > _MAX_SCRATCH_BYTES:
            return _grids_hold(data.tobytes(), runs)
        # Made once at full size: buffers of growing sizes, made and dropped, would move
        # malloc's heap top and thresholds again. (pop and append are atomic.)
        scratch = _scratch.pop() if _scratch else bytearray(_MAX_SCRATCH_BYTES)
        try:
            memoryview(scratch)[:size] = data  # a plain copy (a bytearray's slice assignment takes twice as long)
            return _grids_hold(scratch, runs)
        finally:
            _scratch.append(scratch)

    def _grid_at(self, data: bytes | bytearray | memoryview, pos: int, offset_width: int) -> _RecordGrid | None:
        """The grid of the record at ``pos`` if its offset delta takes ``offset_width``
        bytes (its length prefix then says the timestamp delta's width)."""
        try:
            length, _ = read_varint(data, pos)
        except ValueError:  # truncated
            return None
        ts_width = length - self.fixed_bytes - offset_width
        if ts_width not in _TIMESTAMP_DELTA_WIDTHS:
            return None
        grid = self.grids.get((ts_width, offset_width))
        if grid is None:
            key_length, value_length = self.shape
            grid = self.grids[ts_width, offset_width] = _RecordGrid(
                key_length, value_length, ts_width, offset_width, length
            )
        return grid

    def run(self, bit: int) -> re.Pattern[bytes]:
        pattern = self.runs[bit]
        if pattern is None:
            pattern = self.runs[bit] = re.compile(b"%s{%d}+" % (self.record, 1 << bit), re.DOTALL)
            self.compiled |= 1 << bit
        return pattern

    def match(self, data: bytes | bytearray | memoryview, count: int, compile_now: bool = True) -> bool | None:
        """Whether the records are keyless, if ``data`` is exactly ``count`` records of
        this shape; None if it is not, or (``compile_now`` False) if it needs patterns
        not made yet and the shape has not walked ``WALK_PER_COMPILE`` records for each."""
        if count <= 0 or count >= 1 << _MAX_COUNT_BITS or count * self.min_record_bytes > len(data):
            return None
        missing = count & ~self.compiled
        if missing:
            if not compile_now:
                self.walked += count
                if self.walked < WALK_PER_COMPILE * missing.bit_count():
                    return None
            self.walked = 0
        pos = 0
        bit = count.bit_length()
        while bit:
            bit -= 1
            if count >> bit & 1:
                found = self.run(bit).match(data, pos)
                if found is None:
                    return None
                pos = found.end()
        if pos != len(data):
            return None
        return self.keyless


def _grids_hold(raw: bytes | bytearray, runs: list[tuple[int, int, _RecordGrid]]) -> bool:
    """Whether every record of each (start, records, grid) run of ``raw`` has its grid's
    bytes (``raw`` may go on past the last run)."""
    for start, records, grid in runs:
        step = grid.length
        stop = start + records * step
        for at, byte in grid.exact:
            if raw[start + at : stop : step].count(byte) != records:
                return False
        for at in grid.last_bytes:
            if not raw[start + at : stop : step].isascii():
                return False
        for at in grid.continuations:
            if not raw[start + at : stop : step].translate(_HIGH_BIT_FLIPPED).isascii():
                return False
    return True


def _patterns_for(shape: tuple[int, int]) -> _ShapePatterns:
    patterns = _patterns.get(shape)
    if patterns is None:
        if len(_patterns) >= _MAX_CACHED_SHAPES:
            _patterns.clear()
        patterns = _patterns[shape] = _ShapePatterns(shape)
    return patterns


def check_uniform_records(data: bytes | bytearray | memoryview, count: int) -> list[int] | None:
    """The keyless record indices if ``data`` is exactly ``count`` well-framed records of
    the first record's shape; None when that does not hold (run the full walk)."""
    keyless = uniform_records_keyless(data, count, compile_now=True)
    if keyless is None:
        return None
    return list(range(count)) if keyless else []


def uniform_records_keyless(
    data: bytes | bytearray | memoryview, count: int, *, compile_now: bool = False
) -> bool | None:
    """``check_uniform_records`` without building the list: whether every record is
    keyless (all or none are, sharing one shape); None when the shortcut does not apply.
    A list of a batch's indices cost more than matching its records (4,000: 90 µs).
    Without ``compile_now``, also None while the walk is the cheaper way (see above)."""
    global _last
    # Batches come in runs of one shape: try the last one's grids, then its patterns,
    # before parsing the first record (a mismatch fails early, then the shape is read as
    # usual). The patterns only if they are made for this count: a batch of another
    # shape must not count towards compiling them.
    last = _last
    if last is not None:
        if last.runs_match(data, count):
            return last.keyless
        if not count & ~last.compiled:
            keyless = last.match(data, count)
            if keyless is not None:
                return keyless
    found = first_record_shape(data)
    if found is None:
        return None
    patterns = _patterns_for(found)
    if patterns is last:
        if not count & ~last.compiled:
            return None  # both tried above
    elif patterns.runs_match(data, count):
        _last = patterns
        return patterns.keyless
    keyless = patterns.match(data, count, compile_now)
    if keyless is not None:
        _last = patterns
    return keyless


# The patterns of the last batch's shape accepted (None until the first).
_last: _ShapePatterns | None = None
