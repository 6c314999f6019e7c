"""The declaration language for Kafka messages: protocol as data.

A message is a ``Struct`` subclass whose class attributes are ``field(...)``
declarations, in wire order, each tagged with the versions it exists in::

    class JoinGroupRequestProtocol(Struct):
        name: str = field(STRING)
        metadata: bytes = field(BYTES)

    class JoinGroupRequest(Struct):
        group_id: str = field(STRING)
        rebalance_timeout_ms: int = field(INT32, v="1+", default=-1)
        group_instance_id: str | None = field(STRING, v="5+", nullable="5+", default=None)
        protocols: list[JoinGroupRequestProtocol] = field(Array(JoinGroupRequestProtocol))

The annotations give type checkers the attribute types; ``codec.py`` compiles
per-version encoders/decoders from the field list. Field names are Kafka's own
names in snake_case.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .generated_code import compile_generated
from .primitives import ZERO_UUID


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``high`` None means open-ended ("3+")."""

    low: int
    high: int | None

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.low <= version and (self.high is None or version <= self.high)

    @classmethod
    def parse(cls, spec: str | None) -> Versions:
        if spec is None or spec == "none":
            return NO_VERSIONS
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            low, high = spec.split("-")
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))


NO_VERSIONS = Versions(1, 0)


@dataclass(frozen=True, slots=True)
class Primitive:
    """A field type: one of the protocol's primitive types, by name."""

    name: str

    def default(self) -> Any:
        return _PRIMITIVE_DEFAULTS[self.name]


INT8 = Primitive("int8")
INT16 = Primitive("int16")
INT32 = Primitive("int32")
INT64 = Primitive("int64")
UINT16 = Primitive("uint16")
UINT32 = Primitive("uint32")
FLOAT64 = Primitive("float64")
BOOL = Primitive("bool")
UUID = Primitive("uuid")
STRING = Primitive("string")
BYTES = Primitive("bytes")
RECORDS = Primitive("records")

_PRIMITIVE_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "float64": 0.0,
    "bool": False,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


@dataclass(frozen=True, slots=True)
class Array:
    """A field type: a list of a primitive or of a struct."""

    item: Primitive | type[Struct]


FieldType = Primitive | Array | type["Struct"]

_AUTO: Any = object()


class Field:
    """One declared field. ``tag`` marks a tagged field (flexible versions only)."""

    __slots__ = ("_default", "name", "nullable", "tag", "type", "versions")

    def __init__(
        self,
        type_: FieldType,
        versions: Versions,
        nullable: Versions,
        tag: int | None,
        default: Any,
    ) -> None:
        self.name = ""
        self.type = type_
        self.versions = versions
        self.nullable = nullable
        self.tag = tag
        self._default = default

    def default(self) -> Any:
        """A fresh default value (lists are never shared between messages)."""
        if self._default is not _AUTO:
            return list(self._default) if isinstance(self._default, list) else self._default
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Primitive):
            return self.type.default()
        return self.type()

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions})"


def field(
    type_: FieldType,
    *,
    v: str = "0+",
    nullable: str | None = None,
    tag: int | None = None,
    default: Any = _AUTO,
) -> Any:
    """Declare a field. Typed ``Any`` so ``name: int = field(INT32)`` type-checks."""
    return Field(type_, _versions(v), _versions(nullable), tag, default)


# The ~1,400 field declarations repeat a few dozen ranges: each is parsed once (import time).
_PARSED: dict[str | None, Versions] = {}


def _versions(spec: str | None) -> Versions:
    parsed = _PARSED.get(spec)
    if parsed is None:
        parsed = _PARSED[spec] = Versions.parse(spec)
    return parsed


