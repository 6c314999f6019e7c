"""Every declared API checked against independent implementations of the protocol.

For every ``ApiSpec`` in the registry, every version it declares, and both the
request and the response:

1. structure: the fields present in that version (names, order, tags,
   nullability, defaults, flexible or not) are compared with the schema class
   of ``kio`` (Aiven's package generated from Kafka's message definitions);
2. bytes: hypothesis draws values from OUR declaration; each is encoded by us
   and by kio and the bytes must be identical; kio's bytes decoded by us give
   the original value back; our bytes decoded by kio give it back too.

kio 0.6.5 is generated from Kafka 4's definitions, which dropped the oldest
versions of a few APIs (KIP-896). Those versions are listed in
``KIO_MISSING`` -- the test asserts the list is exact -- and are instead
checked against the hand-written schemas of kafka-python (``kafka.protocol.old``),
an implementation independent of Kafka's generator.

kio is a test oracle only: nothing here is copied into the package.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
import io
import pkgutil
import struct
import types
import typing
from collections.abc import Iterator
from typing import Any

import kio.index
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from slipstream.protocol import apis, codec, schema
from slipstream.protocol.api import REGISTRY, ApiSpec
from slipstream.protocol.primitives import ZERO_UUID
from slipstream.protocol.schema import (
    INT32,
    Array,
    Field,
    Primitive,
    Struct,
)

apis.load_all()  # registers every API in REGISTRY

MAX_EXAMPLES = 15

# Versions we declare that kio does not have (Kafka 4 removed them, KIP-896).
# Kept exact: a version missing from kio but not listed here fails, and so
# does a listed version that kio does have.
KIO_MISSING: dict[str, frozenset[int]] = {
    "Produce": frozenset({0, 1, 2}),
    "Fetch": frozenset({0, 1, 2, 3}),
    "ListOffsets": frozenset({0}),
    "OffsetCommit": frozenset({0, 1}),
    "OffsetFetch": frozenset({0}),
    "CreateTopics": frozenset({0, 1}),
    "DeleteTopics": frozenset({0}),
    "DescribeConfigs": frozenset({0}),
    "WriteTxnMarkers": frozenset({0}),
    "DescribeAcls": frozenset({0}),
    "CreateAcls": frozenset({0}),
    "DeleteAcls": frozenset({0}),
}

DIRECTIONS = ("request", "response")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MS = datetime.timedelta(milliseconds=1)
ERROR_CODES = sorted(int(e.value) for e in ErrorCode)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

# ------------------------------------------------------------------ helpers


def present(f: Field, version: int, flexible: bool) -> bool:
    return version in f.versions and (f.tag is None or flexible)


def kio_schema(spec: ApiSpec, version: int, direction: str) -> Any:
    load = (
        kio.index.load_request_schema if direction == "request" else kio.index.load_response_schema
    )
    try:
        return load(spec.key, version)
    except kio.index.UnknownEntity:
        return None


def kio_name(f: Field, kio_fields: dict[str, dataclasses.Field[Any]]) -> str | None:
    """kio's name for our field: the same, or without ``_ms`` for its timedelta types."""
    if f.name in kio_fields:
        return f.name
    if f.name.endswith("_ms") and f.name[:-3] in kio_fields:
        return f.name[:-3]
    return None


def kio_type(kf: dataclasses.Field[Any]) -> tuple[Any, bool, bool]:
    """(inner type, optional, is a tuple) of a kio dataclass field."""
    t = kf.type
    optional = False
    is_tuple = False
    if typing.get_origin(t) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        optional = len(args) != len(typing.get_args(t))
        (t,) = args
    if typing.get_origin(t) is tuple:
        is_tuple = True
        t = typing.get_args(t)[0]
        if typing.get_origin(t) in (types.UnionType, typing.Union):
            (t,) = [a for a in typing.get_args(t) if a is not type(None)]
    return t, optional, is_tuple


def kafka_type(kf: dataclasses.Field[Any]) -> str | None:
    value = kf.metadata.get("kafka_type")
    return value if isinstance(value, str) else None


