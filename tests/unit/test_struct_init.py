"""Struct's compiled __init__ (made once a class has had COMPILE_INIT_AFTER instances)
behaves as the generic one."""

from __future__ import annotations

import pytest

from slipstream.protocol.primitives import ZERO_UUID
from slipstream.protocol.schema import COMPILE_INIT_AFTER, INT32, STRING, UUID, Array, Struct, field


class Inner(Struct):
    a: int = field(INT32, default=-1)


class Outer(Struct):
    n: int = field(INT32)
    name: str | None = field(STRING, nullable="0+", default=None)
    tags: list[int] = field(Array(INT32), default=[1, 2])
    items: list[Inner] = field(Array(Inner))
    inner: Inner = field(Inner)
    uid: object = field(UUID)


def test_start_up_messages_keep_the_generic_init() -> None:
    class Rare(Struct):
        x: int = field(INT32)

    for _ in range(COMPILE_INIT_AFTER - 1):
        Rare()
    assert Rare.__init__ is Struct.__init__
    Rare()
    assert Rare.__init__ is not Struct.__init__


def test_defaults_are_fresh_and_values_are_kept() -> None:
    for _ in range(COMPILE_INIT_AFTER):
        Outer()
    first, second = Outer(), Outer(n=5, name="x")
    assert Outer.__init__ is not Struct.__init__  # compiled by now
    assert (first.n, first.name, first.tags, first.items, first.uid) == (
        0,
        None,
        [1, 2],
        [],
        ZERO_UUID,
    )
    assert first.inner == Inner(a=-1)
    assert (second.n, second.name) == (5, "x")
    first.tags.append(3)
    first.items.append(Inner())
    first.inner.a = 7
    third = Outer()
    assert third.tags == [1, 2] and third.items == [] and third.inner.a == -1


def test_unknown_fields_are_refused_as_before() -> None:
    with pytest.raises(TypeError, match="Outer has no field"):
        Struct.__init__(Outer(), nope=1)  # the generic path
    for _ in range(COMPILE_INIT_AFTER):
        Outer()
    with pytest.raises(TypeError, match="Outer has no field"):
        Outer(n=1, nope=2)
    with pytest.raises(TypeError):
        Outer(1)  # type: ignore[call-arg]


def test_a_subclass_does_not_inherit_its_parents_compiled_init() -> None:
    class Base(Struct):
        x: int = field(INT32, default=4)

    for _ in range(COMPILE_INIT_AFTER):
        Base()
    assert Base.__init__ is not Struct.__init__

    class Derived(Base):
        y: int = field(INT32, default=9)

    d = Derived(y=2)
    assert d.y == 2
    assert not hasattr(d, "x")  # the generic rule: a class's own declarations only
