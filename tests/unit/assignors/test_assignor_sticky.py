from __future__ import annotations

import struct

from assignor_helpers import (
    FakeCluster,
    assert_balanced,
    assert_optimally_balanced,
    assert_valid,
    draw_subset,
    from_kafka_python,
    group_inputs,
    kafka_python_members,
    kept_count,
    max_keepable,
    same_topics,
    shuffled,
    sizes,
    sum_of_squares,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_python_compat import KTP, StickyAssignorUserData, StickyPartitionAssignor

from slipstream.client.assignors import (
    Assignment,
    MemberData,
    StickyAssignor,
    Subscription,
    TopicPartition,
    decode_sticky_user_data,
    encode_sticky_user_data,
    get_assignor,
)
from slipstream.client.assignors.sticky import sticky_assignment, sticky_member_data

S = Subscription
STICKY = StickyAssignor()


def prev(owned: list[TopicPartition], generation: int) -> bytes:
    return encode_sticky_user_data(owned, generation)


def rejoin(subs: dict[str, Subscription], assignment: Assignment, generation: int) -> dict[str, Subscription]:
    """The subscriptions eager sticky members send after receiving ``assignment``."""
    return {
        m: S(s.topics, user_data=STICKY.subscription_user_data(s.topics, assignment.get(m, []), generation),
             generation_id=generation, group_instance_id=s.group_instance_id)
        for m, s in subs.items()
    }


# ---- interface and user data ---------------------------------------------------------


def test_name_and_protocol() -> None:
    assert STICKY.name == "sticky" and STICKY.rebalance_protocol == "EAGER"
    assert isinstance(get_assignor("sticky"), StickyAssignor)
    # no user data before the first assignment, like the Java client
    assert STICKY.subscription_user_data({"t"}, [], -1) is None
    assert decode_sticky_user_data(STICKY.subscription_user_data({"t"}, [], 4) or b"") == MemberData((), 4)


def test_user_data_layout() -> None:
    # previous_assignment: [topic: STRING, partitions: [INT32]], generation: INT32
    data = encode_sticky_user_data([("t1", 2), ("t0", 1), ("t0", 0)], 5)
    expected = (
        struct.pack(">i", 2)
        + struct.pack(">h", 2) + b"t0" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 2) + b"t1" + struct.pack(">ii", 1, 2)
        + struct.pack(">i", 5)
    )
    assert data == expected
    assert decode_sticky_user_data(data) == MemberData((("t0", 0), ("t0", 1), ("t1", 2)), 5)


def test_user_data_v0_and_garbage() -> None:
    v1 = encode_sticky_user_data([("t", 3)], 9)
    assert decode_sticky_user_data(v1[:-4]) == MemberData((("t", 3),), -1)  # v0: no generation
    assert decode_sticky_user_data(v1 + b"extra") == MemberData((("t", 3),), 9)  # trailing bytes ignored
    for bad in [b"", b"\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01\x00\x05ab", v1[:7], b"\x7f" * 12]:
        assert decode_sticky_user_data(bad) is None
    # unreadable user data: the member is treated as owning nothing
    assert sticky_member_data(S(["t"], user_data=b"\x01\x02")) == MemberData((), -1)
    # no user data at all: fall back to owned_partitions/generation (librdkafka reads those)
    assert sticky_member_data(S(["t"], owned_partitions=[("t", 1)], generation_id=3)) == MemberData((("t", 1),), 3)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "topic.b", "c-1"]), st.integers(0, 1000)), unique=True),
    st.integers(-1, 2**31 - 1),
)
def test_user_data_interop_with_kafka_python(owned: list[TopicPartition], generation: int) -> None:
    # kafka-python's StickyAssignorUserData is the same schema; header=False is the
    # Java layout (kafka-python itself puts an INT16 version before it, see below)
    ours = encode_sticky_user_data(owned, generation)
    theirs = StickyAssignorUserData.decode(ours, version=1, header=False)
    assert sorted((t, p) for t, ps in theirs.previous_assignment for p in ps) == sorted(owned)
    assert theirs.generation == generation
    by_topic: dict[str, list[int]] = {}
    for t, p in owned:
        by_topic.setdefault(t, []).append(p)
    for header in (False, True):
        encoded = StickyAssignorUserData(list(by_topic.items()), generation).encode(header=header)
        decoded = decode_sticky_user_data(bytes(encoded))
        assert decoded is not None
        assert sorted(decoded.partitions) == sorted(owned) and decoded.generation == generation