def field_pairs(
    cls: type[Struct], kcls: type, version: int, flexible: bool
) -> list[tuple[Field, dataclasses.Field[Any]]]:
    """Our present fields paired with kio's; asserts both sides have the same fields."""
    kio_fields = {kf.name: kf for kf in dataclasses.fields(kcls)}
    pairs: list[tuple[Field, dataclasses.Field[Any]]] = []
    ours_unmatched = []
    for f in cls.FIELDS:
        if not present(f, version, flexible):
            continue
        name = kio_name(f, kio_fields)
        if name is None:
            ours_unmatched.append(f.name)
            continue
        pairs.append((f, kio_fields.pop(name)))
    where = f"{cls.__name__} v{version} (kio {kcls.__module__}.{kcls.__name__})"
    assert not ours_unmatched, f"{where}: fields kio does not have: {ours_unmatched}"
    assert not kio_fields, f"{where}: fields missing from our declaration: {sorted(kio_fields)}"
    return pairs


# ------------------------------------------------------------------ structure


def _kio_default(kf: dataclasses.Field[Any]) -> Any:
    if kf.default is not dataclasses.MISSING:
        return kf.default
    if kf.default_factory is not dataclasses.MISSING:
        return kf.default_factory()
    return dataclasses.MISSING


def check_structure(cls: type[Struct], kcls: Any, version: int, flexible: bool) -> None:
    """Names, order, tags, nullability and defaults of one version, recursively."""
    where = f"{cls.__name__} v{version}"
    assert bool(kcls.__flexible__) == flexible, (
        f"{where}: flexible={flexible}, kio says {kcls.__flexible__}"
    )
    pairs = field_pairs(cls, kcls, version, flexible)
    ours_order = [kf.name for f, kf in pairs if f.tag is None]
    kio_order = [kf.name for kf in dataclasses.fields(kcls) if "tag" not in kf.metadata]
    assert ours_order == kio_order, f"{where}: field order {ours_order} != kio {kio_order}"
    for f, kf in pairs:
        here = f"{where}.{f.name}"
        assert f.tag == kf.metadata.get("tag"), (
            f"{here}: tag {f.tag} != kio {kf.metadata.get('tag')}"
        )
        inner, optional, is_tuple = kio_type(kf)
        assert isinstance(f.type, Array) == is_tuple, f"{here}: array-ness differs from kio"
        kind = _kind(f)
        item = f.type.item if isinstance(f.type, Array) else f.type
        if isinstance(item, Primitive):
            wire = _KIO_WIRE_TYPES.get(kafka_type(kf) or "", kafka_type(kf))
            assert item.name == wire, f"{here}: type {item.name} != kio {kafka_type(kf)}"
        else:
            assert kafka_type(kf) is None, f"{here}: a struct where kio has {kafka_type(kf)}"
        if kind in ("string", "bytes", "records", "array", "struct"):
            assert (version in f.nullable) == optional, (
                f"{here}: nullable={version in f.nullable}, kio optional={optional}"
            )
        default = _kio_default(kf)
        if default is not dataclasses.MISSING:
            ours = _plain(f.default())
            theirs = _plain(from_kio_value(default, f, kf, version, flexible))
            assert ours == theirs, f"{here}: default {ours!r} != kio default {theirs!r}"
        elif not isinstance(f.type, Array):
            # No default in Kafka's definition: ours must be the type's own default.
            assert _is_type_default(f), f"{here}: default {f.default()!r}, Kafka declares none"
        nested = _nested(f)
        if nested is not None:
            check_structure(nested, inner, version, flexible)


# kio's richer Python types and the wire types they stand for.
_KIO_WIRE_TYPES = {
    "error_code": "int16",
    "timedelta_i32": "int32",
    "timedelta_i64": "int64",
    "datetime_i64": "int64",
}


def _kind(f: Field) -> str:
    if isinstance(f.type, Array):
        return "array"
    if isinstance(f.type, Primitive):
        return f.type.name
    return "struct"


