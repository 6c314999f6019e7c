"""Compiles ``Struct`` declarations into straight-line per-version codecs.

For each (struct, version, flexible) the compiler emits Python source with one
statement per field, so a message is read or written without walking the
declaration at run time. Record batches are never copied: decoding yields
memoryviews into the request buffer, encoding emits them as separate buffers
in the output list (a ``FileRegion`` among them stays a region, for the writer to send).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from . import primitives as p
from .file_region import FileRegion
from .generated_code import compile_generated
from .schema import Array, Field, Primitive, Struct

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[Any, "Writer"], None]

# Blobs at least this big are passed through as their own buffer instead of copied.
_BLOB_THRESHOLD = 512

# One part of an encoded message: bytes, or a file region the writer sends itself.
Part = bytes | bytearray | memoryview | FileRegion


class EncodeError(ValueError):
    """A message value that cannot be written in the requested version."""


class Writer:
    """Accumulates small fields in a bytearray and large blobs as separate buffers."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Part] = []

    def blob(self, data: bytes | memoryview | FileRegion) -> None:
        if len(data) < _BLOB_THRESHOLD and not isinstance(data, FileRegion):
            self.buf += data
            return
        if self.buf:
            self.parts.append(self.buf)
            self.buf = bytearray()
        self.parts.append(data)

    def finish(self) -> list[Part]:
        if self.buf:
            self.parts.append(self.buf)
            self.buf = bytearray()
        return self.parts

    def size(self) -> int:
        return len(self.buf) + sum(len(x) for x in self.parts)

    def getvalue(self) -> bytes:
        return b"".join(part.read() if isinstance(part, FileRegion) else part for part in self.finish())


_FIXED = {
    "int8": ("p.INT8", 1),
    "int16": ("p.INT16", 2),
    "int32": ("p.INT32", 4),
    "int64": ("p.INT64", 8),
    "uint16": ("p.UINT16", 2),
    "uint32": ("p.UINT32", 4),
    "float64": ("p.FLOAT64", 8),
}

_decoders: dict[tuple[type[Struct], int, bool], Decoder] = {}
_encoders: dict[tuple[type[Struct], int, bool], Encoder] = {}


def decoder(cls: type[Struct], version: int, flexible: bool) -> Decoder:
    key = (cls, version, flexible)
    fn = _decoders.get(key)
    if fn is None:
        fn = _decoders[key] = _compile_decoder(cls, version, flexible)
    return fn


def encoder(cls: type[Struct], version: int, flexible: bool) -> Encoder:
    key = (cls, version, flexible)
    fn = _encoders.get(key)
    if fn is None:
        fn = _encoders[key] = _compile_encoder(cls, version, flexible)
    return fn


def decode(cls: type[Struct], buf: memoryview | bytes, version: int, flexible: bool) -> Any:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return decode_at(cls, view, 0, version, flexible)[0]


def decode_at(
    cls: type[Struct], view: memoryview, pos: int, version: int, flexible: bool
) -> tuple[Any, int]:
    """Decode starting at ``pos``; any malformation surfaces as DecodeError."""
    try:
        return decoder(cls, version, flexible)(view, pos)
    except p.DecodeError:
        raise
    except Exception as exc:  # struct.error, IndexError, UnicodeDecodeError from bad input
        raise p.DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from exc


def encode(value: Struct, version: int, flexible: bool, writer: Writer | None = None) -> Writer:
    w = writer if writer is not None else Writer()
    try:
        encoder(type(value), version, flexible)(value, w)
    except EncodeError:
        raise
    except (struct.error, AttributeError, TypeError) as exc:
        # An out-of-range int, a missing nested struct, a wrong type: say which message.
        raise EncodeError(f"cannot encode {type(value).__name__} v{version}: {exc}") from exc
    return w


# ---------------------------------------------------------------- compiler


class _Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"p": p, "EncodeError": EncodeError}
        self._n = 0

    def name(self, obj: Any, prefix: str) -> str:
        self._n += 1
        key = f"_{prefix}{self._n}"
        self.env[key] = obj
        return key

    def tmp(self) -> str:
        self._n += 1
        return f"t{self._n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _present(f: Field, version: int, flexible: bool) -> bool:
    if version not in f.versions:
        return False
    return f.tag is None or flexible