class Struct:
    """Base of every message and nested structure; fields come from the declarations."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: list[Field] = []
        for name, value in list(vars(cls).items()):
            if isinstance(value, Field):
                value.name = name
                fields.append(value)
                # Instances hold values in __dict__; the class keeps the declaration list.
                delattr(cls, name)
        cls.FIELDS = tuple(fields)
        if "__init__" not in vars(cls):
            # Its own entry (not a parent's compiled one), replaced on first use.
            cls.__init__ = Struct.__init__  # type: ignore[method-assign]

    def __init__(self, **values: Any) -> None:
        # A class made often compiles its own __init__ (see _compiled_init) and installs
        # it; only then, so that importing the declarations and making the few messages
        # of start-up (a compile costs about a millisecond) stay cheap.
        cls = type(self)
        if vars(cls).get("__init__") is Struct.__init__:
            uses = _uses[cls] = _uses.get(cls, 0) + 1
            if uses >= COMPILE_INIT_AFTER:
                init = _compiled_init(cls)
                if init is not None:
                    cls.__init__ = init  # type: ignore[method-assign]
                    init(self, **values)
                    return
        self._generic_init(values)

    def _generic_init(self, values: dict[str, Any]) -> None:
        for f in self.FIELDS:
            if f.name in values:
                setattr(self, f.name, values.pop(f.name))
            else:
                setattr(self, f.name, f.default())
        if values:
            raise TypeError(f"{type(self).__name__} has no field(s) {', '.join(sorted(values))}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in self.FIELDS)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.FIELDS)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in self.FIELDS:
            value = getattr(self, f.name)
            if isinstance(value, list):
                value = [x.to_dict() if isinstance(x, Struct) else x for x in value]
            elif isinstance(value, Struct):
                value = value.to_dict()
            elif isinstance(value, memoryview):
                value = bytes(value)
            out[f.name] = value
        return out


def _compiled_init(cls: type[Struct]) -> Any:
    """A straight-line ``__init__`` for ``cls``: one assignment per field, defaults bound
    as constants (fresh lists and nested structs made per call, as ``Field.default``), and
    unknown names refused with the same error. Responses are built per partition per
    request, and the generic loop costs about 0.5 us per field. None when a field name
    cannot be a parameter (then the generic loop stays)."""
    import keyword

    names = [f.name for f in cls.FIELDS]
    if any(keyword.iskeyword(n) or not n.isidentifier() or n in ("self", "values") for n in names):
        return None
    env: dict[str, Any] = {"_MISSING": _MISSING, "_cls": cls}
    body: list[str] = []
    for f in cls.FIELDS:
        n = f.name
        if f._default is not _AUTO and isinstance(f._default, list):
            env[f"_d_{n}"] = f._default
            fresh = f"list(_d_{n})"
        elif f._default is not _AUTO:
            env[f"_d_{n}"] = f._default
            fresh = f"_d_{n}"
        elif isinstance(f.type, Array):
            fresh = "[]"
        elif isinstance(f.type, Primitive):
            env[f"_d_{n}"] = f.type.default()  # immutable: 0, "", b"", False, None, a UUID
            fresh = f"_d_{n}"
        else:
            env[f"_t_{n}"] = f.type
            fresh = f"_t_{n}()"
        body.append(f"    self.{n} = _d if (_d := values.pop({n!r}, _MISSING)) is not _MISSING else {fresh}")
    body.append("    if values:")
    body.append("        _cls._generic_init(self, values)")  # words the error as before
    source = "def __init__(self, **values):\n" + "\n".join(body) + "\n"
    namespace: dict[str, Any] = {}
    exec(compile_generated(source, f"<struct init {cls.__name__}>"), env, namespace)
    return namespace["__init__"]


_MISSING: Any = object()
# Instances of a class made with the generic __init__ before it gets a compiled one.
COMPILE_INIT_AFTER = 64
_uses: dict[type, int] = {}


def is_uuid(value: object) -> bool:
    return isinstance(value, uuid.UUID)


_C = TypeVar("_C")


def fast_frozen_init(cls: type[_C]) -> type[_C]:
    """Give a frozen, slotted dataclass an ``__init__`` that stores fields through their slots.

    Why: the generated ``__init__`` of a frozen dataclass calls ``object.__setattr__``
    (looked up anew) per field, about 0.15 us each; these objects are made on every
    request (headers, records, coordinator results), and storing through the slot
    descriptors takes about half that. Same signature, defaults and frozenness;
    classes with default factories, init=False fields or ``__post_init__`` are refused.
    """
    import dataclasses

    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(cls):
        raise TypeError(f"{cls.__name__} is not a frozen, slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__")
    env: dict[str, Any] = {}
    args: list[str] = []
    kw_only: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # checked above: a dataclass
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain fields and defaults are supported")
        arg = f.name
        if f.default is not dataclasses.MISSING:
            env[f"_d_{f.name}"] = f.default
            arg = f"{f.name}=_d_{f.name}"
        (kw_only if f.kw_only else args).append(arg)
        env[f"_s_{f.name}"] = getattr(cls, f.name).__set__  # the slot descriptor
        body.append(f"    _s_{f.name}(self, {f.name})")
    signature = ", ".join(["self", *args, *(["*", *kw_only] if kw_only else [])])
    source = f"def __init__({signature}):\n" + ("\n".join(body) or "    pass") + "\n"
    namespace: dict[str, Any] = {}
    exec(compile_generated(source, f"<fast_frozen_init {cls.__name__}>"), env, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
