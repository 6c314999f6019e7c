"""The "sticky" assignor (KIP-54, Kafka's ``StickyAssignor``) and the sticky core it
shares with "cooperative-sticky".

Goals, in order:

1. Balance. With identical subscriptions the partition counts differ by at
   most one. With differing subscriptions the result is at least "as
   balanced as possible" in Kafka's sense (no member holds a partition that
   another member subscribed to its topic could take while having at least
   two fewer partitions), and in fact stronger: no chain of members could
   pass partitions along from one member to another with two or more fewer,
   so the counts are as even as the subscriptions allow.
2. Stickiness. Each member keeps the partitions it owned before as far as
   balance allows. With identical subscriptions this is exact: when members
   join only the surplus moves, when members leave only their partitions
   move. With differing subscriptions partitions nobody owned are used to
   balance first, owned ones move only when needed, and moves that a cycle of
   exchanges can undo are undone.

Identical subscriptions use Kafka's quota algorithm (each member keeps up to
floor or ceil of partitions/members, the lowest partition numbers first, the
rest is dealt round robin); differing ones keep all valid claims, give each
unowned partition to the least loaded subscriber (topics with the fewest
subscribers first) and then rebalance.

Ownership claims come from each member's previous assignment plus the
generation it was received in. Conflicting claims (a zombie member, a lost
SyncGroup) are resolved as in Kafka: the claim with the highest generation
wins; equal highest generations invalidate the partition for every claimant.
The losing claim with the next highest generation is remembered as the
partition's previous owner and preferred when the partition has to move.

Eager "sticky" members carry the previous assignment in the subscription's
user data, in Kafka's ``StickyAssignorUserData`` v1 layout (encoded
identically by the Java client and librdkafka)::

    previous_assignment: ARRAY(topic: STRING, partitions: ARRAY(INT32))
    generation:          INT32            (absent in v0)

When a member sends no user data, its ``owned_partitions`` and
``generation_id`` (subscription v1/v2) are used instead; the Java client
would treat it as owning nothing, librdkafka always reads the owned
partitions, so this keeps stickiness with either kind of member.

The computation is deterministic: it depends only on the values given, never
on dict or list order. Member ids are ordered like Java strings. Rack-aware
placement (KIP-881) needs replica racks, which this interface does not carry;
without them Kafka does not use it either.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .types import (
    DEFAULT_GENERATION,
    EAGER,
    Assignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    java_string_key,
    subscribed_partition_counts,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True)
class MemberData:
    """What the leader knows about a member's previous assignment."""

    partitions: tuple[TopicPartition, ...] = ()
    generation: int = DEFAULT_GENERATION


# ---- StickyAssignorUserData ---------------------------------------------------------


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """Kafka's StickyAssignorUserData v1: previous assignment grouped by topic, then generation."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic in sorted(by_topic):
        name = topic.encode("utf-8")
        if len(name) > 0x7FFF:
            raise ValueError(f"topic name too long: {topic[:40]}...")
        out += _I16.pack(len(name)) + name
        ps = sorted(set(by_topic[topic]))
        out += _I32.pack(len(ps))
        for p in ps:
            out += _I32.pack(p)
    out += _I32.pack(generation)
    return bytes(out)


class _Truncated(ValueError):
    pass


def _parse_previous_assignment(data: bytes) -> tuple[list[TopicPartition], int]:
    """(partitions, offset after the array); raises ValueError on malformed input."""
    off = 0

    def i32() -> int:
        nonlocal off
        if off + 4 > len(data):
            raise _Truncated("truncated int32")
        (v,) = _I32.unpack_from(data, off)
        off += 4
        return int(v)

    partitions: list[TopicPartition] = []
    n_topics = i32()
    if n_topics < 0 or n_topics * 6 > len(data) - off:
        raise ValueError(f"bad topic count {n_topics}")
    for _ in range(n_topics):
        if off + 2 > len(data):
            raise _Truncated("truncated string length")
        (n,) = _I16.unpack_from(data, off)
        off += 2
        if n < 0 or off + n > len(data):
            raise ValueError(f"bad string length {n}")
        topic = data[off : off + n].decode("utf-8")
        off += n
        n_parts = i32()
        if n_parts < 0 or n_parts * 4 > len(data) - off:
            raise ValueError(f"bad partition count {n_parts}")
        for _ in range(n_parts):
            partitions.append((topic, i32()))
    return partitions, off


def decode_sticky_user_data(data: bytes) -> MemberData | None:
    """Decode StickyAssignorUserData v1, falling back to v0 (no generation).

    None when the bytes are not user data of either version (the Java leader
    then ignores the member's previous assignment). Trailing bytes are ignored,
    as Kafka's schema reader does. kafka-python 3.x puts an INT16 version (0 or
    1) in front of the same layout; that is accepted when the plain layout
    does not parse.
    """
    data = bytes(data)
    try:
        partitions, off = _parse_previous_assignment(data)
        with_generation = off + 4 <= len(data)
    except (ValueError, UnicodeDecodeError):
        if len(data) < 6 or data[:2] not in (b"\x00\x00", b"\x00\x01"):
            return None
        try:
            partitions, off = _parse_previous_assignment(data[2:])
        except (ValueError, UnicodeDecodeError):
            return None
        off += 2
        with_generation = data[1] == 1 and off + 4 <= len(data)
    if with_generation:
        (generation,) = _I32.unpack_from(data, off)
        return MemberData(tuple(partitions), int(generation))
    return MemberData(tuple(partitions), DEFAULT_GENERATION)


def sticky_member_data(subscription: Subscription) -> MemberData:
    """The eager sticky assignor's view of a member: its user data first."""
    if subscription.user_data:
        decoded = decode_sticky_user_data(subscription.user_data)
        return decoded if decoded is not None else MemberData((), DEFAULT_GENERATION)
    return MemberData(tuple(subscription.owned_partitions), subscription.generation_id)


