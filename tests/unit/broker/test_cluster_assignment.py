"""The cluster's pure decisions on a manual clock: who is live, who should lead what,
what a broker claims and hands over, and what the view answers for a partition."""

from __future__ import annotations

from collections import Counter

from slipstream.broker.cluster.assignment import (
    BrokerRow,
    Lease,
    ListenerEndpoint,
    balanced_leaders,
    current_leader,
    desired_leader,
    live_brokers,
    plan,
)
from slipstream.broker.cluster.view import ClusterView
from slipstream.protocol.errors import ErrorCode

SESSION = 6_000


def rows(now: int, **ages: int) -> list[BrokerRow]:
    return [BrokerRow(int(name[1:]), "h", 9000 + int(name[1:]), now - age) for name, age in ages.items()]


def test_a_broker_is_live_while_its_heartbeat_is_within_the_session() -> None:
    now = 100_000
    live = live_brokers(rows(now, n3=0, n1=SESSION - 1, n2=SESSION), now, SESSION)
    assert [b.node_id for b in live] == [1, 3]


def test_each_topics_partitions_spread_evenly_over_the_live_brokers() -> None:
    for topic in ("orders", "__consumer_offsets", "t"):
        counts = Counter(desired_leader(topic, p, [1, 2, 3]) for p in range(30))
        assert counts == {1: 10, 2: 10, 3: 10}
    assert desired_leader("t", 0, []) is None


def test_the_balanced_spread_gives_each_broker_its_share_and_moves_only_what_it_must() -> None:
    parts = list(range(10))
    fresh = balanced_leaders("t", parts, [1, 2, 3], {})
    assert sorted(Counter(fresh.values()).values()) == [3, 3, 4]
    assert balanced_leaders("t", parts, [3, 1, 2], {}) == fresh  # the same on every broker
    # Broker 2 dies: only its partitions move, evenly enough.
    survivors = balanced_leaders("t", parts, [1, 3], {p: o for p, o in fresh.items() if o != 2})
    assert all(survivors[p] == o for p, o in fresh.items() if o != 2)
    assert sorted(Counter(survivors.values()).values()) == [5, 5]
    # Broker 2 comes back: it gets its share, taken from the others; the rest stay put.
    back = balanced_leaders("t", parts, [1, 2, 3], survivors)
    assert sorted(Counter(back.values()).values()) == [3, 3, 4]
    moved = [p for p in parts if back[p] != survivors[p]]
    assert all(back[p] == 2 for p in moved) and len(moved) == Counter(back.values())[2]
    assert balanced_leaders("t", parts, [], {}) == {}


def test_a_dead_brokers_partitions_go_to_the_survivors_once_its_lease_expires() -> None:
    partitions = [("t", p) for p in range(6)]
    now = 50_000
    owner = {tp: desired_leader(*tp, [1, 2, 3]) for tp in partitions}
    leases = {tp: Lease(o, 1, now + 1_000) for tp, o in owner.items() if o is not None}
    orphaned = {tp for tp, o in owner.items() if o == 3}
    assert orphaned
    # Broker 3 died: 1 and 2 see only each other, but its leases still run.
    claimed = set()
    for me in (1, 2):
        held = {tp: 1 for tp, o in owner.items() if o == me}
        claimed |= set(plan(me, partitions, [1, 2], leases, held, now).claim)
    assert claimed == set()
    later = now + 1_000  # 3's leases expired; 1 and 2 renewed theirs
    leases = {tp: (lease if lease.owner == 3 else Lease(lease.owner, 1, later + SESSION)) for tp, lease in leases.items()}
    claimed = set()
    for me in (1, 2):
        held = {tp: 1 for tp, o in owner.items() if o == me}
        decided = plan(me, partitions, [1, 2], leases, held, later)
        claimed |= set(decided.claim)
    assert claimed == orphaned


