"""The schema compiler and wire primitives on their own: exact bytes, versions,
nullability, arrays, tagged fields, malformed input and zero-copy records.

The per-API declarations are checked against independent implementations in
test_protocol_oracle.py; here small hand-made declarations pin down what the
codec itself does.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slipstream.protocol import apis, codec
from slipstream.protocol import primitives as p
from slipstream.protocol.api import REGISTRY
from slipstream.protocol.codec import EncodeError, Writer
from slipstream.protocol.primitives import ZERO_UUID, DecodeError
from slipstream.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Primitive,
    Struct,
    Versions,
    field,
)

apis.load_all()  # registers every API in REGISTRY


def enc(value: Struct, version: int = 0, flexible: bool = False) -> bytes:
    return codec.encode(value, version, flexible).getvalue()


def dec(cls: type[Struct], data: bytes, version: int = 0, flexible: bool = False) -> Any:
    value, end = codec.decode_at(cls, memoryview(data), 0, version, flexible)
    assert end == len(data), f"consumed {end} of {len(data)} bytes"
    return value


# ------------------------------------------------------------------ primitives


class Fixed(Struct):
    i8: int = field(INT8)
    i16: int = field(INT16)
    i32: int = field(INT32)
    i64: int = field(INT64)
    u16: int = field(UINT16)
    u32: int = field(UINT32)
    f64: float = field(FLOAT64)
    flag: bool = field(BOOL)
    id: uuid.UUID = field(UUID)


def test_fixed_width_primitives_are_big_endian() -> None:
    the_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    value = Fixed(
        i8=-2, i16=-3, i32=-4, i64=-5, u16=65535, u32=2**32 - 1, f64=1.5, flag=True, id=the_id
    )
    expected = (
        b"\xfe"
        + b"\xff\xfd"
        + b"\xff\xff\xff\xfc"
        + b"\xff\xff\xff\xff\xff\xff\xff\xfb"
        + b"\xff\xff"
        + b"\xff\xff\xff\xff"
        + b"\x3f\xf8\x00\x00\x00\x00\x00\x00"
        + b"\x01"
        + bytes.fromhex("00112233445566778899aabbccddeeff")
    )
    for flexible in (False, True):
        data = enc(value, flexible=flexible)
        assert data == expected + (b"\x00" if flexible else b"")
        assert dec(Fixed, data, flexible=flexible) == value


def test_primitive_defaults() -> None:
    value = Fixed()
    assert (value.i8, value.i64, value.f64, value.flag, value.id) == (0, 0, 0.0, False, ZERO_UUID)


def test_any_nonzero_bool_byte_is_true() -> None:
    class B(Struct):
        flag: bool = field(BOOL)

    assert dec(B, b"\x02").flag is True
    assert dec(B, b"\x00").flag is False


@given(st.integers(0, 2**64 - 1))
def test_uvarint_round_trip(n: int) -> None:
    out = bytearray()
    p.write_uvarint(out, n)
    assert len(out) == p.uvarint_size(n)
    assert p.read_uvarint(bytes(out), 0) == (n, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varint_round_trip(n: int) -> None:
    out = bytearray()
    p.write_varint(out, n)
    assert p.read_varint(bytes(out), 0) == (n, len(out))


@pytest.mark.parametrize(
    ("n", "wire"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001")],
)
def test_uvarint_known_encodings(n: int, wire: str) -> None:
    out = bytearray()
    p.write_uvarint(out, n)
    assert out.hex() == wire


@pytest.mark.parametrize(("n", "wire"), [(0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e")])
def test_zigzag_known_encodings(n: int, wire: str) -> None:
    out = bytearray()
    p.write_varint(out, n)
    assert out.hex() == wire


def test_bad_varints() -> None:
    with pytest.raises(DecodeError):
        p.read_uvarint(b"\x80\x80", 0)  # continuation bit on the last byte
    with pytest.raises(DecodeError):
        p.read_uvarint(b"\xff" * 11, 0)  # longer than 64 bits


class Text(Struct):
    s: str = field(STRING)
    b: bytes = field(BYTES)


def test_strings_and_bytes_classic_and_compact() -> None:
    value = Text(s="hé", b=b"\x00\x01")
    assert enc(value) == b"\x00\x03h\xc3\xa9" + b"\x00\x00\x00\x02\x00\x01"
    assert enc(value, flexible=True) == b"\x04h\xc3\xa9" + b"\x03\x00\x01" + b"\x00"
    assert dec(Text, enc(value)) == value
    assert dec(Text, enc(value, flexible=True), flexible=True) == value
    empty = Text()
    assert enc(empty) == b"\x00\x00" + b"\x00\x00\x00\x00"
    assert enc(empty, flexible=True) == b"\x01\x01\x00"


# ------------------------------------------------------------------ versions and nullability


class Versioned(Struct):
    always: int = field(INT16)
    from_two: int = field(INT32, v="2+", default=-1)
    only_one: str = field(STRING, v="1")
    range_: int = field(INT8, v="1-2", default=7)


@pytest.mark.parametrize(
    ("version", "wire"),
    [
        (0, "0005"),
        (1, "0005" + "0001" + "78" + "09"),
        (2, "0005" + "0000002a" + "09"),
        (3, "0005" + "0000002a"),
    ],
)
def test_fields_exist_only_in_their_versions(version: int, wire: str) -> None:
    value = Versioned(always=5, from_two=42, only_one="x", range_=9)
    assert enc(value, version).hex() == wire
    back = dec(Versioned, bytes.fromhex(wire), version)
    assert back.always == 5
    # A field the version does not carry decodes as its default.
    assert back.from_two == (42 if version >= 2 else -1)
    assert back.only_one == ("x" if version == 1 else "")
    assert back.range_ == (9 if version in (1, 2) else 7)


def test_versions_parse() -> None:
    assert Versions.parse("3+") == Versions(3, None)
    assert Versions.parse("1-4") == Versions(1, 4)
    assert Versions.parse("2") == Versions(2, 2)
    assert 5 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert 0 not in Versions.parse(None) and 0 not in Versions.parse("none")


class Nullables(Struct):
    name: str | None = field(STRING, nullable="1+", default=None)
    data: bytes | None = field(BYTES, nullable="1+", default=None)
    items: list[int] | None = field(Array(INT32), nullable="1+", default=None)


def test_null_encodings() -> None:
    value = Nullables()
    assert enc(value, 1).hex() == "ffff" + "ffffffff" + "ffffffff"
    assert enc(value, 1, flexible=True).hex() == "00" + "00" + "00" + "00"
    assert dec(Nullables, enc(value, 1), 1) == value
    assert dec(Nullables, enc(value, 1, True), 1, True) == value


def test_null_is_refused_where_not_nullable() -> None:
    for name in ("name", "data", "items"):
        value = Nullables(name="", data=b"", items=[])
        setattr(value, name, None)
        with pytest.raises(EncodeError, match=name):
            enc(value, 0)
    # ...and a null on the wire for a non-nullable field is malformed input.
    for wire in (
        "ffff" + "00000000" + "00000000",
        "0000" + "ffffffff" + "00000000",
        "0000" + "00000000" + "ffffffff",
    ):
        with pytest.raises(DecodeError):
            dec(Nullables, bytes.fromhex(wire), 0)


class Inner(Struct):
    x: int = field(INT16)


class WithNullableStruct(Struct):
    inner: Inner | None = field(Inner, nullable="0+", default=None)
    after: int = field(INT8)


def test_nullable_struct_marker() -> None:
    assert enc(WithNullableStruct(inner=None, after=1)).hex() == "ff01"
    assert enc(WithNullableStruct(inner=Inner(x=2), after=1)).hex() == "01000201"
    assert dec(WithNullableStruct, bytes.fromhex("ff01")) == WithNullableStruct(after=1)
    assert dec(WithNullableStruct, bytes.fromhex("01000201")).inner == Inner(x=2)


# ------------------------------------------------------------------ arrays


class Arrays(Struct):
    ints: list[int] = field(Array(INT32))
    strings: list[str] = field(Array(STRING))
    structs: list[Inner] = field(Array(Inner))


def test_arrays_classic_and_compact() -> None:
    value = Arrays(ints=[1, -1], strings=["a"], structs=[Inner(x=3), Inner(x=4)])
    assert enc(value).hex() == (
        "00000002" + "00000001" + "ffffffff" + "00000001" + "000161" + "00000002" + "0003" + "0004"
    )
    assert enc(value, flexible=True).hex() == (
        "03" + "00000001" + "ffffffff" + "02" + "0261" + "03" + "000300" + "000400" + "00"
    )
    assert dec(Arrays, enc(value)) == value
    assert dec(Arrays, enc(value, flexible=True), flexible=True) == value
    assert enc(Arrays()).hex() == "00000000" * 3
    assert enc(Arrays(), flexible=True).hex() == "01010100"


def test_array_defaults_are_not_shared() -> None:
    a, b = Arrays(), Arrays()
    a.ints.append(1)
    assert b.ints == []


def test_huge_array_count_is_refused_before_allocating() -> None:
    with pytest.raises(DecodeError):
        dec(Arrays, b"\x7f\xff\xff\xff")
    with pytest.raises(DecodeError):
        dec(Arrays, b"\xff\xff\xff\xff\x07", flexible=True)


# ------------------------------------------------------------------ tagged fields


class Tagged(Struct):
    plain: int = field(INT16)
    later: int = field(INT32, tag=5, default=-1)
    early: str | None = field(STRING, tag=1, nullable="0+", default=None)
    nums: list[int] = field(Array(INT8), tag=2)
    inner: Inner = field(Inner, v="1+", tag=3)


def test_tagged_fields_are_written_when_not_default_in_tag_order() -> None:
    assert enc(Tagged(plain=1), flexible=True).hex() == "0001" + "00"
    value = Tagged(plain=1, later=7, early="z", nums=[3])
    assert enc(value, flexible=True).hex() == (
        "0001" + "03" + "01" + "02" + "027a" + "02" + "02" + "0203" + "05" + "04" + "00000007"
    )
    assert dec(Tagged, enc(value, flexible=True), flexible=True) == value


def test_tagged_struct_and_versioned_tag() -> None:
    value = Tagged(plain=1, inner=Inner(x=9))
    # v0 has no ``inner`` at all; v1 carries it (a struct ends with its own tag section).
    assert enc(value, 0, True).hex() == "0001" + "00"
    assert enc(value, 1, True).hex() == "0001" + "01" + "03" + "03" + "000900"
    assert dec(Tagged, enc(value, 1, True), 1, True) == value


class Pair(Struct):
    a: int = field(INT32, default=-1)
    b: int = field(INT32, default=-1)


class TaggedPair(Struct):
    pair: Pair = field(Pair, tag=0)


def test_a_tagged_struct_is_written_when_any_of_its_fields_differs_from_the_default() -> None:
    assert enc(TaggedPair(pair=Pair()), flexible=True).hex() == "00"
    assert enc(TaggedPair(pair=Pair(b=1)), flexible=True).hex() == "01" + "00" + "09" + "ffffffff" + "00000001" + "00"
    for pair in (Pair(a=1), Pair(b=1)):
        value = TaggedPair(pair=pair)
        assert dec(TaggedPair, enc(value, flexible=True), flexible=True) == value


def test_tagged_fields_do_not_exist_in_non_flexible_versions() -> None:
    value = Tagged(plain=1, later=7)
    assert enc(value, flexible=False).hex() == "0001"
    assert dec(Tagged, bytes.fromhex("0001")).later == -1


def test_unknown_tags_are_skipped() -> None:
    # tag 4 (unknown, 3 bytes), then known tag 5, then unknown tag 40 (0 bytes)
    wire = "0001" + "03" + "04" + "03" + "aabbcc" + "05" + "04" + "00000007" + "28" + "00"
    value = dec(Tagged, bytes.fromhex(wire), flexible=True)
    assert value == Tagged(plain=1, later=7)
    # ...also by a struct that declares no tagged fields at all.
    assert dec(
        Inner, bytes.fromhex("0002" + "02" + "00" + "01" + "ff" + "07" + "00"), flexible=True
    ) == Inner(x=2)


def test_truncated_unknown_tag_is_refused_without_tagged_fields() -> None:
    with pytest.raises(DecodeError):
        dec(Inner, bytes.fromhex("0002" + "01" + "09" + "64"), flexible=True)


def test_truncated_unknown_tag_is_refused_with_tagged_fields() -> None:
    # One unknown tag (9) claiming 100 bytes, none of which are there.
    data = bytes.fromhex("0001" + "01" + "09" + "64")
    try:
        _value, end = codec.decode_at(Tagged, memoryview(data), 0, 0, True)
    except DecodeError:
        return
    raise AssertionError(f"accepted; decoder position {end} is past the {len(data)}-byte buffer")


# ------------------------------------------------------------------ records stay views


class Records(Struct):
    before: int = field(INT8)
    records: memoryview | bytes | list[bytes] | None = field(RECORDS, nullable="0+")
    after: int = field(INT8)


@pytest.mark.parametrize("flexible", [False, True])
def test_decoded_records_are_views_into_the_request_buffer(flexible: bool) -> None:
    payload = bytes(range(256)) * 3
    data = bytearray(enc(Records(before=1, records=payload, after=2), flexible=flexible))
    value = dec(Records, bytes(data), flexible=flexible)  # bytes input works too
    assert bytes(value.records) == payload
    view = memoryview(data)
    value = codec.decode(Records, view, 0, flexible)
    assert isinstance(value.records, memoryview)
    assert value.records.obj is data  # a slice of the caller's buffer, not a copy
    data[3 if flexible else 5] ^= 0xFF
    assert value.records[0] == payload[0] ^ 0xFF  # shares memory with the buffer
    assert value.after == 2


@pytest.mark.parametrize("flexible", [False, True])
def test_large_records_are_passed_through_not_copied(flexible: bool) -> None:
    big = memoryview(bytes(4096))
    w = codec.encode(Records(before=1, records=big, after=2), 0, flexible)
    parts = w.finish()
    assert any(part is big for part in parts)
    assert w.size() == sum(len(x) for x in parts)
    assert dec(Records, b"".join(parts), flexible=flexible).records == big


@pytest.mark.parametrize("flexible", [False, True])
def test_records_as_a_list_of_chunks(flexible: bool) -> None:
    chunks = [bytes(600), b"abc", memoryview(bytes(700))]
    w = codec.encode(Records(before=1, records=chunks, after=2), 0, flexible)
    parts = w.finish()
    assert any(part is chunks[0] for part in parts) and any(part is chunks[2] for part in parts)
    decoded = dec(Records, b"".join(parts), flexible=flexible)
    assert bytes(decoded.records) == b"".join(bytes(c) for c in chunks)


def test_null_records() -> None:
    assert enc(Records(before=1, after=2)).hex() == "01" + "ffffffff" + "02"
    assert enc(Records(before=1, after=2), flexible=True).hex() == "01" + "00" + "02" + "00"
    assert dec(Records, bytes.fromhex("01ffffffff02")).records is None


def test_writer_small_blobs_stay_in_one_buffer() -> None:
    w = Writer()
    w.buf += b"ab"
    w.blob(b"cd")
    w.blob(memoryview(b"x" * 600))
    w.buf += b"ef"
    assert w.size() == 2 + 2 + 600 + 2
    assert w.getvalue() == b"abcd" + b"x" * 600 + b"ef"


# ------------------------------------------------------------------ malformed input over every API


def _value(
    cls: type[Struct], version: int, flexible: bool, depth: int = 0
) -> st.SearchStrategy[Any]:
    """Any value of a declaration in one version (no oracle constraints needed here)."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls.FIELDS:
        if version not in f.versions or (f.tag is not None and not flexible):
            continue
        nullable = version in f.nullable
        t = f.type
        s: st.SearchStrategy[Any]
        if isinstance(t, Array):
            item = (
                _primitive(t.item)
                if isinstance(t.item, Primitive)
                else _value(t.item, version, flexible, depth + 1)
            )
            s = st.lists(item, max_size=2)
        elif isinstance(t, Primitive):
            s = _primitive(t)
        else:
            s = _value(t, version, flexible, depth + 1)
        parts[f.name] = st.one_of(st.none(), s) if nullable else s
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))