def _nested(f: Field) -> type[Struct] | None:
    t = f.type.item if isinstance(f.type, Array) else f.type
    return t if isinstance(t, type) and issubclass(t, Struct) else None


def _is_type_default(f: Field) -> bool:
    if isinstance(f.type, Primitive):
        return f.default() == f.type.default() or (f.type.name == "records" and f.default() is None)
    nested = _nested(f)
    assert nested is not None
    default = f.default()
    return default is not None and default == nested()


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [x.to_dict() if isinstance(x, Struct) else x for x in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


# ------------------------------------------------------------------ strategies


def _int_strategy(name: str, ktype: str | None, optional: bool) -> st.SearchStrategy[int]:
    """Integers kio can represent for this field (its richer types constrain the range)."""
    if ktype == "error_code":
        return st.sampled_from(ERROR_CODES)
    if ktype == "timedelta_i64":
        return st.integers(-(2**47), 2**47)
    if ktype == "datetime_i64":
        # kio maps -1 to None (when the field may be null) and cannot represent other
        # negatives; its reader goes through a float, exact up to ~2**42 ms (year 2109).
        valid = st.integers(0, 2**42)
        return st.one_of(st.just(-1), valid) if optional else valid
    low, high = _INT_RANGES[name]
    return st.one_of(
        st.integers(low, high),
        st.sampled_from([-1, 0, 1, low, high]).filter(lambda v: low <= v <= high),
    )


_TEXT = st.text(st.characters(codec="utf-8"), max_size=8)


def _primitive_strategy(
    p: Primitive, ktype: str | None, optional_hint: bool, nullable: bool
) -> st.SearchStrategy[Any]:
    name = p.name
    s: st.SearchStrategy[Any]
    if name in _INT_RANGES:
        s = _int_strategy(name, ktype, optional_hint)
    elif name == "bool":
        s = st.booleans()
    elif name == "float64":
        s = st.floats(allow_nan=False, allow_infinity=False)
    elif name == "uuid":
        s = st.one_of(st.just(ZERO_UUID), st.uuids())
    elif name == "string":
        s = _TEXT
    elif name in ("bytes", "records"):
        s = st.binary(max_size=12)
    else:  # pragma: no cover
        raise AssertionError(f"unknown primitive {name}")
    if nullable:
        s = st.one_of(st.none(), s)
    return s


def struct_strategy(
    cls: type[Struct], version: int, flexible: bool, kcls: type | None, depth: int = 0
) -> st.SearchStrategy[Struct]:
    kio_fields = {kf.name: kf for kf in dataclasses.fields(kcls)} if kcls is not None else {}
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls.FIELDS:
        if not present(f, version, flexible):
            continue  # absent fields keep their default, which is what a decoder yields
        kname = kio_name(f, kio_fields) if kcls is not None else None
        kf = kio_fields.get(kname) if kname is not None else None
        ktype = kafka_type(kf) if kf is not None else None
        koptional = kio_type(kf)[1] if kf is not None else False
        nullable = version in f.nullable and f.tag is None
        t = f.type
        s: st.SearchStrategy[Any]
        if isinstance(t, Array):
            inner_k = kio_type(kf)[0] if kf is not None else None
            if isinstance(t.item, Primitive):
                item = _primitive_strategy(t.item, ktype, False, False)
            else:
                item = struct_strategy(t.item, version, flexible, inner_k, depth + 1)
            s = st.lists(item, max_size=3 if depth == 0 else 2)
            if nullable:
                s = st.one_of(st.none(), s)
        elif isinstance(t, Primitive):
            s = _primitive_strategy(t, ktype, koptional, nullable)
        else:
            inner_k = kio_type(kf)[0] if kf is not None else None
            s = struct_strategy(t, version, flexible, inner_k, depth + 1)
            if nullable:
                s = st.one_of(st.none(), s)
        if f.tag is not None or f._default is not schema._AUTO:
            # Defaults matter (tagged fields are omitted when equal to theirs): draw them often.
            s = st.one_of(st.builds(f.default), s)
        parts[f.name] = s
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))


