from __future__ import annotations

import pytest

from slipstream.client.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNORS,
    Assignor,
    Subscription,
    check_assignment,
    get_assignor,
)

S = Subscription


def test_registry_uses_protocol_names() -> None:
    assert sorted(ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin", "sticky"]
    for name in ASSIGNORS:
        a = get_assignor(name)
        assert isinstance(a, Assignor)
        assert a.name == name
        assert a.rebalance_protocol in a.supported_protocols
    assert all(n in ASSIGNORS for n in DEFAULT_ASSIGNORS)
    with pytest.raises(ValueError, match="unknown partition assignor 'nope'"):
        get_assignor("nope")


def test_usage_example() -> None:
    assignor = get_assignor("cooperative-sticky")
    subs = {
        "member-a": S(topics=["orders"], owned_partitions=[("orders", p) for p in range(12)], generation_id=4),
        "member-b": S(topics=["orders"]),
    }
    assignment = assignor.assign({"orders": 12}, subs)
    assert assignment == {"member-a": [("orders", p) for p in range(6)], "member-b": []}


def test_subscription_is_normalised_and_immutable() -> None:
    s = S(["t", "u"], user_data=bytearray(b"x"), owned_partitions=[["t", "1"]])
    assert s.topics == ("t", "u")
    assert s.owned_partitions == (("t", 1),)
    assert s.user_data == b"x" and isinstance(s.user_data, bytes)
    assert hash(s) == hash(S(("t", "u"), user_data=b"x", owned_partitions=[("t", 1)]))
    with pytest.raises(TypeError):
        S("topic")


def test_check_assignment_reports_problems() -> None:
    subs = {"a": S(["t"]), "b": S(["u"])}
    problems = check_assignment({"t": 2, "u": 1}, subs, {"a": [("t", 0), ("u", 0), ("t", 5)], "c": [("t", 0)]})
    text = "\n".join(problems)
    assert "members without an entry: ['b']" in text
    assert "unknown members: ['c']" in text
    assert "t-0 assigned to both a and c" in text
    assert "t-5 does not exist" in text
    assert "u-0 assigned to a, not subscribed to u" in text
    assert check_assignment({"t": 1}, {"a": S(["t"])}, {"a": [("t", 0)]}) == []