def test_kafka_python_sticky_subscription_user_data_is_understood() -> None:
    # kafka-python 3.0 sends its sticky user data with an INT16 version header in
    # front of the Java layout (the Java leader cannot read it); we accept both
    sub = StickyPartitionAssignor._metadata(["t"], [KTP("t", 1), KTP("t", 4)], 5)
    raw = bytes(sub.user_data.encode())
    assert raw[:2] == b"\x00\x01"
    assert decode_sticky_user_data(raw) == MemberData((("t", 1), ("t", 4)), 5)


# ---- known examples ---------------------------------------------------------------------


def test_javadoc_example_1_member_leaves() -> None:
    counts = {t: 2 for t in ["t0", "t1", "t2", "t3"]}
    subs = {m: S(list(counts)) for m in ["C0", "C1", "C2"]}
    first = STICKY.assign(counts, subs)
    assert first == {  # what the Java javadoc shows (round robin like, when starting fresh)
        "C0": [("t0", 0), ("t1", 1), ("t3", 0)],
        "C1": [("t0", 1), ("t2", 0), ("t3", 1)],
        "C2": [("t1", 0), ("t2", 1)],
    }
    subs2 = rejoin(subs, first, 1)
    del subs2["C1"]
    second = STICKY.assign(counts, subs2)
    assert sizes(second) == [4, 4]
    for m in ["C0", "C2"]:
        assert set(first[m]) <= set(second[m])  # every previous assignment preserved


def test_javadoc_example_2_differing_subscriptions() -> None:
    counts = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": S(["t0"]), "C1": S(["t0", "t1"]), "C2": S(["t0", "t1", "t2"])}
    first = STICKY.assign(counts, subs)
    assert first == {
        "C0": [("t0", 0)],
        "C1": [("t1", 0), ("t1", 1)],
        "C2": [("t2", 0), ("t2", 1), ("t2", 2)],
    }
    subs2 = rejoin(subs, first, 1)
    del subs2["C0"]
    assert STICKY.assign(counts, subs2) == {  # preserves 5 partition assignments
        "C1": [("t0", 0), ("t1", 0), ("t1", 1)],
        "C2": [("t2", 0), ("t2", 1), ("t2", 2)],
    }


def test_new_member_takes_only_the_surplus() -> None:
    counts = {"t": 6}
    subs = {"A": S(["t"], user_data=prev([("t", i) for i in range(6)], 3)), "B": S(["t"])}
    result = STICKY.assign(counts, subs)
    assert result == {"A": [("t", 0), ("t", 1), ("t", 2)], "B": [("t", 3), ("t", 4), ("t", 5)]}


def test_highest_generation_wins_a_conflicting_claim() -> None:
    counts = {"t": 4}
    subs = {
        "A": S(["t"], user_data=prev([("t", 0), ("t", 1)], 7)),
        "B": S(["t"], user_data=prev([("t", 0), ("t", 2)], 6)),  # stale claim on t-0
        "C": S(["t"], user_data=prev([("t", 3)], 7)),
    }
    result = STICKY.assign(counts, subs)
    assert result["A"] == [("t", 0), ("t", 1)]
    assert ("t", 2) in result["B"]
    assert result["C"][0] == ("t", 3)


def test_same_generation_conflict_is_invalidated() -> None:
    counts = {"t": 2}
    subs = {
        "A": S(["t"], user_data=prev([("t", 0), ("t", 1)], 4)),
        "B": S(["t"], user_data=prev([("t", 0)], 4)),
    }
    # t-0 is claimed by both in generation 4: nobody keeps it on that basis;
    # A keeps t-1, and t-0 goes wherever balance puts it
    assert STICKY.assign(counts, subs) == {"A": [("t", 1)], "B": [("t", 0)]}
    subs = {
        "A": S(["t"], user_data=prev([("t", 0)], 4)),
        "B": S(["t"], user_data=prev([("t", 0)], 4)),
        "C": S(["t"], user_data=prev([("t", 1)], 4)),
    }
    result = STICKY.assign(counts, subs)
    assert result["C"] == [("t", 1)] and result["A"] == [("t", 0)] and result["B"] == []


def test_claims_on_unsubscribed_or_missing_partitions_are_ignored() -> None:
    counts = {"t": 2, "u": 2}
    subs = {
        "A": S(["t"], user_data=prev([("u", 0), ("u", 1), ("t", 7), ("gone", 0)], 2)),
        "B": S(["t", "u"]),
    }
    result = STICKY.assign(counts, subs)
    assert_valid(counts, subs, result)
    assert_balanced(counts, subs, result)
    assert_optimally_balanced(counts, subs, result)
    assert result == {"A": [("t", 0), ("t", 1)], "B": [("u", 0), ("u", 1)]}