# ------------------------------------------------------------------ conversions


def to_kio(value: Struct, kcls: type, version: int, flexible: bool) -> Any:
    kwargs = {}
    for f, kf in field_pairs(type(value), kcls, version, flexible):
        kwargs[kf.name] = to_kio_value(getattr(value, f.name), f, kf, version, flexible)
    return kcls(**kwargs)


def to_kio_value(v: Any, f: Field, kf: dataclasses.Field[Any], version: int, flexible: bool) -> Any:
    inner, optional, _ = kio_type(kf)
    if v is None:
        return None
    t = f.type
    if isinstance(t, Array):
        if isinstance(t.item, Primitive):
            return tuple(_to_kio_primitive(x, kafka_type(kf), optional=False) for x in v)
        return tuple(to_kio(x, inner, version, flexible) for x in v)
    if isinstance(t, Primitive):
        return _to_kio_primitive(v, kafka_type(kf), optional)
    return to_kio(v, inner, version, flexible)


def _to_kio_primitive(v: Any, ktype: str | None, optional: bool) -> Any:
    if ktype == "error_code":
        return ErrorCode(v)
    if ktype in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=v)
    if ktype == "datetime_i64":
        return None if (v == -1 and optional) else EPOCH + v * MS
    if ktype in ("records", "bytes"):
        return bytes(v)
    if ktype == "uuid" and optional and v == ZERO_UUID:
        # kio spells Kafka's zero uuid None in optional uuid fields (from_kio maps it back):
        # a tagged one left at its default is then omitted, as Kafka does.
        return None
    return v


def from_kio(entity: Any, cls: type[Struct], version: int, flexible: bool) -> Struct:
    values = {}
    for f, kf in field_pairs(cls, type(entity), version, flexible):
        values[f.name] = from_kio_value(getattr(entity, kf.name), f, kf, version, flexible)
    return cls(**values)


def from_kio_value(
    v: Any, f: Field, kf: dataclasses.Field[Any], version: int, flexible: bool
) -> Any:
    t = f.type
    if isinstance(t, Array):
        if v is None:
            return None
        if isinstance(t.item, Primitive):
            return [_from_kio_primitive(x, t.item, kafka_type(kf)) for x in v]
        return [from_kio(x, t.item, version, flexible) for x in v]
    if isinstance(t, Primitive):
        return _from_kio_primitive(v, t, kafka_type(kf))
    return None if v is None else from_kio(v, t, version, flexible)


def _from_kio_primitive(v: Any, p: Primitive, ktype: str | None) -> Any:
    if ktype == "datetime_i64":
        return -1 if v is None else (v - EPOCH) // MS
    if ktype in ("timedelta_i32", "timedelta_i64"):
        return v // MS
    if v is None:
        return ZERO_UUID if p.name == "uuid" else None
    if ktype == "error_code" or p.name in _INT_RANGES:
        return int(v.value if isinstance(v, ErrorCode) else v)
    if p.name == "bool":
        return bool(v)
    if p.name == "string":
        return str(v)
    if p.name in ("bytes", "records"):
        return bytes(v)
    if p.name == "float64":
        return float(v)
    return v


def kio_encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def kio_decode(kcls: type, data: bytes) -> Any:
    entity: Any
    size: int
    entity, size = entity_reader(kcls)(data, 0)
    assert size == len(data), f"kio consumed {size} of {len(data)} bytes"
    return entity


def ours_decode(cls: type[Struct], data: bytes, version: int, flexible: bool) -> Struct:
    value, end = codec.decode_at(cls, memoryview(data), 0, version, flexible)
    assert end == len(data), f"we consumed {end} of {len(data)} bytes"
    return value


