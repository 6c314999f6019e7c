"""The compiled codecs' inlined fast paths against the wire primitives they replace.

The compiler reads and writes varint lengths, strings, bytes and tagged-field
counts inline (one-byte case) and packs adjacent fixed-width fields with one
struct call; these tests pin that the bytes and values are exactly what the
primitives in ``protocol/primitives.py`` give, including the multi-byte cases.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.protocol import codec
from slipstream.protocol import primitives as p
from slipstream.protocol.api import (
    decode_request_header,
    decode_request_header_prefix,
    decode_request_header_rest,
)
from slipstream.protocol.primitives import DecodeError
from slipstream.protocol.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    Array,
    Struct,
    field,
)


class Item(Struct):
    a: int = field(INT32)
    b: int = field(INT64)


class Mixed(Struct):
    s: str = field(STRING)
    x: int = field(INT8)
    y: int = field(INT16)
    z: int = field(INT32, v="1+")  # a run of 2 in v0, of 3 in v1+
    u: int = field(UINT16)
    flag: bool = field(BOOL)
    old: int = field(INT64, v="0", default=7)  # absent in v1+: a shared constant default
    ns: str | None = field(STRING, nullable="0+")
    blob: bytes | None = field(BYTES, nullable="0+")
    items: list[Item] = field(Array(Item))
    names: list[str] = field(Array(STRING))


def reference(value: Mixed, version: int, flexible: bool) -> bytes:
    """The same message written field by field with the primitives."""
    out = bytearray()

    def string(s: str | None) -> None:
        if flexible:
            p.write_compact_string(out, s)
        else:
            p.write_string(out, s)

    def length(n: int) -> None:
        if flexible:
            p.write_uvarint(out, n + 1)
        else:
            out.extend(p.INT32.pack(n))

    string(value.s)
    out += p.INT8.pack(value.x) + p.INT16.pack(value.y)
    if version >= 1:
        out += p.INT32.pack(value.z)
    out += p.UINT16.pack(value.u)
    out.append(1 if value.flag else 0)
    if version == 0:
        out += p.INT64.pack(value.old)
    string(value.ns)
    if value.blob is None:
        out += b"\0" if flexible else b"\xff\xff\xff\xff"
    else:
        length(len(value.blob))
        out += value.blob
    length(len(value.items))
    for item in value.items:
        out += p.INT32.pack(item.a) + p.INT64.pack(item.b)
        if flexible:
            out.append(0)
    length(len(value.names))
    for name in value.names:
        string(name)
    if flexible:
        out.append(0)
    return bytes(out)


texts = st.text(max_size=300)
messages = st.builds(
    Mixed,
    s=texts,
    x=st.integers(-128, 127),
    y=st.integers(-(1 << 15), (1 << 15) - 1),
    z=st.integers(-(1 << 31), (1 << 31) - 1),
    u=st.integers(0, (1 << 16) - 1),
    flag=st.booleans(),
    ns=st.none() | texts,
    blob=st.none() | st.binary(max_size=300),
    items=st.lists(st.builds(Item, a=st.integers(-(1 << 31), (1 << 31) - 1), b=st.integers(0, 1 << 62)), max_size=3),
    names=st.lists(st.text(max_size=5), max_size=200),
)


@settings(max_examples=150, deadline=None)
@given(messages, st.sampled_from([0, 1]), st.booleans())
def test_compiled_codec_matches_the_primitives(value: Mixed, version: int, flexible: bool) -> None:
    if version >= 1:
        value.old = 7  # not on the wire: decodes as the default
    else:
        value.z = 0
    wire = reference(value, version, flexible)
    assert codec.encode(value, version, flexible).getvalue() == wire
    decoded, end = codec.decode_at(Mixed, memoryview(wire), 0, version, flexible)
    assert end == len(wire)
    assert decoded == value


@pytest.mark.parametrize("flexible", [False, True])
def test_long_strings_and_arrays_use_multibyte_lengths(flexible: bool) -> None:
    value = Mixed(s="x" * 200, ns="é" * 100, blob=b"b" * 1000, names=["n"] * 300)
    wire = reference(value, 1, flexible)
    assert codec.encode(value, 1, flexible).getvalue() == wire
    assert codec.decode(Mixed, wire, 1, flexible) == value


def test_absent_list_default_is_fresh_and_scalar_default_is_the_declared_one() -> None:
    wire = reference(Mixed(), 1, True)
    first = codec.decode(Mixed, wire, 1, True)
    assert first.old == 7
    first.items.append(Item())
    assert codec.decode(Mixed, wire, 1, True).items == []


class Holder(Struct):
    item: Item = field(Item)
    tags: list[str] = field(Array(STRING), default=["a"])


def test_constructor_defaults_match_field_defaults_and_are_never_shared() -> None:
    # Struct.__init__ fills absent fields from a precomputed plan: same values as Field.default().
    made = Mixed(s="given")
    assert made.s == "given" and made.old == 7 and made.items == [] and made.ns == ""
    assert all(getattr(Mixed(), f.name) == f.default() for f in Mixed.FIELDS)
    one, two = Holder(), Holder()
    assert one.item == Item() and one.item is not two.item
    assert one.tags == ["a"] and one.tags is not two.tags
    one.tags.append("b")
    assert Holder().tags == ["a"]
    with pytest.raises(TypeError, match="no field"):
        Mixed(s="x", nope=1)


@pytest.mark.parametrize("flexible", [False, True])
def test_string_length_past_the_end_is_a_decode_error(flexible: bool) -> None:
    wire = bytearray(reference(Mixed(s="abc"), 1, flexible))
    if flexible:
        wire[0] = 100  # claims 99 bytes
    else:
        wire[0:2] = p.INT16.pack(99)
    with pytest.raises(DecodeError):
        codec.decode(Mixed, bytes(wire), 1, flexible)


@pytest.mark.parametrize("flexible", [False, True])
def test_null_for_a_non_nullable_string_is_a_decode_error(flexible: bool) -> None:
    wire = bytearray(reference(Mixed(s=""), 1, flexible))
    if flexible:
        wire[0] = 0
    else:
        wire[0:2] = b"\xff\xff"
    with pytest.raises(DecodeError, match="null value"):
        codec.decode(Mixed, bytes(wire), 1, flexible)


def test_unknown_tagged_fields_after_the_inline_check_are_skipped() -> None:
    wire = bytearray(reference(Mixed(), 1, True))
    wire[-1:] = b"\x02\x05\x01X\x09\x02YZ"  # two unknown tags instead of none
    assert codec.decode(Mixed, bytes(wire), 1, True) == Mixed()


def test_null_for_a_non_nullable_string_cannot_be_encoded() -> None:
    with pytest.raises(codec.EncodeError, match="may not be null"):
        codec.encode(Mixed(s=None), 1, True)


def test_out_of_range_value_in_a_packed_run_is_an_encode_error() -> None:
    with pytest.raises(codec.EncodeError):
        codec.encode(Mixed(y=1 << 20), 1, False)


def _header(version: int, client_id: str | None) -> bytes:
    out = bytearray(p.INT16.pack(8) + p.INT16.pack(9) + p.INT32.pack(12345))
    p.write_string(out, client_id)
    if version >= 2:
        out.append(0)
    return bytes(out) + b"body"


@pytest.mark.parametrize("client_id", [None, "", "client-1"])
@pytest.mark.parametrize("header_version", [1, 2])
def test_header_rest_equals_the_whole_header_decode(header_version: int, client_id: str | None) -> None:
    view = memoryview(_header(header_version, client_id))
    key, version, correlation = decode_request_header_prefix(view)
    assert (key, version, correlation) == (8, 9, 12345)
    whole: Any = decode_request_header(view, header_version)
    assert decode_request_header_rest(view, header_version, key, version, correlation) == whole
    assert bytes(view[whole[1] :]) == b"body"


def test_truncated_header_is_a_decode_error() -> None:
    view = memoryview(_header(2, "client-1")[:12])
    with pytest.raises(DecodeError):
        decode_request_header_rest(view, 2, 8, 9, 1)
