"""schema.fast_frozen_init: the same construction as the dataclass-made __init__, only cheaper."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from slipstream.coordinator.offset_and_metadata import OffsetAndMetadata
from slipstream.coordinator.result import Completion, Pending, Record
from slipstream.protocol.api import RequestHeader
from slipstream.protocol.schema import fast_frozen_init


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default=(), compare=False)
    d: int = field(default=4, kw_only=True)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Fast:
    """Plain, declared again with the faster __init__."""

    a: int
    b: str = "b"
    c: tuple[int, ...] = field(default=(), compare=False)
    d: int = field(default=4, kw_only=True)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1, "x", (2,)), {"d": 9}), ((), {"a": 3, "c": (1,), "b": "y"})],
)
def test_same_fields_as_the_dataclass_init(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    slow = Plain(*args, **kwargs)
    fast = Fast(*args, **kwargs)
    assert dataclasses.astuple(fast) == dataclasses.astuple(slow)


def test_bad_calls_fail_like_the_dataclass_init() -> None:
    make: Any = Fast
    with pytest.raises(TypeError):
        make()
    with pytest.raises(TypeError):
        make(1, "x", (), 4)  # d is keyword-only
    with pytest.raises(TypeError):
        make(1, e=2)


def test_still_frozen_hashable_comparable_replaceable_and_picklable() -> None:
    om = OffsetAndMetadata(5, 1, "m", 100)
    assert om.expire_timestamp_ms == -1
    with pytest.raises(dataclasses.FrozenInstanceError):
        om.offset = 6
    assert om == OffsetAndMetadata(offset=5, leader_epoch=1, metadata="m", commit_timestamp_ms=100, expire_timestamp_ms=-1)
    assert hash(om) == hash(OffsetAndMetadata(5, 1, "m", 100))
    assert dataclasses.replace(om, offset=7).offset == 7
    assert pickle.loads(pickle.dumps(om)) == om
    header = RequestHeader(8, 9, 1, None)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (8, 9, 1, None)


def test_coordinator_types_keep_their_identity_rules() -> None:
    a, b = Pending(1, 8, 9), Pending(1, 8, 9)
    assert a != b and a == a  # compared by identity
    assert Completion(a, None) == Completion(a, None)
    # The replay shortcut is not part of a record's identity.
    assert Record(0, b"k", b"v", ("g", "t", 0, OffsetAndMetadata(1, -1, "", 0))) == Record(0, b"k", b"v")


def test_refuses_what_it_cannot_copy() -> None:
    @dataclass(frozen=True, slots=True)
    class Factory:
        items: list[int] = field(default_factory=list)

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (Factory, NotFrozen, NoSlots, PostInit):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)