# ---- the sticky core -----------------------------------------------------------------


def _member_key(member_id: str) -> bytes:
    return java_string_key(member_id)


def _resolve_claims(
    counts: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    member_data: Mapping[str, MemberData],
) -> tuple[dict[TopicPartition, str], dict[TopicPartition, str]]:
    """(owner, previous owner) per claimed partition, from the members' claims.

    A claim counts only for an existing partition of a topic the member still
    subscribes to. Highest generation wins; a tie at the top leaves the
    partition unowned. The best strictly lower claim is the previous owner.
    """
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member, data in member_data.items():
        topics = topics_of.get(member)
        if topics is None:
            continue
        for tp in set(data.partitions):
            topic, partition = tp
            if topic in topics and 0 <= partition < counts[topic]:
                claims.setdefault(tp, []).append((data.generation, member))
    owner: dict[TopicPartition, str] = {}
    previous: dict[TopicPartition, str] = {}
    for tp, cl in claims.items():
        top = max(g for g, _ in cl)
        winners = [m for g, m in cl if g == top]
        if len(winners) != 1:
            continue  # claimed by several members of the same generation: nobody keeps it
        owner[tp] = winners[0]
        lower = [(g, m) for g, m in cl if g < top]
        if lower:
            best = max(g for g, _ in lower)
            previous[tp] = min((m for g, m in lower if g == best), key=_member_key)
    return owner, previous


def _constrained(
    counts: Mapping[str, int], members: list[str], owner: Mapping[TopicPartition, str]
) -> dict[str, list[TopicPartition]]:
    """Every member subscribes to the same topics: quotas of floor/ceil(P / N)."""
    total = sum(counts.values())
    min_quota, expected_over = divmod(total, len(members))
    max_quota = min_quota + (1 if expected_over else 0)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, m in owner.items():
        owned[m].append(tp)

    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    kept: set[TopicPartition] = set()
    over = 0  # members filled to max_quota so far
    under: list[str] = []  # below min_quota
    exact: list[str] = []  # at min_quota, may take one more while over < expected_over
    for m in members:  # sorted: deterministic, unlike a Java HashMap walk
        # spread what is kept across topics: lowest partition numbers first (as Kafka does)
        mine = sorted(owned[m], key=lambda tp: (tp[1], tp[0]))
        if len(mine) < min_quota:
            keep = mine
            under.append(m)
        elif len(mine) >= max_quota and over < expected_over:
            keep = mine[:max_quota]
            over += 1
            if over == expected_over:
                exact.clear()
        else:
            keep = mine[:min_quota]
            if over < expected_over:
                exact.append(m)
        assignment[m].extend(keep)
        kept.update(keep)

    unassigned = [
        (t, p) for t in sorted(counts) for p in range(counts[t]) if (t, p) not in kept
    ]
    under_q = deque(under)
    exact_q = deque(exact)
    for tp in unassigned:
        if under_q:
            m = under_q.popleft()
            assignment[m].append(tp)
            if len(assignment[m]) < min_quota:
                under_q.append(m)  # round robin among members still below min_quota
            elif over < expected_over:
                exact_q.append(m)
        else:
            if not exact_q:  # cannot happen: quotas add up to the partition count
                raise AssertionError("sticky assignor: no member left to take a partition")
            m = exact_q.popleft()
            assignment[m].append(tp)
            over += 1
    return assignment