def _compile(src_lines: list[str], env: dict[str, Any], name: str) -> Any:
    source = "\n".join(src_lines)
    namespace: dict[str, Any] = {}
    exec(compile_generated(source, f"<slipstream codec {name}>"), env, namespace)
    return namespace[name]


def _compile_decoder(cls: type[Struct], version: int, flexible: bool) -> Decoder:
    e = _Emitter()
    cls_name = e.name(cls, "cls")
    e.emit(0, "def decode(buf, pos):")
    e.emit(1, f"o = {cls_name}.__new__({cls_name})")
    tagged: list[Field] = []
    # Adjacent fixed-width fields are read with one struct call (fewer calls per message).
    run: list[Field] = []
    for f in cls.FIELDS:
        present = _present(f, version, flexible)
        if present and f.tag is None and _fixed_code(f) is not None:
            run.append(f)
            continue
        _emit_fixed_run(e, run)
        run = []
        if not present or f.tag is not None:
            if present:
                tagged.append(f)
            e.emit(1, f"o.{f.name} = {_default_expr(e, f)}")
            continue
        _emit_read(e, 1, f"o.{f.name}", f, version, flexible)
    _emit_fixed_run(e, run)
    if flexible:
        if tagged:
            e.emit(1, "count, pos = p.read_uvarint(buf, pos)")
            e.emit(1, "for _ in range(count):")
            e.emit(2, "tag, pos = p.read_uvarint(buf, pos)")
            e.emit(2, "size, pos = p.read_uvarint(buf, pos)")
            e.emit(2, "end = pos + size")
            e.emit(2, "if end > len(buf): raise p.DecodeError('tagged field runs past the end of the message')")
            first = True
            for f in tagged:
                kw = "if" if first else "elif"
                first = False
                e.emit(2, f"{kw} tag == {f.tag}:")
                _emit_read(e, 3, f"o.{f.name}", f, version, flexible)
            e.emit(2, "pos = end  # unknown tags are skipped, known ones end where they said")
        else:
            # Almost every message has no tagged fields: one zero byte, checked inline.
            e.emit(1, "if buf[pos] == 0: pos += 1")
            e.emit(1, "else: pos = p.skip_tagged_fields(buf, pos)")
    e.emit(1, "return o, pos")
    return _compile(e.lines, e.env, "decode")


_IMMUTABLE_DEFAULTS = (int, float, bool, str, bytes, type(None), uuid.UUID)


def _default_expr(e: _Emitter, f: Field) -> str:
    """An absent field's default: a shared constant when immutable, else a fresh value."""
    value = f.default()
    if type(value) in _IMMUTABLE_DEFAULTS:
        return e.name(value, "c")
    return f"{e.name(f, 'f')}.default()"


_STRUCT_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I", "float64": "d"}


def _fixed_code(f: Field) -> str | None:
    t = f.type
    if isinstance(t, Primitive):
        return _STRUCT_CODES.get(t.name)
    return None


def _emit_fixed_run(e: _Emitter, run: list[Field]) -> None:
    if not run:
        return
    if len(run) == 1:
        t = run[0].type
        assert isinstance(t, Primitive)
        _emit_read_primitive(e, 1, f"o.{run[0].name}", t, False, False)
        return
    st = struct.Struct(">" + "".join(_fixed_code(f) or "" for f in run))
    name = e.name(st, "st")
    targets = ", ".join(f"o.{f.name}" for f in run)
    e.emit(1, f"{targets} = {name}.unpack_from(buf, pos); pos += {st.size}")


def _emit_uvarint(e: _Emitter, ind: int, target: str) -> None:
    """Read an unsigned varint into ``target``; the one-byte case (nearly all) inline."""
    e.emit(ind, f"{target} = buf[pos]")
    e.emit(ind, f"if {target} < 128: pos += 1")
    e.emit(ind, f"else: {target}, pos = p.read_uvarint(buf, pos)")


