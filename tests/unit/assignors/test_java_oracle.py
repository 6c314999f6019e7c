"""Slipstream's assignors against the Java client's own (kafka-clients, run in a JVM).

range and roundrobin must agree exactly. The sticky assignors only have to
agree on what the protocol needs: the user data each side writes is read
the same way by the other, with identical subscriptions the partition counts
per member and the number of partitions that stay put are the same, and a
cooperative group stays safe and settles whichever side leads each round.
Cases come from seeded generators, so every run checks the same inputs.
"""

from __future__ import annotations

import random

import pytest
from assignor_helpers import (
    Member,
    assert_balanced,
    assert_optimally_balanced,
    assert_valid,
    same_topics,
    sizes,
    sum_of_squares,
)
from assignor_java import JavaAssignors

from slipstream.client.assignors import (
    COOPERATIVE,
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    added_partitions,
    cooperative_violations,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    rejoin_after_assignment,
)
from slipstream.client.assignors.sticky import sticky_member_data

pytestmark = pytest.mark.java

S = Subscription


def random_group(
    rnd: random.Random, *, same: bool | None = None, static: bool = True, allow_empty: bool = True
) -> tuple[dict[str, int], dict[str, Subscription]]:
    topics = {f"t{i}": rnd.randint(0 if allow_empty else 1, 12) for i in range(rnd.randint(1, 5))}
    names = sorted(topics) + (["missing"] if allow_empty and rnd.random() < 0.3 else [])
    same = rnd.random() < 0.5 if same is None else same
    common = rnd.sample(names, rnd.randint(1, len(names)))
    subs: dict[str, Subscription] = {}
    for i in range(rnd.randint(1, 8)):
        member = f"consumer-{rnd.randint(0, 99)}-{i}"
        lo = 0 if allow_empty else 1
        chosen = common if same else rnd.sample(names, rnd.randint(lo, len(names)))
        instance = f"instance-{rnd.randint(0, 9)}{i}" if static and rnd.random() < 0.4 else None
        subs[member] = S(chosen, group_instance_id=instance)
    return topics, subs


def test_range_matches_java(java_assignors: JavaAssignors) -> None:
    rnd = random.Random(11)
    cases = [random_group(rnd) for _ in range(400)]
    java = java_assignors.assign_many([("range", c, s) for c, s in cases])
    for (counts, subs), theirs in zip(cases, java, strict=True):
        assert RangeAssignor().assign(counts, subs) == theirs, (counts, subs)


def test_roundrobin_matches_java(java_assignors: JavaAssignors) -> None:
    rnd = random.Random(12)
    cases = [random_group(rnd) for _ in range(400)]
    java = java_assignors.assign_many([("roundrobin", c, s) for c, s in cases])
    for (counts, subs), theirs in zip(cases, java, strict=True):
        assert RoundRobinAssignor().assign(counts, subs) == theirs, (counts, subs)


def test_javadoc_examples_agree(java_assignors: JavaAssignors) -> None:
    counts = {"t0": 3, "t1": 3}
    subs = {"C0": S(["t0", "t1"]), "C1": S(["t0", "t1"])}
    for name, ours in [("range", RangeAssignor()), ("roundrobin", RoundRobinAssignor()),
                       ("sticky", StickyAssignor()), ("cooperative-sticky", CooperativeStickyAssignor())]:
        assert ours.assign(counts, subs) == java_assignors.assign(name, counts, subs), name


# ---- user data ---------------------------------------------------------------------------


def test_sticky_user_data_both_ways(java_assignors: JavaAssignors) -> None:
    rnd = random.Random(13)
    assert java_assignors.user_data("sticky", [], -1) is None
    assert StickyAssignor().subscription_user_data(["t"], [], -1) is None
    for _ in range(30):
        owned = sorted({(rnd.choice(["a", "b.c", "d-e"]), rnd.randint(0, 50)) for _ in range(rnd.randint(0, 8))})
        generation = rnd.randint(-1, 10_000)
        theirs = java_assignors.user_data("sticky", owned, generation)
        assert theirs is not None
        decoded = decode_sticky_user_data(theirs)
        assert decoded is not None
        assert sorted(decoded.partitions) == owned and decoded.generation == generation
        ours = StickyAssignor().subscription_user_data(["a"], owned, generation)
        assert ours is not None
        partitions, gen = java_assignors.member_data("sticky", S(["a"], user_data=ours))
        assert sorted(partitions) == owned and gen == generation


