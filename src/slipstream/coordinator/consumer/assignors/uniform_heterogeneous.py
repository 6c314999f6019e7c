"""The ``uniform`` assignor for heterogeneous groups (members subscribe to different topics).

1. Each member keeps the partitions it holds that it still subscribes to.
2. Unassigned partitions go, topic by topic, to the least loaded subscriber; topics
   with the most partitions per subscriber first, as Kafka orders them.
3. Balance: while some topic has a subscriber holding one of its partitions with at
   least two partitions more (in total) than another subscriber of that topic, move
   that topic's highest partition across. Every move lowers the sum of squared loads,
   so this ends; a pass limit bounds it like Kafka's (16).
Balance within one is reached when subscriptions allow it, not guaranteed otherwise.
"""

from __future__ import annotations

import heapq

from ..partitions import TopicId
from .base import GroupAssignment, GroupSpec, retained_partitions

MAX_BALANCE_PASSES = 16


def assign_heterogeneous(spec: GroupSpec) -> GroupAssignment:
    member_ids = spec.sorted_member_ids()
    subscribers: dict[TopicId, list[str]] = {}
    for m in member_ids:
        for t in spec.members[m].subscribed_topic_ids:
            spec.partition_count(t)  # unknown topic -> PartitionAssignorError
            subscribers.setdefault(t, []).append(m)

    # owner[t][p] = member id; holdings[m][t] = set of partitions; load[m] = total count.
    owner: dict[TopicId, dict[int, str]] = {t: {} for t in subscribers}
    holdings: dict[str, dict[TopicId, set[int]]] = {m: {} for m in member_ids}
    load = dict.fromkeys(member_ids, 0)

    def give(t: TopicId, p: int, m: str) -> None:
        previous = owner[t].get(p)
        if previous is not None:
            holdings[previous][t].discard(p)
            load[previous] -= 1
        owner[t][p] = m
        holdings[m].setdefault(t, set()).add(p)
        load[m] += 1

    claimed: dict[TopicId, set[int]] = {}
    for m in member_ids:
        for t, p in retained_partitions(spec, spec.members[m], claimed):
            give(t, p, m)

    topics = sorted(
        subscribers,
        key=lambda t: (-spec.partition_count(t) / len(subscribers[t]), len(subscribers[t]), t),
    )
    for t in topics:
        unassigned = [p for p in range(spec.partition_count(t)) if p not in owner[t]]
        if not unassigned:
            continue
        heap = [(load[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        for p in unassigned:
            _, m = heapq.heappop(heap)
            give(t, p, m)
            heapq.heappush(heap, (load[m], m))

    for _ in range(MAX_BALANCE_PASSES):
        moved = False
        for t in topics:
            if len(subscribers[t]) < 2:
                continue
            while True:
                holders = [m for m in subscribers[t] if holdings[m].get(t)]
                if not holders:
                    break
                most = max(holders, key=lambda m: (load[m], m))
                least = min(subscribers[t], key=lambda m: (load[m], m))
                if load[most] - load[least] <= 1:
                    break
                give(t, max(holdings[most][t]), least)
                moved = True
        if not moved:
            break

    return {
        m: {t: frozenset(parts) for t, parts in holdings[m].items() if parts} for m in member_ids
    }
