"""The one-shape framing shortcut agrees with the full record walk, or steps aside.

``check_uniform_records`` may only answer when the walk (``check_records``) would accept
the section with the same keyless records; for everything else it must return None.
Checked on real batches of many shapes and on thousands of seeded corruptions of them.
"""

from __future__ import annotations

import random
import re

import pytest

from slipstream.protocol import uniform_records
from slipstream.protocol.record_batch import HEADER_SIZE, InvalidBatch
from slipstream.protocol.record_framing import check_records
from slipstream.protocol.records import ProducerRecord, build_batch
from slipstream.protocol.uniform_records import (
    MAX_STRIDED_RECORD_BYTES,
    MIN_STRIDED_RECORDS,
    WALK_PER_COMPILE,
    check_uniform_records,
    first_record_shape,
    uniform_records_keyless,
    zigzag_varint,
)


def section(records: list[ProducerRecord]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


def walk(data: bytes, count: int) -> list[int] | None:
    try:
        return check_records(data, 0, count, "batch")
    except InvalidBatch:
        return None


def uniform(n: int, key: bytes | None, value: bytes | None, spacing_ms: int = 1) -> list[ProducerRecord]:
    return [ProducerRecord(key, value, timestamp_ms=1_700_000_000_000 + i * spacing_ms) for i in range(n)]


@pytest.mark.parametrize(
    ("records", "keyless"),
    [
        (uniform(1, None, b"v" * 100), [0]),
        (uniform(300, None, b"v" * 100), list(range(300))),
        (uniform(50, b"key", b"x" * 1024), []),
        (uniform(20, b"", b""), []),
        (uniform(20, b"k", None), []),
        (uniform(9000, None, b"v" * 10), list(range(9000))),  # offset deltas of 3 bytes
        (uniform(40, b"k", b"v", spacing_ms=300_000), []),  # timestamp deltas of 4 bytes
    ],
)
def test_batches_of_one_shape_are_accepted_with_the_walks_answer(
    records: list[ProducerRecord], keyless: list[int]
) -> None:
    data = section(records)
    assert walk(data, len(records)) == keyless
    assert check_uniform_records(data, len(records)) == keyless
    assert check_uniform_records(memoryview(bytearray(data)), len(records)) == keyless


@pytest.mark.parametrize(
    "records",
    [
        [ProducerRecord(b"k", b"v" * 10), ProducerRecord(b"k", b"v" * 11)],  # two value lengths
        [ProducerRecord(b"k", b"v"), ProducerRecord(None, b"v")],  # keyed then keyless
        [ProducerRecord(b"k", b"v", headers=[("h", b"x")])] * 3,  # headers
        uniform(3, b"k", b"v", spacing_ms=1 << 30),  # timestamp deltas wider than 4 bytes
    ],
)
def test_other_batches_are_left_to_the_walk(records: list[ProducerRecord]) -> None:
    data = section(records)
    assert walk(data, len(records)) is not None
    assert check_uniform_records(data, len(records)) is None


def test_a_wrong_count_is_left_to_the_walk() -> None:
    data = section(uniform(10, b"k", b"v"))
    for count in (1, 9, 11, 1000):
        assert check_uniform_records(data, count) is None
        assert walk(data, count) is None


def test_trailing_or_missing_bytes_are_left_to_the_walk() -> None:
    data = section(uniform(10, b"k", b"v"))
    assert check_uniform_records(data + b"\x00", 10) is None
    assert check_uniform_records(data[:-1], 10) is None
    assert check_uniform_records(b"", 1) is None


def test_a_non_canonical_length_prefix_is_left_to_the_walk() -> None:
    # One record (key null, value "v") whose length 7 is written in two bytes: the walk
    # takes it, the shortcut's patterns use the shortest form and step aside.
    record = bytes([0x8E, 0x00, 0, 0, 0, 1, 2]) + b"v" + b"\x00"
    assert walk(record, 1) == [0]
    assert check_uniform_records(record, 1) is None


def test_first_record_shape() -> None:
    assert first_record_shape(section(uniform(2, None, b"abc"))) == (-1, 3)
    assert first_record_shape(section(uniform(2, b"kk", None))) == (2, -1)
    assert first_record_shape(section([ProducerRecord(b"k", b"v", headers=[("h", None)])])) is None
    assert first_record_shape(b"\xff" * 20) is None
    assert first_record_shape(b"") is None


def test_zigzag_varint() -> None:
    assert zigzag_varint(0) == b"\x00"
    assert zigzag_varint(-1) == b"\x01"
    assert zigzag_varint(63) == b"\x7e"
    assert zigzag_varint(64) == b"\x80\x01"
    assert zigzag_varint(100) == b"\xc8\x01"


SHAPES = [
    uniform(12, None, b"v" * 100),
    uniform(12, b"key", b"value"),
    uniform(5, b"", None),
    uniform(70, None, b"v"),
]


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_corrupted_batches_never_pass_what_the_walk_refuses(shape: int) -> None:
    """Seeded damage: flipped, inserted and deleted bytes, truncations. Whenever the
    shortcut answers, the walk must accept the same bytes with the same answer."""
    records = SHAPES[shape]
    good = section(records)
    rng = random.Random(17 + shape)
    answered = 0
    for _ in range(1500):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            kind = rng.randrange(4)
            at = rng.randrange(len(data)) if data else 0
            if kind == 0 and data:
                data[at] = rng.randrange(256)
            elif kind == 1:
                data.insert(at, rng.randrange(256))
            elif kind == 2 and data:
                del data[at]
            else:
                del data[at:]
        count = len(records) + rng.choice((0, 0, 0, -1, 1))
        fast = check_uniform_records(bytes(data), count)
        if fast is not None:
            answered += 1
            assert walk(bytes(data), count) == fast
    # Damage inside a key or value keeps the framing: those the shortcut still answers.
    assert answered > 0


# ---------------------------------------------------------------- when patterns are compiled


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the patterns compiled (one entry per compile)."""
    made: list[int] = []
    real = uniform_records.re.compile

    def counting(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]:
        made.append(1)
        return real(pattern, flags)

    monkeypatch.setattr(uniform_records.re, "compile", counting)
    return made


def test_a_new_shapes_first_small_batches_are_walked_without_compiling(compiles: list[int]) -> None:
    # A shape no other test uses: its patterns are not cached yet.
    data = section(uniform(3, b"k" * 7, b"v" * 333))
    for _ in range(3):
        assert uniform_records_keyless(data, 3) is None
        assert uniform_records_keyless(memoryview(data), 3) is None
    assert compiles == []
    assert walk(data, 3) == []
    # The exact entry compiles what it needs and answers; the broker's entry then uses it.
    assert check_uniform_records(data, 3) == []
    assert len(compiles) == 2  # runs of 2 and 1
    assert uniform_records_keyless(data, 3) is False
    assert len(compiles) == 2


def test_a_shape_is_compiled_once_its_walked_records_would_have_paid_for_it(compiles: list[int]) -> None:
    batch = 100  # runs of 64, 32 and 4 records: three patterns
    data = section(uniform(batch, None, b"v" * 222))
    walked = 0
    while walked + batch < 3 * WALK_PER_COMPILE:
        assert uniform_records_keyless(data, batch) is None
        walked += batch
    assert compiles == []
    assert uniform_records_keyless(data, batch) is True
    assert len(compiles) == 3
    for _ in range(5):
        assert uniform_records_keyless(data, batch) is True
    assert len(compiles) == 3


def test_a_batch_as_large_as_the_walk_budget_is_compiled_for_at_once(compiles: list[int]) -> None:
    count = WALK_PER_COMPILE  # a power of two: one pattern
    # Timestamp deltas widen at record 32, inside a run of the strided check: patterns decide.
    data = section(uniform(count, b"kk", b"v" * 5, spacing_ms=2))
    assert uniform_records_keyless(data, count) is False
    assert len(compiles) == 1
    damaged = data[:-1] + b"\x01"  # the last record's header count: left to the walk
    assert uniform_records_keyless(damaged, count) is None
    assert walk(damaged, count) is None


# ---------------------------------------------------------------- the strided check


def runs_match(data: bytes, count: int, shape: tuple[int, int] | None = None) -> bool:
    """The strided check of ``shape`` (the first record's by default), as the broker's
    entry tries the last batch's shape first."""
    shape = shape or first_record_shape(data)
    assert shape is not None
    return uniform_records._patterns_for(shape).runs_match(data, count)


@pytest.mark.parametrize(
    ("records", "keyless"),
    [
        (uniform(350, None, b"v" * 100, spacing_ms=0), True),  # runs of 64 and 286 records
        (uniform(1024, b"key", b"v" * 20), False),  # both deltas widen at record 64
        (uniform(9000, None, b"v" * 10, spacing_ms=0), True),  # offset deltas of 3 bytes from 8192
        (uniform(200, b"", None, spacing_ms=0), False),
    ],
)
def test_batches_laid_out_in_runs_are_accepted_without_patterns(
    records: list[ProducerRecord], keyless: bool, compiles: list[int]
) -> None:
    data = section(records)
    assert runs_match(data, len(records))
    assert uniform_records_keyless(data, len(records)) is keyless
    assert uniform_records_keyless(memoryview(bytearray(data)), len(records)) is keyless
    assert uniform_records_keyless(bytearray(data), len(records)) is keyless
    assert compiles == []
    assert walk(data, len(records)) == (list(range(len(records))) if keyless else [])


def test_batches_not_laid_out_in_runs_are_left_to_the_patterns() -> None:
    # Timestamp deltas widen at record 32 (spacing 2 ms), inside the first run.
    data = section(uniform(300, None, b"v" * 100, spacing_ms=2))
    assert not runs_match(data, 300)
    assert check_uniform_records(data, 300) == walk(data, 300) == list(range(300))
    # Few records: the patterns are cheaper.
    few = MIN_STRIDED_RECORDS - 1
    assert not runs_match(section(uniform(few, None, b"v", spacing_ms=0)), few)
    # Long records: the copy for the slices would cost what the patterns cost.
    long = section(uniform(200, None, b"v" * MAX_STRIDED_RECORD_BYTES, spacing_ms=0))
    assert not runs_match(long, 200)
    assert check_uniform_records(long, 200) == list(range(200))


def test_a_wrong_count_or_length_is_refused_by_the_strided_check() -> None:
    data = section(uniform(300, b"k", b"v" * 30, spacing_ms=0))
    assert runs_match(data, 300)
    for count in (299, 301, 1 << 20, (1 << 20) + 1):
        assert not runs_match(data, count)
        assert check_uniform_records(data, count) is None
    assert not runs_match(data + b"\x00", 300)
    assert not runs_match(data[:-1], 300)


@pytest.mark.parametrize("spacing_ms", [0, 1])
def test_corrupted_runs_never_pass_what_the_walk_refuses(spacing_ms: int) -> None:
    """Seeded damage to batches the strided check takes whole: whenever it (or the
    patterns after it) answers, the walk accepts the same bytes with the same answer."""
    records = uniform(MIN_STRIDED_RECORDS + 40, None, b"v" * 12, spacing_ms=spacing_ms)
    good = section(records)
    shape = first_record_shape(good)
    assert runs_match(good, len(records), shape)
    rng = random.Random(29 + spacing_ms)
    strided = 0
    for _ in range(1500):
        data = bytearray(good)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            kind = rng.randrange(3)
            if kind == 0:
                data[at] = rng.randrange(256)
            elif kind == 1:
                data.insert(at, rng.randrange(256))
            else:
                del data[at]
        count = len(records) + rng.choice((0, 0, 0, -1, 1))
        if runs_match(bytes(data), count, shape):
            strided += 1
            assert walk(bytes(data), count) == list(range(count))
        fast = check_uniform_records(bytes(data), count)
        if fast is not None:
            assert walk(bytes(data), count) == fast
    # Damage inside values (or the attributes) keeps the framing: those it still takes.
    assert strided > 0


def test_views_are_checked_through_a_kept_buffer_or_a_copy_of_their_own() -> None:
    # A view's section is copied into a kept buffer, which holds stale bytes past its end
    # (an earlier, larger section's): no slice reaches them.
    large = section(uniform(2000, None, b"v" * 100, spacing_ms=0))
    assert uniform_records_keyless(memoryview(bytearray(large)), 2000) is True
    small = bytearray(section(uniform(300, None, b"v" * 100, spacing_ms=0)))
    small[-1] = 1  # the last record's header count
    assert not runs_match(bytes(small), 300)
    assert uniform_records_keyless(memoryview(small), 300) is None
    # Past a mebibyte the section gets a copy of its own (the kept buffer keeps its size).
    huge = section(uniform(2200, b"k", b"v" * 500, spacing_ms=0))
    assert len(huge) > 1 << 20
    assert uniform_records_keyless(memoryview(bytearray(huge)), 2200) is False
    assert all(len(kept) == 1 << 20 for kept in uniform_records._scratch)