def test_cooperative_user_data_both_ways(java_assignors: JavaAssignors) -> None:
    coop = CooperativeStickyAssignor()
    for generation in (-1, 0, 1, 77, 2**31 - 1):
        assert java_assignors.user_data("cooperative-sticky", [("t", 1)], generation) == \
            coop.subscription_user_data(["t"], [("t", 1)], generation) == encode_cooperative_user_data(generation)
    # a v1 subscription (no generation field): both read the generation from the user data
    sub = S(["t"], owned_partitions=[("t", 3)], user_data=encode_cooperative_user_data(12))
    assert java_assignors.member_data("cooperative-sticky", sub) == ([("t", 3)], 12)
    # v2+: the subscription's generation wins over the user data
    sub = S(["t"], owned_partitions=[("t", 3)], user_data=encode_cooperative_user_data(12), generation_id=14)
    assert java_assignors.member_data("cooperative-sticky", sub) == ([("t", 3)], 14)


# ---- sticky ---------------------------------------------------------------------------------


def eager_rejoin(
    rnd: random.Random, counts: dict[str, int], subs: dict[str, Subscription], before: Assignment
) -> dict[str, Subscription]:
    """Members leave and join; survivors send their previous assignment as a Java
    3.x eager sticky member does (user data plus the subscription's generation)."""
    generation = rnd.randint(1, 30)
    out: dict[str, Subscription] = {}
    for m, s in subs.items():
        if rnd.random() < 0.25:
            continue
        out[m] = S(s.topics, user_data=encode_sticky_user_data(before[m], generation), generation_id=generation)
    for i in range(rnd.randint(0, 3)):
        topics = next(iter(subs.values())).topics if same_topics(counts, subs) else \
            rnd.sample(sorted(counts), rnd.randint(1, len(counts)))
        out[f"joiner-{i}"] = S(topics)
    return out or {"solo": S(sorted(counts))}


def kept(subs: dict[str, Subscription], assignment: Assignment) -> int:
    previous = {tp: m for m, s in subs.items() for tp in sticky_member_data(s).partitions}
    return sum(1 for m, tps in assignment.items() for tp in tps if previous.get(tp) == m)


def test_sticky_agrees_with_java(java_assignors: JavaAssignors) -> None:
    # (no empty subscriptions: the Java assignor then treats the group as having
    # identical subscriptions and assigns topics to members not subscribed to them)
    rnd = random.Random(14)
    cases = []
    for _ in range(300):
        counts, subs = random_group(rnd, static=False, allow_empty=False)
        before = StickyAssignor().assign(counts, subs)
        cases.append((counts, eager_rejoin(rnd, counts, subs, before)))
    java = java_assignors.assign_many([("sticky", c, s) for c, s in cases])
    ours_kept = java_kept = 0
    for (counts, subs), theirs in zip(cases, java, strict=True):
        ours = StickyAssignor().assign(counts, subs)
        assert_valid(counts, subs, theirs)
        assert_balanced(counts, subs, theirs)
        assert_optimally_balanced(counts, subs, ours)
        if same_topics(counts, subs):
            assert sizes(ours) == sizes(theirs), (counts, subs)
            assert kept(subs, ours) == kept(subs, theirs), (counts, subs)
        else:
            assert sum_of_squares(ours) <= sum_of_squares(theirs)
            if sum_of_squares(ours) == sum_of_squares(theirs):
                ours_kept += kept(subs, ours)
                java_kept += kept(subs, theirs)
    assert ours_kept >= java_kept


def test_java_reads_our_sticky_user_data(java_assignors: JavaAssignors) -> None:
    # a Java leader honours the previous assignment our members send
    counts = {"t": 6}
    subs = {
        "a": S(["t"], user_data=encode_sticky_user_data([("t", 4), ("t", 5)], 3), generation_id=3),
        "b": S(["t"], user_data=encode_sticky_user_data([("t", 0), ("t", 1)], 3), generation_id=3),
        "c": S(["t"], user_data=encode_sticky_user_data([("t", 2), ("t", 3)], 3), generation_id=3),
    }
    expected = {"a": [("t", 4), ("t", 5)], "b": [("t", 0), ("t", 1)], "c": [("t", 2), ("t", 3)]}
    assert java_assignors.assign("sticky", counts, subs) == expected
    assert StickyAssignor().assign(counts, subs) == expected