def test_member_with_empty_subscription() -> None:
    # (the Java client treats an empty first subscription as "all equal" and then
    # hands topics to a member that does not subscribe to them; we do not)
    counts = {"t": 5}
    subs = {"A": S([]), "B": S(["t"], user_data=prev([("t", i) for i in range(5)], 1))}
    result = STICKY.assign(counts, subs)
    assert result == {"A": [], "B": [("t", i) for i in range(5)]}


def test_empty_group_and_no_partitions() -> None:
    assert STICKY.assign({"t": 3}, {}) == {}
    assert STICKY.assign({}, {"A": S(["t"]), "B": S([])}) == {"A": [], "B": []}


# ---- properties ---------------------------------------------------------------------------


GENERATIONS = st.integers(1, 50)
GROWTH = st.sampled_from([0, 0, 0, 1, 3])
FATES = st.sampled_from(["stay", "stay", "stay", "leave", "resubscribe"])
JOINERS = st.integers(0, 3)


@st.composite
def reassignments(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, Subscription], Assignment]:
    """A group that was assigned, then changed: members left/joined, subscriptions and
    partition counts changed. Returns the new input and the previous assignment."""
    counts, subs = draw(group_inputs())
    before = sticky_assignment(counts, subs, {})
    generation = draw(GENERATIONS)
    new_counts = {t: n + draw(GROWTH) for t, n in counts.items()}
    new_subs: dict[str, Subscription] = {}
    for m, s in subs.items():
        fate = draw(FATES)
        if fate == "leave":
            continue
        topics = s.topics
        if fate == "resubscribe":
            topics = draw_subset(draw, sorted(counts))
        new_subs[m] = S(topics, user_data=prev(before[m], generation), generation_id=generation)
    for i in range(draw(JOINERS)):
        topics = draw_subset(draw, sorted(counts), min_size=1)
        new_subs[f"new{i}"] = S(topics)
    if not new_subs:
        new_subs["solo"] = S(sorted(counts))
    return new_counts, new_subs, before


@settings(max_examples=200, deadline=None)
@given(group_inputs(), st.integers(0, 2**32))
def test_fresh_assignment(inp: tuple[dict[str, int], dict[str, Subscription]], seed: int) -> None:
    counts, subs = inp
    result = STICKY.assign(counts, subs)
    assert_valid(counts, subs, result)
    assert_balanced(counts, subs, result)
    assert_optimally_balanced(counts, subs, result)
    c2, s2 = shuffled(counts, subs, seed)
    assert STICKY.assign(c2, s2) == result
    # a stable group keeps its assignment
    assert STICKY.assign(counts, rejoin(subs, result, 1)) == result


@settings(max_examples=300, deadline=None)
@given(reassignments(), st.integers(0, 2**32))
def test_reassignment(inp: tuple[dict[str, int], dict[str, Subscription], Assignment], seed: int) -> None:
    counts, subs, before = inp
    result = STICKY.assign(counts, subs)
    assert_valid(counts, subs, result)
    assert_balanced(counts, subs, result)
    assert_optimally_balanced(counts, subs, result)
    c2, s2 = shuffled(counts, subs, seed)
    assert STICKY.assign(c2, s2) == result
    assert STICKY.assign(counts, rejoin(subs, result, 99)) == result
    if same_topics(counts, subs):
        # as sticky as balance allows: when members leave nothing else moves, when
        # members join only the surplus moves
        assert kept_count(before, result) == max_keepable(counts, subs, before)


@settings(max_examples=100, deadline=None)
@given(group_inputs(static=False))
def test_balance_like_kafka_python(inp: tuple[dict[str, int], dict[str, Subscription]]) -> None:
    counts, subs = inp
    if any(not s.topics for s in subs.values()):
        return  # kafka-python's sticky assignor fails on members without topics
    ours = STICKY.assign(counts, subs)
    members = kafka_python_members(
        {m: S(s.topics, user_data=b"") for m, s in subs.items()}
    )
    theirs = from_kafka_python(StickyPartitionAssignor().assign(FakeCluster(counts), members))
    assert_valid(counts, subs, theirs)
    assert_balanced(counts, subs, theirs)
    if same_topics(counts, subs):
        assert sizes(ours) == sizes(theirs)
    assert_balanced(counts, subs, ours)
    assert_optimally_balanced(counts, subs, ours)
    assert sum_of_squares(ours) <= sum_of_squares(theirs)  # at least as even