def _general(
    counts: Mapping[str, int],
    members: list[str],
    topics_of: Mapping[str, frozenset[str]],
    owner: Mapping[TopicPartition, str],
    previous: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """Members subscribe to different topics: keep, fill the least loaded, then rebalance."""
    rank = {m: i for i, m in enumerate(members)}
    eligible = {t: [m for m in members if t in topics_of[m]] for t in counts}
    holder: dict[TopicPartition, str] = dict(owner)
    size = {m: 0 for m in members}
    for m in owner.values():
        size[m] += 1

    # topics with the fewest candidate members first, as Kafka does
    topic_order = sorted(counts, key=lambda t: (len(eligible[t]), t))
    all_partitions = [(t, p) for t in topic_order for p in range(counts[t])]
    free = [tp for tp in all_partitions if tp not in owner]

    def least_loaded(topic: str) -> str:
        return min(eligible[topic], key=lambda m: (size[m], rank[m]))

    def move(tp: TopicPartition, to: str) -> None:
        size[holder[tp]] -= 1
        size[to] += 1
        holder[tp] = to

    for tp in free:
        m = least_loaded(tp[0])
        holder[tp] = m
        size[m] += 1

    def rebalance(partitions: list[TopicPartition]) -> None:
        # every move goes from a member to one with at least two fewer partitions,
        # so the sum of squared sizes drops strictly and the loop ends
        changed = True
        while changed:
            changed = False
            for tp in partitions:
                cur = holder[tp]
                prev = previous.get(tp)
                if (
                    prev is not None
                    and prev != cur
                    and tp[0] in topics_of[prev]
                    and size[cur] > size[prev] + 1
                ):
                    move(tp, prev)
                    changed = True
                    continue
                target = least_loaded(tp[0])
                if size[cur] > size[target] + 1:
                    move(tp, target)
                    changed = True

    movable = {t for t in counts if len(eligible[t]) > 1}
    free_movable = [tp for tp in free if tp[0] in movable]
    owned_movable = [tp for tp in all_partitions if tp[0] in movable and tp in owner]
    # moving partitions nobody owned costs nothing: balance with those first, by
    # single moves and then along chains of members; only then move owned ones
    rebalance(free_movable)
    while _augment(holder, size, eligible, topics_of, owner, rank, movable, free_only=True):
        pass
    rebalance(free_movable + owned_movable)
    while _augment(holder, size, eligible, topics_of, owner, rank, movable, free_only=False):
        pass
    _restore_owned(holder, owner, topics_of, rank)

    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, m in holder.items():
        assignment[m].append(tp)
    return assignment


def _augment(
    holder: dict[TopicPartition, str],
    size: dict[str, int],
    eligible: Mapping[str, list[str]],
    topics_of: Mapping[str, frozenset[str]],
    owner: Mapping[TopicPartition, str],
    rank: Mapping[str, int],
    movable: set[str],
    *,
    free_only: bool,
) -> bool:
    """Move partitions along one chain of members, from a member holding at least two
    more partitions than the member at the end of the chain; False if there is none.

    Single moves cannot always fix an imbalance: A (2 more than C) may hold only
    partitions C does not subscribe to, while B could pass one of its own to C
    and take one from A. With no such chain left, the sizes minimise the sum of
    squares over all valid assignments: balanced as far as subscriptions allow.
    Reaching that optimum with moves of unowned partitions first is what lets a
    cooperative follow-up round keep everything its members then own.

    Each hop prefers a partition that returns to its owner, then an unowned one;
    among chains, those moving the fewest owned partitions are chosen.
    """
    held: dict[str, dict[str, list[TopicPartition]]] = {}
    for tp in sorted(holder):
        if tp[0] not in movable:
            continue
        u = holder[tp]
        if free_only and owner.get(tp) == u:
            continue
        held.setdefault(u, {}).setdefault(tp[0], []).append(tp)
    holders: dict[str, list[str]] = {}
    cost: dict[tuple[str, str], int] = {}
    for u in sorted(held, key=rank.__getitem__):
        for t, tps in held[u].items():
            holders.setdefault(t, []).append(u)
            cost[(u, t)] = 0 if any(owner.get(tp) != u for tp in tps) else 1

    for level in sorted(set(size.values())):
        if not any(size[u] >= level + 2 for u in held):
            break
        # 0-1 breadth-first search backwards from the members at this level
        dist: dict[str, int] = {}
        hop: dict[str, tuple[str, str]] = {}  # member -> (topic, next member)
        queue: deque[str] = deque()
        for m in sorted(size, key=rank.__getitem__):
            if size[m] == level:
                dist[m] = 0
                queue.append(m)
        done: set[str] = set()
        while queue:
            w = queue.popleft()
            if w in done:
                continue
            done.add(w)
            for t in sorted(topics_of[w]):
                for u in holders.get(t, ()):
                    if u == w:
                        continue
                    d = dist[w] + cost[(u, t)]
                    if d < dist.get(u, 1 << 30):
                        dist[u] = d
                        hop[u] = (t, w)
                        if cost[(u, t)] == 0:
                            queue.appendleft(u)
                        else:
                            queue.append(u)
        sources = [u for u in hop if size[u] >= level + 2]
        if not sources:
            continue
        u = min(sources, key=lambda m: (-size[m], dist[m], rank[m]))
        while u in hop:
            t, w = hop[u]
            tps = held[u][t]
            tp = min(tps, key=lambda x: (owner.get(x) != w, owner.get(x) == u, x))
            tps.remove(tp)
            size[u] -= 1
            size[w] += 1
            holder[tp] = w
            u = w
        return True
    return False


def _restore_owned(
    holder: dict[TopicPartition, str],
    owner: Mapping[TopicPartition, str],
    topics_of: Mapping[str, frozenset[str]],
    rank: Mapping[str, int],
) -> None:
    """Give displaced partitions back to their owners where sizes allow.

    A partition P that moved from its owner W to U can go back if the move is
    paid for along a cycle: W passes one of its partitions (one it does not
    own, or one owned by the next member) to a member that subscribes to it,
    and so on until one reaches U. Every member on the cycle gives one and
    takes one, so the sizes, and with them the balance, stay as they are,
    while at least one more partition is back with its owner. This undoes the
    detours of the balancing moves (partitions moved A->B and B->A, an owned
    partition moved where an unowned one could have gone, ...).
    """
    while True:
        held: dict[str, dict[str, list[TopicPartition]]] = {}
        for tp in sorted(holder):
            m = holder[tp]
            if owner.get(tp) != m:  # giving away an owned partition is never free
                held.setdefault(m, {}).setdefault(tp[0], []).append(tp)
        displaced = sorted(
            (tp for tp, m in holder.items() if tp in owner and owner[tp] != m),
            key=lambda tp: (rank[owner[tp]], tp),
        )
        reach_from: dict[str, dict[str, tuple[str, str]]] = {}
        cycle: list[tuple[TopicPartition, str]] = []
        for tp in displaced:
            u, w = holder[tp], owner[tp]
            if w not in reach_from:
                reach_from[w] = _paths_from(w, held, topics_of, rank)
            parent = reach_from[w]
            if u not in parent:
                continue
            # moves: P back to W, then along the path W -> ... -> U
            cycle = [(tp, w)]
            hops: list[tuple[str, str, str]] = []
            node = u
            while node != w:
                prev, topic = parent[node]
                hops.append((prev, topic, node))
                node = prev
            for giver, topic, taker in reversed(hops):
                options = held[giver][topic]
                pick = min(options, key=lambda x: (owner.get(x) != taker, x))
                cycle.append((pick, taker))
            break
        if not cycle:
            return
        for tp, to in cycle:
            holder[tp] = to


def _paths_from(
    start: str,
    held: Mapping[str, Mapping[str, list[TopicPartition]]],
    topics_of: Mapping[str, frozenset[str]],
    rank: Mapping[str, int],
) -> dict[str, tuple[str, str]]:
    """Breadth-first tree of members reachable from ``start`` by passing on a
    partition the giver does not own: member -> (previous member, topic)."""
    subscribers: dict[str, list[str]] = {}
    for m in sorted(topics_of, key=rank.__getitem__):
        for t in topics_of[m]:
            subscribers.setdefault(t, []).append(m)
    parent: dict[str, tuple[str, str]] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        x = queue.popleft()
        for topic in sorted(held.get(x, {})):
            for y in subscribers.get(topic, ()):
                if y not in seen:
                    seen.add(y)
                    parent[y] = (x, topic)
                    queue.append(y)
    return parent


def sticky_assignment(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    member_data: Mapping[str, MemberData],
) -> Assignment:
    """The sticky assignment for these members, given each one's previous assignment."""
    counts = subscribed_partition_counts(partitions_per_topic, subscriptions)
    members = sorted(subscriptions, key=_member_key)
    if not members:
        return {}
    topics_of = {m: frozenset(t for t in subscriptions[m].topics if t in counts) for m in members}
    owner, previous = _resolve_claims(counts, topics_of, member_data)
    if len(set(topics_of.values())) == 1:
        result = _constrained(counts, members, owner)
    else:
        result = _general(counts, members, topics_of, owner, previous)
    return {m: sorted(result[m]) for m in members}


class StickyAssignor:
    """Kafka's "sticky" assignor (eager rebalancing)."""

    name = "sticky"
    rebalance_protocol: RebalanceProtocol = EAGER
    supported_protocols: tuple[RebalanceProtocol, ...] = (EAGER,)

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        """StickyAssignorUserData v1 with the last assignment; None before the first one."""
        owned = list(owned)
        if generation < 0 and not owned:
            return None
        return encode_sticky_user_data(owned, generation)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignment:
        data = {m: sticky_member_data(s) for m, s in subscriptions.items()}
        return sticky_assignment(partitions_per_topic, subscriptions, data)
