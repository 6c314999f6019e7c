"""Shared strategies, invariants and simulations for the assignor tests."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st

from slipstream.client.assignors import (
    Assignment,
    Subscription,
    TopicPartition,
    check_assignment,
)
from slipstream.client.assignors.types import subscribed_partition_counts

NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

# ---- strategies ----------------------------------------------------------------------
# (strategies are built once at module level: building them inside composite
# strategies on every draw dominates the run time)

TOPIC_NAMES = (*(f"t{i}" for i in range(8)), "orders", "a.b", "x_y-z", "T0")
topic_lists = st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, max_size=5, unique=True)
member_names = st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=6)
member_lists = st.lists(member_names, min_size=1, max_size=8, unique=True)
partition_counts = st.integers(0, 12)
masks = st.integers(0, 2**12 - 1)
maybe_instance = st.one_of(st.none(), member_names)


def draw_subset(draw: st.DrawFn, items: Sequence[str], *, min_size: int = 0) -> tuple[str, ...]:
    """A subset of ``items`` (in their order), at least ``min_size`` long if possible."""
    mask = draw(masks)
    chosen = [x for i, x in enumerate(items) if mask >> i & 1]
    if len(chosen) < min_size and items:
        chosen = [items[mask % len(items)]]
    return tuple(chosen)


@st.composite
def group_inputs(
    draw: st.DrawFn, *, same_topics: bool | None = None, static: bool = True
) -> tuple[dict[str, int], dict[str, Subscription]]:
    """partitions_per_topic and fresh subscriptions (no previous assignment)."""
    topics = draw(topic_lists)
    counts = {t: draw(partition_counts) for t in topics}
    # maybe a subscribed topic without metadata
    topics_sub = [*topics, "missing"] if draw(st.booleans()) else topics
    members = draw(member_lists)
    same = draw(st.booleans()) if same_topics is None else same_topics
    common = draw_subset(draw, topics_sub, min_size=1)
    subs: dict[str, Subscription] = {}
    instances: set[str] = set()
    for m in members:
        chosen = common if same else draw_subset(draw, topics_sub)
        instance = draw(maybe_instance) if static else None
        if instance in instances:  # group.instance.id is unique within a group
            instance = None
        if instance is not None:
            instances.add(instance)
        subs[m] = Subscription(topics=chosen, group_instance_id=instance)
    return counts, subs


# ---- invariants ----------------------------------------------------------------------


def all_partitions(counts: Mapping[str, int], subs: Mapping[str, Subscription]) -> set[TopicPartition]:
    live = subscribed_partition_counts(counts, subs)
    return {(t, p) for t, n in live.items() for p in range(n)}


def assert_valid(
    counts: Mapping[str, int],
    subs: Mapping[str, Subscription],
    assignment: Assignment,
    *,
    complete: bool = True,
) -> None:
    problems = check_assignment(counts, subs, assignment)
    assert not problems, problems
    for tps in assignment.values():
        assert tps == sorted(tps)
    if complete:
        got = {tp for tps in assignment.values() for tp in tps}
        missing = all_partitions(counts, subs) - got
        assert not missing, f"unassigned: {sorted(missing)}"


def sizes(assignment: Assignment) -> list[int]:
    return sorted(len(v) for v in assignment.values())


def same_topics(counts: Mapping[str, int], subs: Mapping[str, Subscription]) -> bool:
    live = subscribed_partition_counts(counts, subs)
    return len({frozenset(t for t in s.topics if t in live) for s in subs.values()}) <= 1


def assert_balanced(
    counts: Mapping[str, int], subs: Mapping[str, Subscription], assignment: Assignment
) -> None:
    """Kafka's sticky balance: identical subscriptions -> max - min <= 1; otherwise no
    member could take a partition from one holding two or more partitions more."""
    if not assignment:
        return
    n = {m: len(v) for m, v in assignment.items()}
    if same_topics(counts, subs):
        assert max(n.values()) - min(n.values()) <= 1, n
        return
    for holder, tps in assignment.items():
        for topic, p in tps:
            for other, sub in subs.items():
                if topic in sub.topics and n[holder] > n[other] + 1:
                    raise AssertionError(
                        f"{topic}-{p} on {holder} ({n[holder]}) could move to {other} ({n[other]})"
                    )


def assert_optimally_balanced(
    counts: Mapping[str, int], subs: Mapping[str, Subscription], assignment: Assignment
) -> None:
    """Stronger than Kafka's criterion: no chain of members (each passing one
    partition to the next, which subscribes to its topic) leads from a member
    to one holding two or more partitions fewer. Then the sizes are as even as
    the subscriptions allow (they minimise the sum of squares)."""
    live = subscribed_partition_counts(counts, subs)
    size = {m: len(v) for m, v in assignment.items()}
    subscribers: dict[str, list[str]] = {}
    for m, s in subs.items():
        for t in set(s.topics):
            if t in live:
                subscribers.setdefault(t, []).append(m)
    for start in assignment:
        seen = {start}
        frontier = [start]
        while frontier:
            nxt = []
            for x in frontier:
                for t in {t for t, _ in assignment[x]}:
                    for y in subscribers.get(t, ()):
                        if y not in seen:
                            seen.add(y)
                            nxt.append(y)
            frontier = nxt
        for y in seen:
            assert size[start] <= size[y] + 1, (
                f"{start} ({size[start]}) could pass a partition along to {y} ({size[y]})"
            )


def sum_of_squares(assignment: Assignment) -> int:
    return sum(len(v) ** 2 for v in assignment.values())


def max_keepable(
    counts: Mapping[str, int],
    subs: Mapping[str, Subscription],
    before: Mapping[str, Sequence[TopicPartition]],
) -> int:
    """With identical subscriptions: the most previously owned partitions any balanced
    assignment can leave in place (owners keep min_quota, extras go to those holding more)."""
    live = subscribed_partition_counts(counts, subs)
    total = sum(live.values())
    n = len(subs)
    min_q, extra = divmod(total, n)
    max_q = min_q + (1 if extra else 0)
    owned = [
        sum(1 for t, p in before.get(m, []) if t in s.topics and p < live.get(t, 0))
        for m, s in subs.items()
    ]
    kept = sum(min(o, min_q) for o in owned)
    if max_q > min_q:
        kept += min(extra, sum(1 for o in owned if o >= max_q))
    return kept


def kept_count(before: Mapping[str, Sequence[TopicPartition]], after: Assignment) -> int:
    old = owner_map(before)
    return sum(1 for m, tps in after.items() for tp in tps if old.get(tp) == m)


def owner_map(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[TopicPartition, str]:
    return {tp: m for m, tps in assignment.items() for tp in tps}


def shuffled(
    counts: Mapping[str, int], subs: Mapping[str, Subscription], seed: int
) -> tuple[dict[str, int], dict[str, Subscription]]:
    """The same input with every dict and list in another order."""
    rnd = random.Random(seed)
    topics = list(counts)
    rnd.shuffle(topics)
    members = list(subs)
    rnd.shuffle(members)
    out: dict[str, Subscription] = {}
    for m in members:
        s = subs[m]
        ts = list(s.topics)
        rnd.shuffle(ts)
        owned = list(s.owned_partitions)
        rnd.shuffle(owned)
        out[m] = Subscription(
            topics=ts,
            user_data=s.user_data,
            owned_partitions=owned,
            generation_id=s.generation_id,
            rack_id=s.rack_id,
            group_instance_id=s.group_instance_id,
        )
    return {t: counts[t] for t in topics}, out


# ---- kafka-python adapters -------------------------------------------------------------


class FakeCluster:
    """The ClusterMetadata methods kafka-python's assignors use."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self._counts = dict(counts)

    def topics(self) -> set[str]:
        return {t for t, n in self._counts.items() if n}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._counts.get(topic)
        if not n:
            return None
        return set(range(n))


def kafka_python_members(subs: Mapping[str, Subscription]) -> list[Any]:
    """JoinGroupResponse-like members, static members first (kafka-python groups
    static/dynamic with an unsorted itertools.groupby, so they must be contiguous)."""
    order = sorted(subs, key=lambda m: subs[m].group_instance_id is None)
    return [
        SimpleNamespace(
            member_id=m,
            group_instance_id=subs[m].group_instance_id,
            metadata=SimpleNamespace(topics=list(subs[m].topics), user_data=subs[m].user_data),
        )
        for m in order
    ]


def from_kafka_python(result: Mapping[str, Any]) -> Assignment:
    return {
        m: sorted((t, p) for t, ps in a.assigned_partitions for p in ps) for m, a in result.items()
    }


# ---- cooperative simulation -----------------------------------------------------------


@dataclass
class Member:
    topics: tuple[str, ...]
    owned: list[TopicPartition]
    generation: int = -1
    instance: str | None = None

    def subscription(self) -> Subscription:
        return Subscription(
            topics=self.topics,
            owned_partitions=self.owned,
            generation_id=self.generation,
            group_instance_id=self.instance,
        )