def _emit_read(e: _Emitter, ind: int, target: str, f: Field, version: int, flexible: bool) -> None:
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, Array):
        n = e.tmp()
        if flexible:
            _emit_uvarint(e, ind, n)
            e.emit(ind, f"{n} -= 1")
        else:
            e.emit(ind, f"{n} = p.INT32.unpack_from(buf, pos)[0]; pos += 4")
        e.emit(ind, f"if {n} < 0:")
        if nullable:
            e.emit(ind + 1, f"{target} = None")
        else:
            e.emit(ind + 1, f"raise p.DecodeError('null array for non-nullable field {f.name}')")
        e.emit(ind, "else:")
        lst = e.tmp()
        e.emit(ind + 1, f"if {n} > len(buf) - pos: raise p.DecodeError('array length {{}} exceeds message'.format({n}))")
        e.emit(ind + 1, f"{lst} = []")
        item = t.item
        if isinstance(item, Primitive):
            e.emit(ind + 1, f"for _ in range({n}):")
            _emit_read_primitive(e, ind + 2, "_v", item, flexible, False)
            e.emit(ind + 2, f"{lst}.append(_v)")
        else:
            sub = e.name(decoder(item, version, flexible), "dec")
            e.emit(ind + 1, f"for _ in range({n}):")
            e.emit(ind + 2, f"_v, pos = {sub}(buf, pos)")
            e.emit(ind + 2, f"{lst}.append(_v)")
        e.emit(ind + 1, f"{target} = {lst}")
        return
    if isinstance(t, Primitive):
        _emit_read_primitive(e, ind, target, t, flexible, nullable)
        return
    sub = e.name(decoder(t, version, flexible), "dec")
    if nullable:
        e.emit(ind, "if p.INT8.unpack_from(buf, pos)[0] < 0:")
        e.emit(ind + 1, f"{target} = None; pos += 1")
        e.emit(ind, "else:")
        e.emit(ind + 1, f"{target}, pos = {sub}(buf, pos + 1)")
    else:
        e.emit(ind, f"{target}, pos = {sub}(buf, pos)")


def _emit_read_primitive(
    e: _Emitter, ind: int, target: str, t: Primitive, flexible: bool, nullable: bool
) -> None:
    kind = t.name
    if kind in _FIXED:
        st, size = _FIXED[kind]
        e.emit(ind, f"{target} = {st}.unpack_from(buf, pos)[0]; pos += {size}")
    elif kind == "bool":
        e.emit(ind, f"{target} = buf[pos] != 0; pos += 1")
    elif kind == "uuid":
        e.emit(ind, f"{target}, pos = p.read_uuid(buf, pos)")
    elif kind in ("string", "bytes", "records"):
        # p.read_[compact_]string/bytes/records inlined: one call less per field.
        n = e.tmp()
        if flexible:
            _emit_uvarint(e, ind, n)
            e.emit(ind, f"{n} -= 1")
        elif kind == "string":
            e.emit(ind, f"{n} = p.INT16.unpack_from(buf, pos)[0]; pos += 2")
        else:
            e.emit(ind, f"{n} = p.INT32.unpack_from(buf, pos)[0]; pos += 4")
        e.emit(ind, f"if {n} < 0:")
        if nullable or kind == "records":
            e.emit(ind + 1, f"{target} = None")
        else:
            e.emit(ind + 1, f"raise p.DecodeError('null value for a non-nullable {kind}')")
        e.emit(ind, "else:")
        end = e.tmp()
        e.emit(ind + 1, f"{end} = pos + {n}")
        e.emit(
            ind + 1,
            f"if {end} > len(buf): raise p.DecodeError("
            f"'field of {{}} bytes runs past the end of the message'.format({n}))",
        )
        value = {"string": "str(buf[pos:{end}], 'utf-8')", "bytes": "bytes(buf[pos:{end}])", "records": "buf[pos:{end}]"}
        e.emit(ind + 1, f"{target} = {value[kind].format(end=end)}; pos = {end}")
    else:  # pragma: no cover - declarations are checked at import
        raise TypeError(f"unknown primitive {kind}")


