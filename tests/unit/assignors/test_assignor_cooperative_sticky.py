from __future__ import annotations

import struct

from assignor_helpers import (
    Member,
    assert_balanced,
    assert_optimally_balanced,
    assert_valid,
    draw_subset,
    group_inputs,
    kept_count,
    max_keepable,
    same_topics,
    shuffled,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.client.assignors import (
    COOPERATIVE,
    EAGER,
    CooperativeStickyAssignor,
    MemberData,
    RangeAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    added_partitions,
    check_assignment,
    cooperative_violations,
    decode_cooperative_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    get_assignor,
    partitions_to_revoke_before_join,
    rejoin_after_assignment,
    revoked_partitions,
    select_rebalance_protocol,
)
from slipstream.client.assignors.cooperative_sticky import cooperative_member_data
from slipstream.client.assignors.sticky import sticky_assignment

S = Subscription
COOP = CooperativeStickyAssignor()


def tps(topic: str, *ps: int) -> list[TopicPartition]:
    return [(topic, p) for p in ps]


# ---- interface, user data, rebalance rules ------------------------------------------------


def test_name_and_protocols() -> None:
    assert COOP.name == "cooperative-sticky"
    assert COOP.rebalance_protocol == COOPERATIVE
    assert set(COOP.supported_protocols) == {EAGER, COOPERATIVE}
    assert isinstance(get_assignor("cooperative-sticky"), CooperativeStickyAssignor)
    assert select_rebalance_protocol([COOP]) == COOPERATIVE
    assert select_rebalance_protocol([COOP, RangeAssignor()]) == EAGER  # every assignor must agree
    assert select_rebalance_protocol([StickyAssignor()]) == EAGER


def test_user_data_is_the_generation() -> None:
    assert COOP.subscription_user_data({"t"}, [], -1) == b"\xff\xff\xff\xff"
    assert COOP.subscription_user_data({"t"}, tps("t", 1), 7) == struct.pack(">i", 7)
    assert encode_cooperative_user_data(300) == b"\x00\x00\x01\x2c"
    assert decode_cooperative_user_data(None) is None
    assert decode_cooperative_user_data(b"\x00\x00\x00\x09") == 9
    assert decode_cooperative_user_data(b"\x01") == -1  # unreadable: the default generation
    # librdkafka sends the sticky assignor's user data with cooperative-sticky too
    assert decode_cooperative_user_data(encode_sticky_user_data(tps("t", 1, 2), 12)) == 12


def test_member_data_prefers_the_subscription_generation() -> None:
    owned = tps("t", 0, 3)
    # subscription v2+: generation_id field
    assert cooperative_member_data(S(["t"], user_data=b"\x00\x00\x00\x01", owned_partitions=owned,
                                     generation_id=5)) == MemberData(tuple(owned), 5)
    # v1: generation from the user data
    assert cooperative_member_data(S(["t"], user_data=b"\x00\x00\x00\x04", owned_partitions=owned)) == \
        MemberData(tuple(owned), 4)
    assert cooperative_member_data(S(["t"])) == MemberData((), -1)


def test_rebalance_rules() -> None:
    owned = tps("t", 0, 1, 2)
    assigned = tps("t", 1, 2, 5)
    assert revoked_partitions(owned, assigned) == [("t", 0)]
    assert added_partitions(owned, assigned) == [("t", 5)]
    assert rejoin_after_assignment(COOPERATIVE, owned, assigned)
    assert not rejoin_after_assignment(COOPERATIVE, owned, [*owned, ("t", 9)])
    assert not rejoin_after_assignment(EAGER, owned, assigned)  # eager revoked all before joining
    assert partitions_to_revoke_before_join(EAGER, owned) == owned
    assert partitions_to_revoke_before_join(COOPERATIVE, owned) == []


# ---- known cases -----------------------------------------------------------------------


def test_new_member_waits_for_the_revocation() -> None:
    counts = {"t": 6}
    subs = {"A": S(["t"], owned_partitions=tps("t", 0, 1, 2, 3, 4, 5), generation_id=3), "B": S(["t"])}
    plan = COOP.plan(counts, subs)
    assert plan.assignment == {"A": tps("t", 0, 1, 2), "B": []}
    assert plan.pending == {("t", 3): "B", ("t", 4): "B", ("t", 5): "B"}
    assert plan.target == {"A": tps("t", 0, 1, 2), "B": tps("t", 3, 4, 5)}
    assert COOP.assign(counts, subs) == plan.assignment
    # A revokes 3-5 and rejoins; in the follow-up round B gets them
    assert rejoin_after_assignment(COOPERATIVE, subs["A"].owned_partitions, plan.assignment["A"])
    subs2 = {"A": S(["t"], owned_partitions=plan.assignment["A"], generation_id=4),
             "B": S(["t"], owned_partitions=[], generation_id=4)}
    plan2 = COOP.plan(counts, subs2)
    assert plan2.pending == {}
    assert plan2.assignment == plan.target


def test_partitions_of_a_departed_member_move_at_once() -> None:
    counts = {"t": 4}
    subs = {"A": S(["t"], owned_partitions=tps("t", 0, 1), generation_id=8),
            "C": S(["t"], owned_partitions=[], generation_id=-1)}
    # B (which owned t-2, t-3) left: nobody claims them, so they are handed out now
    assert COOP.assign(counts, subs) == {"A": tps("t", 0, 1), "C": tps("t", 2, 3)}


def test_unsubscribed_topic_is_revoked_and_reassigned_later() -> None:
    counts = {"t": 2, "u": 2}
    subs = {"A": S(["t"], owned_partitions=[*tps("t", 0), *tps("u", 0, 1)], generation_id=2),
            "B": S(["t", "u"], owned_partitions=tps("t", 1), generation_id=2)}
    plan = COOP.plan(counts, subs)
    # A dropped u: its u partitions go to B, and for balance B's t-1 goes to A;
    # both moves wait until the owners have revoked, so both rejoin
    assert plan.target == {"A": tps("t", 0, 1), "B": tps("u", 0, 1)}
    assert plan.assignment == {"A": tps("t", 0), "B": []}
    assert plan.pending == {("t", 1): "A", ("u", 0): "B", ("u", 1): "B"}
    assert not cooperative_violations(subs, plan.assignment)


def test_stale_claims_also_hold_a_partition_back() -> None:
    counts = {"t": 3}
    subs = {
        "A": S(["t"], owned_partitions=tps("t", 0, 1), generation_id=9),
        "Z": S(["t"], owned_partitions=tps("t", 1, 2), generation_id=7),  # zombie from generation 7
        "N": S(["t"], generation_id=-1),
    }
    plan = COOP.plan(counts, subs)
    # A keeps its claims (highest generation); the rest goes wherever balance puts
    # it, but nothing another member still claims is handed to someone else
    assert set(plan.target["A"]) == set(tps("t", 0, 1)) or len(plan.target["A"]) == 1
    assert not cooperative_violations(subs, plan.assignment)
    for tp, member in plan.pending.items():
        assert any(tp in s.owned_partitions for m, s in subs.items() if m != member)


def test_cooperative_violations_helper() -> None:
    subs = {"A": S(["t"], owned_partitions=tps("t", 0)), "B": S(["t"])}
    assert cooperative_violations(subs, {"A": [], "B": tps("t", 0)}) == {("t", 0): ("B", ["A"])}
    assert cooperative_violations(subs, {"A": tps("t", 0), "B": []}) == {}


# ---- properties -----------------------------------------------------------------------------


GENERATIONS = st.integers(1, 40)
GROWTH = st.sampled_from([0, 0, 0, 2])
FATES = st.sampled_from(["stay", "stay", "stay", "leave", "resubscribe"])
JOINERS = st.integers(0, 3)
CHURN_TOPICS = ("a", "b", "c")
CHURN_COUNTS = st.integers(1, 8)
CHURN_LENGTH = st.integers(3, 12)
CHURN_KINDS = st.sampled_from(["join", "join", "leave", "resubscribe", "grow"])


@st.composite
def cooperative_rounds(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, Member], int]:
    """A group that had a stable assignment at some generation and then changed:
    members left or joined, some resubscribed, topics grew."""
    counts, subs = draw(group_inputs())
    before = sticky_assignment(counts, subs, {})
    generation = draw(GENERATIONS)
    new_counts = {t: n + draw(GROWTH) for t, n in counts.items()}
    members: dict[str, Member] = {}
    for m, s in subs.items():
        fate = draw(FATES)
        if fate == "leave":
            continue
        topics = s.topics
        if fate == "resubscribe":
            topics = draw_subset(draw, sorted(counts))
        members[m] = Member(topics, list(before[m]), generation, s.group_instance_id)
    for i in range(draw(JOINERS)):
        topics = draw_subset(draw, sorted(counts), min_size=1)
        members[f"new{i}"] = Member(topics, [])
    if not members:
        members["solo"] = Member(tuple(sorted(counts)), [])
    return new_counts, members, generation


