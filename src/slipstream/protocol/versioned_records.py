"""What the internal topics' record formats share (``__consumer_offsets`` in
``group_records.py``, ``__transaction_state`` in ``txn_records.py``): every key and value
is an int16 version, then a Struct body encoded in that version.

Each format raises its own error class; these helpers take it as ``error``.
"""

from __future__ import annotations

from typing import TypeVar

from . import codec
from . import primitives as p
from .schema import Struct

S = TypeVar("S", bound=Struct)


def encode_versioned(version: int, body: Struct, flexible: bool) -> bytes:
    """The version, then ``body`` in that version."""
    return p.INT16.pack(version) + codec.encode(body, version, flexible).getvalue()


def version_of(data: bytes | memoryview, what: str, error: type[Exception]) -> int:
    if len(data) < 2:
        raise error(f"{what} shorter than its version")
    version: int = p.INT16.unpack_from(data, 0)[0]
    return version


def decode_body(
    cls: type[S],
    data: bytes | memoryview,
    version: int,
    flexible: bool,
    error: type[Exception],
    *,
    versions_named: bool = False,
) -> S:
    """The body after the version; a malformed one raises ``error`` naming the type
    (and the version, with ``versions_named``: types with several versions)."""
    try:
        body, _ = codec.decode_at(cls, memoryview(data), 2, version, flexible)
    except p.DecodeError as exc:
        what = f"{cls.__name__} v{version}" if versions_named else cls.__name__
        raise error(f"malformed {what}: {exc}") from exc
    assert isinstance(body, cls)
    return body


def check_write_version(cls: type[Struct], version: int, max_version: int) -> None:
    if not 0 <= version <= max_version:
        raise ValueError(f"{cls.__name__} version {version} is not in 0-{max_version}")


def decode_versioned_value(
    cls: type[S], data: bytes | memoryview, max_version: int, flexible_from: int, error: type[Exception]
) -> S:
    """A value of versions 0 to ``max_version`` (flexible from ``flexible_from``)."""
    version = version_of(data, cls.__name__, error)
    if not 0 <= version <= max_version:
        raise error(f"unknown {cls.__name__} version {version}")
    return decode_body(cls, data, version, version >= flexible_from, error, versions_named=True)