# ---- cooperative-sticky ---------------------------------------------------------------------


def test_cooperative_round_agrees_with_java(java_assignors: JavaAssignors) -> None:
    rnd = random.Random(15)
    cases = []
    for _ in range(300):
        counts, subs = random_group(rnd, same=True, static=False, allow_empty=False)
        before = StickyAssignor().assign(counts, subs)
        generation = rnd.randint(1, 30)
        group = {m: S(s.topics, owned_partitions=before[m], generation_id=generation,
                      user_data=encode_cooperative_user_data(generation))
                 for m, s in subs.items() if rnd.random() < 0.8}
        for i in range(rnd.randint(0, 3)):
            group[f"joiner-{i}"] = S(next(iter(subs.values())).topics)
        cases.append((counts, group or {"solo": S(sorted(counts))}))
    java = java_assignors.assign_many([("cooperative-sticky", c, s) for c, s in cases])
    for (counts, subs), theirs in zip(cases, java, strict=True):
        ours = CooperativeStickyAssignor().assign(counts, subs)
        assert not cooperative_violations(subs, theirs)
        assert not cooperative_violations(subs, ours)
        # which members keep the extra partition of an uneven split is arbitrary (the
        # Java client walks a HashMap), so compare what is not: how much stays put
        # and how much must wait for a revocation
        owned = {m: S(s.topics, owned_partitions=s.owned_partitions) for m, s in subs.items()}
        assert kept(owned, ours) == kept(owned, theirs), (counts, subs)
        assert sum(sizes(ours)) == sum(sizes(theirs)), (counts, subs)


@pytest.mark.parametrize("seed", range(6))
def test_mixed_leaders_stay_safe_and_settle(java_assignors: JavaAssignors, seed: int) -> None:
    """A group of Slipstream and Java members: whoever leads a round, no partition is
    ever given to a member while another still owns it, and the group settles."""
    rnd = random.Random(100 + seed)
    same = seed % 2 == 0
    topics = {"a": rnd.randint(1, 10), "b": rnd.randint(1, 10), "c": rnd.randint(1, 10)}
    members: dict[str, Member] = {}
    generation = 0
    coop = CooperativeStickyAssignor()
    for step in range(12):
        event = rnd.choice(["join", "join", "leave", "grow"] + ([] if same else ["resubscribe"]))
        subs_for = tuple(sorted(topics)) if same else tuple(rnd.sample(sorted(topics), rnd.randint(1, 3)))
        if event == "join" or not members:
            members[f"m{step}"] = Member(subs_for, [])
        elif event == "leave":
            members.pop(rnd.choice(sorted(members)))
        elif event == "resubscribe":
            members[rnd.choice(sorted(members))].topics = subs_for
        else:
            topics[rnd.choice(sorted(topics))] += 1
        for _ in range(5):
            generation += 1
            subs = {m: mem.subscription() for m, mem in members.items()}
            leader_is_java = rnd.random() < 0.5
            assignment = (java_assignors.assign("cooperative-sticky", topics, subs) if leader_is_java
                          else coop.assign(topics, subs))
            assignment = {m: assignment.get(m, []) for m in members}
            assert_valid(topics, subs, assignment, complete=False)
            assert not cooperative_violations(subs, assignment), (leader_is_java, subs, assignment)
            owners = {tp: m for m, mem in members.items() for tp in mem.owned}
            rejoin = False
            for m, mem in members.items():
                for tp in added_partitions(mem.owned, assignment[m]):
                    assert owners.get(tp, m) == m
                rejoin |= rejoin_after_assignment(COOPERATIVE, mem.owned, assignment[m])
                mem.owned = list(assignment[m])
                mem.generation = generation
            if not rejoin:
                break
        else:
            raise AssertionError("the group did not settle")
        settled: dict[str, list[TopicPartition]] = {m: sorted(mem.owned) for m, mem in members.items()}
        subs = {m: mem.subscription() for m, mem in members.items()}
        assert_valid(topics, subs, settled)
        assert_balanced(topics, subs, settled)