def run_round(
    counts: dict[str, int], members: dict[str, Member], generation: int
) -> tuple[bool, dict[str, list[TopicPartition]]]:
    """One cooperative rebalance: the leader assigns, every member applies its part.
    Checks the KIP-429 safety rule; returns (someone must rejoin, the plan's target)."""
    subs = {m: mem.subscription() for m, mem in members.items()}
    plan = COOP.plan(counts, subs)
    assert not check_assignment(counts, subs, plan.assignment)
    assert_valid(counts, subs, plan.target)
    assert_balanced(counts, subs, plan.target)
    assert_optimally_balanced(counts, subs, plan.target)
    assert not cooperative_violations(subs, plan.assignment)
    for m, assigned in plan.assignment.items():
        assert set(assigned) <= set(plan.target[m])
    withheld = {tp: m for m, ts in plan.target.items() for tp in ts if tp not in plan.assignment[m]}
    assert withheld == plan.pending

    owners_before = {tp: m for m, mem in members.items() for tp in mem.owned}
    rejoin = False
    for m, mem in members.items():
        assigned = plan.assignment[m]
        for tp in added_partitions(mem.owned, assigned):
            # never given a partition another member still holds
            assert owners_before.get(tp, m) == m, f"{tp} given to {m} while {owners_before[tp]} owns it"
        rejoin |= rejoin_after_assignment(COOPERATIVE, mem.owned, assigned)
        mem.owned = list(assigned)
        mem.generation = generation + 1
    if plan.pending:
        assert rejoin, "partitions withheld but nobody revokes anything"
    return rejoin, plan.target