def _primitive(t: Primitive) -> st.SearchStrategy[Any]:
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
    if t.name in bits:
        n = bits[t.name]
        return st.integers(-(2 ** (n - 1)), 2 ** (n - 1) - 1)
    return {
        "uint16": st.integers(0, 2**16 - 1),
        "uint32": st.integers(0, 2**32 - 1),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": st.uuids(),
        "string": st.text(st.characters(codec="utf-8"), max_size=4),
        "bytes": st.binary(max_size=4),
        "records": st.binary(max_size=4),
    }[t.name]


MESSAGES = [
    pytest.param(cls, version, spec.is_flexible(version), id=f"{spec.name}-v{version}-{kind}")
    for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    for version in range(spec.min_version, spec.max_version + 1)
    for kind, cls in (("request", spec.request), ("response", spec.response))
]
FUZZ = settings(
    max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize(("cls", "version", "flexible"), MESSAGES)
def test_every_truncation_is_a_decode_error(
    cls: type[Struct], version: int, flexible: bool
) -> None:
    @FUZZ
    @given(_value(cls, version, flexible))
    def run(value: Struct) -> None:
        data = enc(value, version, flexible)
        assert dec(cls, data, version, flexible).to_dict() == value.to_dict()
        for cut in range(len(data)):
            with pytest.raises(DecodeError):
                codec.decode(cls, data[:cut], version, flexible)

    run()


@pytest.mark.parametrize(("cls", "version", "flexible"), MESSAGES)
def test_garbage_is_a_decode_error_or_a_value(
    cls: type[Struct], version: int, flexible: bool
) -> None:
    @FUZZ
    @given(st.binary(max_size=64))
    def run(data: bytes) -> None:
        with contextlib.suppress(DecodeError):  # any other exception type fails the test
            codec.decode(cls, data, version, flexible)

    run()


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        dec(Text, b"\x00\x02\xff\xfe" + b"\x00\x00\x00\x00")


def test_compiled_codecs_are_cached() -> None:
    assert codec.encoder(Arrays, 0, True) is codec.encoder(Arrays, 0, True)
    assert codec.decoder(Arrays, 0, True) is codec.decoder(Arrays, 0, True)
    assert codec.decoder(Arrays, 0, True) is not codec.decoder(Arrays, 0, False)


def test_unknown_field_name_is_refused() -> None:
    with pytest.raises(TypeError, match="nope"):
        Inner(nope=1)
