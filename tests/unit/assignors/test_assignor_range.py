from __future__ import annotations

from assignor_helpers import (
    FakeCluster,
    assert_valid,
    from_kafka_python,
    group_inputs,
    kafka_python_members,
    shuffled,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_python_compat import RangePartitionAssignor

from slipstream.client.assignors import RangeAssignor, Subscription, get_assignor

S = Subscription


def test_name_and_protocol() -> None:
    a = RangeAssignor()
    assert a.name == "range" and a.rebalance_protocol == "EAGER"
    assert a.subscription_user_data({"t"}, [("t", 0)], 3) is None
    assert isinstance(get_assignor("range"), RangeAssignor)
    assert isinstance(get_assignor("org.apache.kafka.clients.consumer.RangeAssignor"), RangeAssignor)


def test_javadoc_example() -> None:
    subs = {"C0": S(["t0", "t1"]), "C1": S(["t0", "t1"])}
    assert RangeAssignor().assign({"t0": 3, "t1": 3}, subs) == {
        "C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C1": [("t0", 2), ("t1", 2)],
    }


def test_static_members_order_by_instance_id() -> None:
    # RangeAssignor javadoc: after a rolling bounce the member ids change (C3, C2),
    # with group.instance.id the layout stays I0/I1.
    subs = {"C3": S(["t0", "t1"], group_instance_id="I0"), "C2": S(["t0", "t1"], group_instance_id="I1")}
    assert RangeAssignor().assign({"t0": 3, "t1": 3}, subs) == {
        "C3": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
        "C2": [("t0", 2), ("t1", 2)],
    }
    # static members come before dynamic ones whatever their ids
    subs = {"a": S(["t"]), "z": S(["t"], group_instance_id="zz")}
    assert RangeAssignor().assign({"t": 3}, subs) == {"z": [("t", 0), ("t", 1)], "a": [("t", 2)]}


def test_per_topic_subscribers_and_missing_topics() -> None:
    subs = {"A": S(["t0", "gone"]), "B": S(["t0", "t1"]), "C": S([]), "D": S(["empty"])}
    result = RangeAssignor().assign({"t0": 5, "t1": 2, "empty": 0, "unsubscribed": 4}, subs)
    assert result == {
        "A": [("t0", 0), ("t0", 1), ("t0", 2)],
        "B": [("t0", 3), ("t0", 4), ("t1", 0), ("t1", 1)],
        "C": [],
        "D": [],
    }


def test_more_members_than_partitions() -> None:
    subs = {m: S(["t"]) for m in ["m1", "m2", "m3", "m4"]}
    assert RangeAssignor().assign({"t": 2}, subs) == {
        "m1": [("t", 0)], "m2": [("t", 1)], "m3": [], "m4": [],
    }


def test_java_string_order_for_member_ids() -> None:
    # U+FF21 (BMP) sorts after U+1F600 in code points but before it in UTF-16 units
    # (a surrogate pair starts with 0xD83D < 0xFF21); Java orders by UTF-16 units.
    subs = {"\uff21": S(["t"]), "\U0001f600": S(["t"])}
    assert RangeAssignor().assign({"t": 2}, subs) == {"\U0001f600": [("t", 0)], "\uff21": [("t", 1)]}


def test_no_members() -> None:
    assert RangeAssignor().assign({"t": 3}, {}) == {}


@settings(max_examples=150, deadline=None)
@given(group_inputs(), st.integers(0, 2**32))
def test_matches_kafka_python_and_properties(inp: tuple[dict[str, int], dict[str, Subscription]], seed: int) -> None:
    counts, subs = inp
    ours = RangeAssignor().assign(counts, subs)
    assert_valid(counts, subs, ours)
    # per topic, subscribers' shares differ by at most one
    for topic, n in counts.items():
        shares = [sum(1 for t, _ in ours[m] if t == topic) for m, s in subs.items() if topic in s.topics]
        if shares and n:
            assert max(shares) - min(shares) <= 1
    theirs = from_kafka_python(
        RangePartitionAssignor.assign(FakeCluster(counts), kafka_python_members(subs))
    )
    assert ours == theirs
    c2, s2 = shuffled(counts, subs, seed)
    assert RangeAssignor().assign(c2, s2) == ours