def check_against_kio(value: Struct, kcls: type, version: int, flexible: bool) -> None:
    cls = type(value)
    ours = codec.encode(value, version, flexible).getvalue()
    theirs = kio_encode(to_kio(value, kcls, version, flexible))
    assert ours == theirs, (
        f"{cls.__name__} v{version}: our bytes differ from kio's\n{ours!r}\n{theirs!r}"
    )
    assert ours_decode(cls, theirs, version, flexible).to_dict() == value.to_dict()
    back = from_kio(kio_decode(kcls, ours), cls, version, flexible)
    assert back.to_dict() == value.to_dict()


# ------------------------------------------------------------------ kafka-python (old versions)


@functools.cache
def _kafka_python_old_classes() -> dict[str, Any]:
    import kafka.protocol.old as old

    found: dict[str, Any] = {}
    for mod in pkgutil.iter_modules(old.__path__):
        module = importlib.import_module(f"{old.__name__}.{mod.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, type) and hasattr(obj, "SCHEMA") and "_v" in name:
                found.setdefault(name, obj)
    for cls in _write_txn_markers_v0():
        found.setdefault(cls.__name__, cls)
    return found


def _write_txn_markers_v0() -> list[Any]:
    """WriteTxnMarkers v0 (Kafka 3.9 serves it; Kafka 4 and kafka-python do not): its
    layout written here with kafka-python's primitive types, from the protocol docs."""
    from kafka.protocol.old.types import Array as KpArray
    from kafka.protocol.old.types import Boolean, Int16, Int32, Int64, Schema, String

    request = Schema(
        ("markers", KpArray(
            ("producer_id", Int64),
            ("producer_epoch", Int16),
            ("transaction_result", Boolean),
            ("topics", KpArray(("name", String("utf-8")), ("partition_indexes", KpArray(Int32)))),
            ("coordinator_epoch", Int32),
        )),
    )
    response = Schema(
        ("markers", KpArray(
            ("producer_id", Int64),
            ("topics", KpArray(
                ("name", String("utf-8")),
                ("partitions", KpArray(("partition_index", Int32), ("error_code", Int16))),
            )),
        )),
    )
    return [
        type("WriteTxnMarkersRequest_v0", (), {"API_KEY": 27, "API_VERSION": 0, "SCHEMA": request}),
        type("WriteTxnMarkersResponse_v0", (), {"API_KEY": 27, "API_VERSION": 0, "SCHEMA": response}),
    ]


def to_positional(value: Any, f_type: Any, version: int) -> Any:
    """Our value as kafka-python's positional tuples (non-flexible versions only)."""
    if value is None:
        return None
    if isinstance(f_type, Array):
        return [to_positional(x, f_type.item, version) for x in value]
    if isinstance(f_type, Primitive):
        return bytes(value) if isinstance(value, memoryview) else value
    return tuple(
        to_positional(getattr(value, f.name), f.type, version)
        for f in f_type.FIELDS
        if version in f.versions
    )


def check_against_kafka_python(value: Struct, kp_cls: Any, version: int) -> None:
    cls = type(value)
    ours = codec.encode(value, version, False).getvalue()
    positional = to_positional(value, cls, version)
    theirs = kp_cls.SCHEMA.encode(positional)
    assert ours == theirs, f"{cls.__name__} v{version}: our bytes differ from kafka-python's"
    assert ours_decode(cls, theirs, version, False).to_dict() == value.to_dict()
    decoded = kp_cls.SCHEMA.decode(io.BytesIO(ours))
    assert _tuples(decoded) == _tuples(positional)


def _tuples(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_tuples(x) for x in v)
    return v


# ------------------------------------------------------------------ the tests


def _cases() -> Iterator[Any]:
    for key in sorted(REGISTRY):
        spec = REGISTRY[key]
        for version in range(spec.min_version, spec.max_version + 1):
            for direction in DIRECTIONS:
                yield pytest.param(
                    spec, version, direction, id=f"{spec.name}-v{version}-{direction}"
                )


CASES = list(_cases())
SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _message(spec: ApiSpec, direction: str) -> type[Struct]:
    return spec.request if direction == "request" else spec.response


def test_registry_is_not_empty() -> None:
    # Guards against a silent pass if the package stopped registering its APIs.
    assert {0, 1, 2, 3, 17, 18, 19, 20, 21, 22, 32, 33, 37, 44, 60, 75} <= set(REGISTRY)


def test_kio_missing_allow_list_is_exact() -> None:
    missing: dict[str, set[int]] = {}
    for spec in REGISTRY.values():
        for version in range(spec.min_version, spec.max_version + 1):
            for direction in DIRECTIONS:
                if kio_schema(spec, version, direction) is None:
                    missing.setdefault(spec.name, set()).add(version)
    expected = {
        name: set(vs)
        for name, vs in KIO_MISSING.items()
        if name in {s.name for s in REGISTRY.values()}
    }
    assert missing == expected


@pytest.mark.parametrize(("spec", "version", "direction"), CASES)
def test_matches_oracle(spec: ApiSpec, version: int, direction: str) -> None:
    cls = _message(spec, direction)
    flexible = spec.is_flexible(version)
    kcls = kio_schema(spec, version, direction)
    if kcls is None:
        assert version in KIO_MISSING.get(spec.name, ()), f"kio lacks {spec.name} v{version}"
        assert not flexible
        kp_name = f"{spec.name}{direction.capitalize()}_v{version}"
        kp_cls = _kafka_python_old_classes().get(kp_name)
        assert kp_cls is not None, f"neither kio nor kafka-python has {kp_name}"
        assert version == kp_cls.API_VERSION

        @SETTINGS
        @given(struct_strategy(cls, version, flexible, None))
        def run_kp(value: Struct) -> None:
            check_against_kafka_python(value, kp_cls, version)

        run_kp()
        return

    check_structure(cls, kcls, version, flexible)
    assert kcls.__api_key__ == spec.key

    @SETTINGS
    @given(struct_strategy(cls, version, flexible, kcls))
    def run(value: Struct) -> None:
        check_against_kio(value, kcls, version, flexible)

    run()


def test_default_message_matches_kio() -> None:
    """A message built with every default encodes like kio's (defaults and tagged omission)."""
    for spec in REGISTRY.values():
        for version in range(spec.min_version, spec.max_version + 1):
            for direction in DIRECTIONS:
                kcls = kio_schema(spec, version, direction)
                if kcls is None:
                    continue
                check_against_kio(
                    _message(spec, direction)(), kcls, version, spec.is_flexible(version)
                )


# ------------------------------------------------------------------ the oracle catches mistakes


def mutated(
    cls: type[Struct],
    name: str,
    *,
    swap_with: str | None = None,
    drop: bool = False,
    **changes: Any,
) -> type[Struct]:
    """A copy of a real declaration with one field changed, dropped or moved."""
    copies: dict[str, Field] = {}
    for f in cls.FIELDS:
        attrs = {
            "type_": f.type,
            "versions": f.versions,
            "nullable": f.nullable,
            "tag": f.tag,
            "default": f._default,
        }
        if f.name == name:
            attrs.update(changes)
            if drop:
                continue
        copies[f.name] = Field(**attrs)
    order = list(copies)
    if swap_with is not None:
        i, j = order.index(name), order.index(swap_with)
        order[i], order[j] = order[j], order[i]
    result = type(cls.__name__, (Struct,), {n: copies[n] for n in order})
    return typing.cast(type[Struct], result)


def _mistakes() -> Iterator[Any]:
    """(wrong declaration, the right one, kio class, version, flexible, message, layout?)."""
    from slipstream.protocol.apis import fetch, metadata, produce

    table: list[tuple[str, type[Struct], dict[str, Any], str, int, str, bool]] = [
        # id, right declaration, mutation, kio module:class, version, expected message, layout
        ("missing-field", produce.ProduceRequest, {"name": "transactional_id", "drop": True},
         "produce.v3.request:ProduceRequest", 3, "missing from our declaration", True),
        ("extra-field", produce.ProduceResponsePartition,
         {"name": "log_start_offset", "versions": schema.Versions(3, None)},
         "produce.v3.response:PartitionProduceResponse", 3, "fields kio does not have", True),
        ("wrong-order", fetch.FetchRequest, {"name": "max_wait_ms", "swap_with": "min_bytes"},
         "fetch.v4.request:FetchRequest", 4, "field order", True),
        ("wrong-versions", produce.ProduceResponse,
         {"name": "throttle_time_ms", "versions": schema.Versions(4, None)},
         "produce.v3.response:ProduceResponse", 3, "missing from our declaration", True),
        ("wrong-type", produce.ProduceRequest, {"name": "acks", "type_": INT32},
         "produce.v3.request:ProduceRequest", 3, "type int32 != kio int16", True),
        ("wrong-tag", fetch.FetchResponsePartition, {"name": "current_leader", "tag": 5},
         "fetch.v12.response:PartitionData", 12, "tag 5 != kio 1", True),
        ("not-tagged", fetch.FetchResponsePartition, {"name": "current_leader", "tag": None},
         "fetch.v12.response:PartitionData", 12, "field order", True),
        ("wrong-nullable", metadata.MetadataResponseTopic,
         {"name": "name", "nullable": schema.Versions(0, None)},
         "metadata.v1.response:MetadataResponseTopic", 1, "nullable=True", False),
        ("not-nullable", fetch.FetchResponsePartition,
         {"name": "records", "nullable": schema.NO_VERSIONS},
         "fetch.v4.response:PartitionData", 4, "nullable=False", False),
        ("wrong-default", fetch.FetchResponseEpochEndOffset, {"name": "epoch", "default": 0},
         "fetch.v16.response:EpochEndOffset", 16, "default 0 != kio default -1", False),
        ("default-missing", fetch.FetchRequestPartition,
         {"name": "log_start_offset", "default": schema._AUTO},
         "fetch.v16.request:FetchPartition", 16, "default 0 != kio default -1", False),
        ("invented-default", fetch.FetchRequestPartition, {"name": "fetch_offset", "default": -1},
         "fetch.v16.request:FetchPartition", 16, "Kafka declares none", False),
    ]  # fmt: skip
    for id_, right, change, where, version, match, layout in table:
        module, name = where.split(":")
        kcls = getattr(importlib.import_module(f"kio.schema.{module}"), name)
        flexible = bool(kcls.__flexible__)
        wrong = mutated(right, **change)
        yield pytest.param(wrong, right, kcls, version, flexible, match, layout, id=id_)


MISTAKES = list(_mistakes())
LAYOUT_MISTAKES = [m for m in MISTAKES if m.values[-1]]
MISTAKE_ARGS = ("wrong", "right", "kcls", "version", "flexible", "match", "layout")


@pytest.mark.parametrize(MISTAKE_ARGS, MISTAKES)
def test_structure_check_rejects_wrong_declarations(
    wrong: type[Struct],
    right: type[Struct],
    kcls: type,
    version: int,
    flexible: bool,
    match: str,
    layout: bool,
) -> None:
    check_structure(right, kcls, version, flexible)
    with pytest.raises(AssertionError, match=match):
        check_structure(wrong, kcls, version, flexible)


def _byte_check_failures(cls: type[Struct], kcls: type, version: int, flexible: bool) -> int:
    failures = 0

    @settings(
        max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(struct_strategy(cls, version, flexible, kcls))
    def run(value: Struct) -> None:
        nonlocal failures
        try:
            check_against_kio(value, kcls, version, flexible)
        except (AssertionError, struct.error):
            failures += 1

    run()
    return failures


@pytest.mark.parametrize(MISTAKE_ARGS, LAYOUT_MISTAKES)
def test_byte_check_alone_rejects_layout_mistakes(
    wrong: type[Struct],
    right: type[Struct],
    kcls: type,
    version: int,
    flexible: bool,
    match: str,
    layout: bool,
) -> None:
    """Without the structure check, the encode/decode comparison still exposes a wrong layout."""
    assert _byte_check_failures(right, kcls, version, flexible) == 0
    assert _byte_check_failures(wrong, kcls, version, flexible) > 0