def _compile_encoder(cls: type[Struct], version: int, flexible: bool) -> Encoder:
    e = _Emitter()
    e.emit(0, "def encode(o, w):")
    tagged: list[Field] = []
    run: list[Field] = []
    for f in cls.FIELDS:
        if not _present(f, version, flexible):
            continue
        if f.tag is not None:
            tagged.append(f)
            continue
        if _fixed_code(f) is not None:
            run.append(f)
            continue
        _emit_write_fixed_run(e, run, version, flexible)
        run = []
        _emit_write(e, 1, f"o.{f.name}", f, version, flexible)
    _emit_write_fixed_run(e, run, version, flexible)
    if flexible:
        if not tagged:
            e.emit(1, "w.buf.append(0)")
        else:
            # Tagged fields are written only when they differ from their default.
            e.emit(1, "tags = []")
            for f in sorted(tagged, key=lambda x: x.tag or 0):
                e.emit(1, f"if {_differs_from_default(e, f)}:")
                e.emit(2, "outer = w; w = p_Writer()")
                _emit_write(e, 2, f"o.{f.name}", f, version, flexible)
                e.emit(2, f"tags.append(({f.tag}, w.getvalue())); w = outer")
            e.env["p_Writer"] = Writer
            e.emit(1, "if not tags: w.buf.append(0)")  # the usual case: none differs
            e.emit(1, "else:")
            e.emit(2, "p.write_uvarint(w.buf, len(tags))")
            e.emit(2, "for tag, data in tags:")
            e.emit(3, "p.write_uvarint(w.buf, tag); p.write_uvarint(w.buf, len(data)); w.buf += data")
    if len(e.lines) == 1:
        e.emit(1, "pass")
    return _compile(e.lines, e.env, "encode")


def _differs_from_default(e: _Emitter, f: Field) -> str:
    """An expression: whether ``o``'s value of tagged field ``f`` differs from its default
    (and so is written). Run for every message, so no default is made per message: a
    struct whose defaults are plain values is compared field by field inline (as
    ``Struct.__eq__`` does, without its generic loop), anything else with one default
    made now (only compared, never handed out)."""
    default = f.default()
    if isinstance(default, Struct):
        values = [(g.name, getattr(default, g.name)) for g in default.FIELDS]
        if all(type(v) in _IMMUTABLE_DEFAULTS for _, v in values):
            value = e.tmp()
            tests = [f"({value} := o.{f.name}).__class__ is not {e.name(type(default), 'cls')}"]
            tests += [f"{value}.{name} != {e.name(v, 'c')}" for name, v in values]
            return " or ".join(tests)
    return f"o.{f.name} != {e.name(default, 'd')}"


def _emit_write_fixed_run(e: _Emitter, run: list[Field], version: int, flexible: bool) -> None:
    """Adjacent fixed-width fields written with one struct call."""
    if not run:
        return
    if len(run) == 1:
        _emit_write(e, 1, f"o.{run[0].name}", run[0], version, flexible)
        return
    st = struct.Struct(">" + "".join(_fixed_code(f) or "" for f in run))
    name = e.name(st, "st")
    e.emit(1, f"w.buf += {name}.pack({', '.join(f'o.{f.name}' for f in run)})")


def _emit_write_uvarint(e: _Emitter, ind: int, expr: str) -> None:
    """Append ``expr`` as an unsigned varint; the one-byte case (nearly all) inline."""
    n = e.tmp()
    e.emit(ind, f"{n} = {expr}")
    e.emit(ind, f"if {n} < 128: w.buf.append({n})")
    e.emit(ind, f"else: p.write_uvarint(w.buf, {n})")


def _emit_write_null(
    e: _Emitter, ind: int, v: str, nullable: bool, flexible: bool, width: int, name: str, version: int
) -> None:
    """``if v is None:`` writing the null length (compact 0, else -1 in ``width`` bytes) or refusing it."""
    e.emit(ind, f"if {v} is None:")
    if nullable:
        minus_one = repr(b"\xff" * width)
        e.emit(ind + 1, "w.buf.append(0)" if flexible else f"w.buf += {minus_one}")
    else:
        e.emit(ind + 1, f"raise EncodeError('{name} may not be null in version {version}')")