@settings(max_examples=200, deadline=None)
@given(cooperative_rounds(), st.integers(0, 2**32))
def test_two_rounds_reach_the_target(inp: tuple[dict[str, int], dict[str, Member], int], seed: int) -> None:
    counts, members, generation = inp
    subs = {m: mem.subscription() for m, mem in members.items()}
    c2, s2 = shuffled(counts, subs, seed)
    first = COOP.plan(counts, subs)
    assert COOP.plan(c2, s2) == first  # deterministic

    owned_before = {m: list(mem.owned) for m, mem in members.items()}
    rejoin, target = run_round(counts, members, generation)
    if same_topics(counts, subs):
        # as sticky as balance allows: members leaving move nothing else, members
        # joining take only the surplus (and only that waits for a revocation)
        kept = kept_count(owned_before, first.assignment)
        assert kept == max_keepable(counts, subs, owned_before)
        owned_total = sum(len(v) for v in owned_before.values())
        assert len(first.pending) <= owned_total - kept
    if not rejoin:
        assert all(set(mem.owned) == set(target[m]) for m, mem in members.items())
        return
    rejoin2, _ = run_round(counts, members, generation + 1)
    # the follow-up round hands over everything that was withheld and revokes nothing
    assert not rejoin2
    subs = {m: mem.subscription() for m, mem in members.items()}
    settled = {m: sorted(mem.owned) for m, mem in members.items()}
    assert_valid(counts, subs, settled)
    assert_balanced(counts, subs, settled)
    assert_optimally_balanced(counts, subs, settled)


@st.composite
def churn(draw: st.DrawFn) -> tuple[dict[str, int], list[tuple[str, str, tuple[str, ...]]]]:
    counts = {t: draw(CHURN_COUNTS) for t in CHURN_TOPICS}
    events = []
    for i in range(draw(CHURN_LENGTH)):
        kind = draw(CHURN_KINDS)
        subs = draw_subset(draw, CHURN_TOPICS, min_size=1)
        events.append((kind, f"m{i}", subs))
    return counts, events


@settings(max_examples=60, deadline=None)
@given(churn(), st.randoms(use_true_random=False))
def test_churn_never_double_assigns(inp: tuple[dict[str, int], list[tuple[str, str, tuple[str, ...]]]],
                                    rnd: object) -> None:
    import random

    assert isinstance(rnd, random.Random)
    counts, events = inp
    members: dict[str, Member] = {}
    generation = 0
    for kind, name, topics in events:
        if kind == "join" or not members:
            members[name] = Member(topics, [])
        elif kind == "leave":
            members.pop(rnd.choice(sorted(members)))
        elif kind == "resubscribe":
            members[rnd.choice(sorted(members))].topics = topics
        else:
            t = rnd.choice(sorted(counts))
            counts[t] += 1
        for _ in range(3):  # a change settles within two rounds
            generation += 1
            rejoin, _ = run_round(counts, members, generation)
            if not rejoin:
                break
        else:
            raise AssertionError("cooperative rebalancing did not settle")
        # settled: everything assigned, balanced, and nothing moves on a further round
        subs = {m: mem.subscription() for m, mem in members.items()}
        settled = {m: sorted(mem.owned) for m, mem in members.items()}
        assert_valid(counts, subs, settled)
        assert_balanced(counts, subs, settled)
        assert_optimally_balanced(counts, subs, settled)
        generation += 1
        assert COOP.assign(counts, subs) == settled