def test_a_live_leader_hands_over_to_a_joining_broker_and_only_then_is_it_claimed() -> None:
    partitions = [("t", p) for p in range(8)]
    now = 10_000
    leases = {tp: Lease(1, 4, now + SESSION) for tp in partitions}
    held = {tp: 4 for tp in partitions}
    # Broker 2 joins: it may not take a partition from under live broker 1...
    assert plan(2, partitions, [1, 2], leases, {}, now).claim == []
    # ...which releases those now desired for 2 (and keeps the rest).
    released = plan(1, partitions, [1, 2], leases, held, now).release
    assert len(released) == 4  # half of them: the even split
    handed = {tp: (Lease(1, 4, 0) if tp in released else lease) for tp, lease in leases.items()}
    assert set(plan(2, partitions, [1, 2], handed, {}, now).claim) == set(released)


def test_a_restarted_broker_claims_back_its_own_unexpired_leases() -> None:
    leases = {("t", 0): Lease(1, 7, 99_999)}
    assert plan(1, [("t", 0)], [1], leases, {}, 10).claim == [("t", 0)]
    assert plan(2, [("t", 0)], [2], leases, {}, 10).claim == []


def test_the_view_names_a_live_unexpired_leader_only() -> None:
    view = ClusterView(node_id=1, now_ms=1_000)
    view.live = [BrokerRow(1, "a", 1, 1_000), BrokerRow(2, "b", 2, 1_000)]
    view.leases = {
        ("t", 0): Lease(2, 3, 2_000),
        ("t", 1): Lease(2, 3, 999),  # expired
        ("t", 2): Lease(5, 1, 9_000),  # owner not live
        ("t", 3): Lease(1, 2, 9_000),  # ours in the rows but not loaded here yet
    }
    view.held = {("t", 4): 6}
    assert view.leader("t", 0) == (2, 3)
    assert view.leader("t", 1) is None
    assert view.leader("t", 2) is None
    assert view.leader("t", 3) is None
    assert view.leader("t", 4) == (1, 6)
    assert view.leads("t", 4) and not view.leads("t", 0)
    assert current_leader(None, [1], 0) is None


def test_the_view_names_each_broker_by_the_endpoint_of_the_asked_listener() -> None:
    view = ClusterView(node_id=1, now_ms=1_000)
    both = (ListenerEndpoint("PLAINTEXT", "a", 9092), ListenerEndpoint("INTERNAL", "a-int", 19092))
    view.live = [
        BrokerRow(1, "a", 9092, 1_000, both),
        BrokerRow(2, "b", 9092, 1_000, (ListenerEndpoint("PLAINTEXT", "b", 9092), ListenerEndpoint("INTERNAL", "b-int", 19093))),
        BrokerRow(3, "c", 9094, 1_000, (ListenerEndpoint("PLAINTEXT", "c", 9094),)),
        BrokerRow(4, "d", 9095, 1_000),  # registered before listeners were: on every one
    ]
    assert view.others_on("INTERNAL") == [(2, "b-int", 19093), (4, "d", 9095)]
    assert view.others_on("PLAINTEXT") == [(2, "b", 9092), (3, "c", 9094), (4, "d", 9095)]
    assert view.endpoint(3, "INTERNAL") is None
    assert view.endpoint(2, "INTERNAL") == ("b-int", 19093)
    assert view.endpoint(5, "PLAINTEXT") is None  # not live


def test_a_partition_led_by_a_broker_without_the_listener_has_no_leader_for_its_clients() -> None:
    view = ClusterView(node_id=1, now_ms=1_000)
    view.live = [
        BrokerRow(1, "a", 9092, 1_000, (ListenerEndpoint("PLAINTEXT", "a", 9092), ListenerEndpoint("INTERNAL", "a", 19092))),
        BrokerRow(3, "c", 9094, 1_000, (ListenerEndpoint("PLAINTEXT", "c", 9094),)),
    ]
    view.leases = {("t", 0): Lease(3, 4, 9_000), ("t", 1): Lease(3, 4, 999)}
    view.held = {("t", 2): 5}
    assert view.told_leader("t", 0, "PLAINTEXT") == (0, 3, 4)
    assert view.told_leader("t", 0, "INTERNAL") == (ErrorCode.LISTENER_NOT_FOUND, -1, 4)
    assert view.told_leader("t", 1, "INTERNAL") == (ErrorCode.LEADER_NOT_AVAILABLE, -1, -1)  # expired
    assert view.told_leader("t", 2, "INTERNAL") == (0, 1, 5)  # this broker: reached where asked
