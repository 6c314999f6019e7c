"""Server-side assignors: examples and properties (validity, balance, stickiness, determinism)."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from consumer_helpers import pm, tid, topics
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.coordinator.consumer import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR_NAME,
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    RangeAssignor,
    TopicMetadata,
    UniformAssignor,
)
from slipstream.coordinator.consumer.assignors import GroupAssignment

Owners = dict[tuple[uuid.UUID, int], str]


def spec_of(
    topic_meta: dict[uuid.UUID, TopicMetadata],
    subscriptions: dict[str, set[str]],
    current: GroupAssignment | None = None,
    instance_ids: dict[str, str] | None = None,
) -> GroupSpec:
    current = current or {}
    instance_ids = instance_ids or {}
    members = {
        m: MemberSubscription(
            member_id=m,
            subscribed_topic_ids=frozenset(tid(t) for t in names),
            current_assignment=current.get(m, {}),
            instance_id=instance_ids.get(m),
        )
        for m, names in subscriptions.items()
    }
    return GroupSpec(members=members, topics=topic_meta)


def owners(assignment: GroupAssignment) -> Owners:
    out: Owners = {}
    for m, parts in assignment.items():
        for t, ps in parts.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} assigned twice"
                out[(t, p)] = m
    return out


def load(assignment: GroupAssignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in parts.values()) for m, parts in assignment.items()}


def assert_valid(spec: GroupSpec, assignment: GroupAssignment) -> None:
    assert set(assignment) == set(spec.members)
    own = owners(assignment)  # asserts no partition twice
    expected = {
        (t, p)
        for m in spec.members.values()
        for t in m.subscribed_topic_ids
        for p in range(spec.topics[t].partition_count)
    }
    assert set(own) == expected
    for (t, _p), m in own.items():
        assert t in spec.members[m].subscribed_topic_ids


# ----- strategies -----

TOPIC_NAMES = ["a", "b", "c", "d"]
MEMBER_IDS = [f"m{i}" for i in range(8)]

topic_counts = st.dictionaries(
    st.sampled_from(TOPIC_NAMES), st.integers(min_value=1, max_value=9), min_size=1, max_size=4
)


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[dict[uuid.UUID, TopicMetadata], dict[str, set[str]]]:
    counts = draw(topic_counts)
    names = sorted(counts)
    member_ids = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=6, unique=True))
    subset = st.sets(st.sampled_from(names), min_size=1)
    if homogeneous:
        shared = draw(subset)
        subs = {m: set(shared) for m in member_ids}
    else:
        subs = {m: draw(subset) for m in member_ids}
    return topics(**counts), subs


@st.composite
def arbitrary_current(draw: st.DrawFn, member_ids: list[str]) -> GroupAssignment:
    """Any previous assignment, even an invalid one (duplicates, gone partitions)."""
    return {
        m: pm(draw(st.dictionaries(st.sampled_from(TOPIC_NAMES), st.sets(st.integers(0, 11)), max_size=3)))  # type: ignore[misc]
        for m in member_ids
    }


# ----- uniform: examples -----


def test_default_assignor_is_uniform_and_registry_names_match() -> None:
    assert DEFAULT_ASSIGNOR_NAME == "uniform"
    assert {name: a.name for name, a in ASSIGNORS.items()} == {"uniform": "uniform", "range": "range"}


def test_uniform_spreads_partitions_evenly() -> None:
    spec = spec_of(topics(a=3, b=4), {"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}})
    result = UniformAssignor().assign(spec)
    assert_valid(spec, result)
    assert sorted(load(result).values()) == [2, 2, 3]


def test_uniform_keeps_current_owners_when_already_balanced() -> None:
    current = {"m1": pm({"a": [2, 3]}), "m2": pm({"a": [0, 1]})}
    spec = spec_of(topics(a=4), {"m1": {"a"}, "m2": {"a"}}, current)
    assert UniformAssignor().assign(spec) == current


def test_uniform_unknown_topic_is_an_assignor_error() -> None:
    spec = GroupSpec(
        members={"m1": MemberSubscription("m1", frozenset({tid("nope")}))},
        topics=topics(a=1),
    )
    with pytest.raises(PartitionAssignorError):
        UniformAssignor().assign(spec)


def test_uniform_empty_group_and_topicless_members() -> None:
    assert UniformAssignor().assign(spec_of(topics(a=2), {})) == {}
    spec = GroupSpec(members={"m1": MemberSubscription("m1", frozenset())}, topics=topics(a=2))
    assert UniformAssignor().assign(spec) == {"m1": {}}


def test_uniform_heterogeneous_balances_where_subscriptions_allow() -> None:
    # m1 alone on b (6 partitions); a (6 partitions) should go mostly to m2 and m3.
    spec = spec_of(topics(a=6, b=6), {"m1": {"a", "b"}, "m2": {"a"}, "m3": {"a"}})
    result = UniformAssignor().assign(spec)
    assert_valid(spec, result)
    assert load(result) == {"m1": 6, "m2": 3, "m3": 3}


# ----- uniform: properties -----


@settings(max_examples=150, deadline=None)
@given(data=st.data(), homogeneous=st.booleans())
def test_uniform_assigns_each_subscribed_partition_once_to_a_subscriber(
    data: st.DataObject, homogeneous: bool
) -> None:
    topic_meta, subs = data.draw(groups(homogeneous))
    current = data.draw(arbitrary_current(sorted(subs)))
    spec = spec_of(topic_meta, subs, current)
    result = UniformAssignor().assign(spec)
    assert_valid(spec, result)
    if homogeneous:
        loads = load(result).values()
        assert max(loads) - min(loads) <= 1


@settings(max_examples=100, deadline=None)
@given(data=st.data(), homogeneous=st.booleans(), assignor_name=st.sampled_from(["uniform", "range"]))
def test_assignors_are_deterministic_whatever_the_member_order(
    data: st.DataObject, homogeneous: bool, assignor_name: str
) -> None:
    topic_meta, subs = data.draw(groups(homogeneous))
    current = data.draw(arbitrary_current(sorted(subs)))
    assignor = ASSIGNORS[assignor_name]
    forward = spec_of(topic_meta, subs, current)
    backward = spec_of(topic_meta, dict(reversed(list(subs.items()))), current)
    first = assignor.assign(forward)
    assert assignor.assign(forward) == first
    assert assignor.assign(backward) == first


@settings(max_examples=100, deadline=None)
@given(data=st.data(), homogeneous=st.booleans())
def test_uniform_is_a_fixed_point_of_its_own_output(data: st.DataObject, homogeneous: bool) -> None:
    topic_meta, subs = data.draw(groups(homogeneous))
    first = UniformAssignor().assign(spec_of(topic_meta, subs))
    assert UniformAssignor().assign(spec_of(topic_meta, subs, first)) == first


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_uniform_heterogeneous_leaves_no_improving_move(data: st.DataObject) -> None:
    # For every topic, no subscriber holding one of its partitions has two or more
    # partitions more than another subscriber of that topic.
    topic_meta, subs = data.draw(groups(homogeneous=False))
    current = data.draw(arbitrary_current(sorted(subs)))
    spec = spec_of(topic_meta, subs, current)
    result = UniformAssignor().assign(spec)
    loads = load(result)
    for t in topic_meta:
        subscribers = [m for m in subs if t in spec.members[m].subscribed_topic_ids]
        holders = [m for m in subscribers if result[m].get(t)]
        if holders:
            assert max(loads[m] for m in holders) - min(loads[m] for m in subscribers) <= 1


def minimum_moves(counts: list[int], total: int, members: int) -> int:
    """Fewest partitions that must leave their owners for a balanced result."""
    quota, extra = divmod(total, members)
    ordered = sorted(counts, reverse=True)
    return sum(max(0, c - (quota + (1 if i < extra else 0))) for i, c in enumerate(ordered))


def moved(before: GroupAssignment, after: GroupAssignment) -> int:
    old, new = owners(before), owners(after)
    return sum(1 for tp, m in old.items() if new.get(tp) != m)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_uniform_homogeneous_join_and_leave_move_the_minimum(data: st.DataObject) -> None:
    topic_meta, subs = data.draw(groups(homogeneous=True))
    shared = next(iter(subs.values()))
    total = sum(topic_meta[tid(t)].partition_count for t in shared)
    before = UniformAssignor().assign(spec_of(topic_meta, subs))

    joiner = data.draw(st.sampled_from([m for m in MEMBER_IDS if m not in subs]))
    joined = UniformAssignor().assign(spec_of(topic_meta, {**subs, joiner: set(shared)}, before))
    expected = minimum_moves(list(load(before).values()), total, len(subs) + 1)
    assert moved(before, joined) == expected

    if len(subs) > 1:
        leaver = data.draw(st.sampled_from(sorted(subs)))
        rest = {m: s for m, s in subs.items() if m != leaver}
        left = UniformAssignor().assign(spec_of(topic_meta, rest, before))
        counts = [c for m, c in load(before).items() if m != leaver]
        expected = load(before)[leaver] + minimum_moves(counts, total, len(rest))
        assert moved(before, left) == expected


def test_uniform_heterogeneous_keeps_what_stays_subscribed_when_balanced() -> None:
    before = {"m1": pm({"a": [0, 1], "b": [0]}), "m2": pm({"a": [2, 3]}), "m3": pm({"b": [1, 2]})}
    subs = {"m1": {"a", "b"}, "m2": {"a"}, "m3": {"b"}}
    spec = spec_of(topics(a=4, b=3), subs, before)
    assert UniformAssignor().assign(spec) == before
    # m3 leaves: its b partitions go to m1, the only other b subscriber; nothing else moves.
    after = UniformAssignor().assign(spec_of(topics(a=4, b=3), {"m1": {"a", "b"}, "m2": {"a"}}, before))
    assert after["m1"][tid("b")] == frozenset({0, 1, 2})
    assert after["m1"][tid("a")] <= before["m1"][tid("a")]
    assert before["m2"][tid("a")] <= after["m2"][tid("a")]


# ----- range -----


def test_range_gives_contiguous_co_partitioned_ranges() -> None:
    spec = spec_of(topics(a=3, b=3), {"m0": {"a", "b"}, "m1": {"a", "b"}})
    assert RangeAssignor().assign(spec) == {
        "m0": pm({"a": [0, 1], "b": [0, 1]}),
        "m1": pm({"a": [2], "b": [2]}),
    }


def test_range_unknown_topic_is_an_assignor_error() -> None:
    spec = GroupSpec(
        members={"m1": MemberSubscription("m1", frozenset({tid("nope")}))},
        topics=topics(a=1),
    )
    with pytest.raises(PartitionAssignorError):
        RangeAssignor().assign(spec)


def test_range_heterogeneous_ranges_per_topic_subscribers() -> None:
    spec = spec_of(topics(a=4, b=2), {"m0": {"a"}, "m1": {"a", "b"}, "m2": {"b"}})
    assert RangeAssignor().assign(spec) == {
        "m0": pm({"a": [0, 1]}),
        "m1": pm({"a": [2, 3], "b": [0]}),
        "m2": pm({"b": [1]}),
    }


def test_range_static_members_keep_their_ranges_across_new_member_ids() -> None:
    subs = {"x": {"a"}, "y": {"a"}, "z": {"a"}}
    before = RangeAssignor().assign(spec_of(topics(a=7), subs, instance_ids={"x": "i2", "y": "i0", "z": "i1"}))
    # All three restart with new member ids, keeping their instance ids.
    renamed = {"q": {"a"}, "r": {"a"}, "s": {"a"}}
    after = RangeAssignor().assign(spec_of(topics(a=7), renamed, instance_ids={"q": "i2", "r": "i0", "s": "i1"}))
    assert (after["q"], after["r"], after["s"]) == (before["x"], before["y"], before["z"])
    assert before["y"] == pm({"a": [0, 1, 2]})  # i0 first


@settings(max_examples=150, deadline=None)
@given(data=st.data(), homogeneous=st.booleans())
def test_range_is_valid_and_balanced_per_topic(data: st.DataObject, homogeneous: bool) -> None:
    topic_meta, subs = data.draw(groups(homogeneous))
    spec = spec_of(topic_meta, subs)
    result = RangeAssignor().assign(spec)
    assert_valid(spec, result)
    for t in topic_meta:
        per_member = Counter({m: len(result[m].get(t, ())) for m in subs if t in spec.members[m].subscribed_topic_ids})
        if per_member:
            assert max(per_member.values()) - min(per_member.values()) <= 1
        for m in per_member:
            parts = sorted(result[m].get(t, ()))
            assert parts == list(range(parts[0], parts[0] + len(parts))) if parts else True


@settings(max_examples=100, deadline=None)
@given(subs_count=st.integers(1, 6), partitions=st.integers(1, 9))
def test_range_co_partitions_topics_with_equal_partition_counts(subs_count: int, partitions: int) -> None:
    subs = {f"m{i}": {"a", "b", "c"} for i in range(subs_count)}
    result = RangeAssignor().assign(spec_of(topics(a=partitions, b=partitions, c=partitions), subs))
    for m in subs:
        got = {t: result[m].get(tid(t), frozenset()) for t in ("a", "b", "c")}
        assert got["a"] == got["b"] == got["c"]