def _emit_write(e: _Emitter, ind: int, src: str, f: Field, version: int, flexible: bool) -> None:
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, Array):
        v = e.tmp()
        e.emit(ind, f"{v} = {src}")
        _emit_write_null(e, ind, v, nullable, flexible, 4, f.name, version)
        e.emit(ind, "else:")
        if flexible:
            _emit_write_uvarint(e, ind + 1, f"len({v}) + 1")
        else:
            e.emit(ind + 1, f"w.buf += p.INT32.pack(len({v}))")
        item = t.item
        if isinstance(item, Primitive):
            e.emit(ind + 1, f"for _x in {v}:")
            _emit_write_primitive(e, ind + 2, "_x", item, flexible, False, f.name, version)
        else:
            sub = e.name(encoder(item, version, flexible), "enc")
            e.emit(ind + 1, f"for _x in {v}:")
            e.emit(ind + 2, f"{sub}(_x, w)")
        return
    if isinstance(t, Primitive):
        _emit_write_primitive(e, ind, src, t, flexible, nullable, f.name, version)
        return
    sub = e.name(encoder(t, version, flexible), "enc")
    if nullable:
        v = e.tmp()
        e.emit(ind, f"{v} = {src}")
        e.emit(ind, f"if {v} is None: w.buf += b'\\xff'")
        e.emit(ind, f"else: w.buf.append(1); {sub}({v}, w)")
    else:
        e.emit(ind, f"{sub}({src}, w)")


def _emit_write_primitive(
    e: _Emitter,
    ind: int,
    src: str,
    t: Primitive,
    flexible: bool,
    nullable: bool,
    name: str,
    version: int,
) -> None:
    kind = t.name
    if kind in _FIXED:
        st, _size = _FIXED[kind]
        e.emit(ind, f"w.buf += {st}.pack({src})")
    elif kind == "bool":
        e.emit(ind, f"w.buf.append(1 if {src} else 0)")
    elif kind == "uuid":
        e.emit(ind, f"w.buf += {src}.bytes")
    elif kind == "string":
        # p.write_[compact_]string inlined: one call less per field.
        v = e.tmp()
        e.emit(ind, f"{v} = {src}")
        _emit_write_null(e, ind, v, nullable, flexible, 2, name, version)
        e.emit(ind, "else:")
        d = e.tmp()
        e.emit(ind + 1, f"{d} = {v}.encode()")
        if flexible:
            _emit_write_uvarint(e, ind + 1, f"len({d}) + 1")
        else:
            e.emit(ind + 1, f"w.buf += p.INT16.pack(len({d}))")
        e.emit(ind + 1, f"w.buf += {d}")
    elif kind in ("bytes", "records"):
        v = e.tmp()
        e.emit(ind, f"{v} = {src}")
        _emit_write_null(e, ind, v, nullable or kind == "records", flexible, 4, name, version)
        if kind == "records":
            # A fetch read may span segments: a list of buffers is written back to back.
            e.emit(ind, f"elif {v}.__class__ is list:")
            e.emit(ind + 1, f"_n = sum(len(_c) for _c in {v})")
            if flexible:
                e.emit(ind + 1, "p.write_uvarint(w.buf, _n + 1)")
            else:
                e.emit(ind + 1, "w.buf += p.INT32.pack(_n)")
            e.emit(ind + 1, f"for _c in {v}: w.blob(_c)")
        e.emit(ind, "else:")
        if flexible:
            e.emit(ind + 1, f"p.write_uvarint(w.buf, len({v}) + 1)")
        else:
            e.emit(ind + 1, f"w.buf += p.INT32.pack(len({v}))")
        e.emit(ind + 1, f"w.blob({v})")
    else:  # pragma: no cover
        raise TypeError(f"unknown primitive {kind}")
