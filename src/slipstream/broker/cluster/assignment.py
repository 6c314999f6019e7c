"""Pure cluster decisions: live brokers, the desired leader of each partition, lease moves.

Every broker runs the same computation over the same rows (read from the database,
judged by the database's clock), so they agree on who should lead what without
talking to each other. Each topic's partitions are spread evenly over the live
brokers (``balanced_leaders``: every broker gets the floor or the ceiling of its
share), sticking to the current leaders as far as the quotas allow, so a broker
that dies or joins moves only the partitions it must. A broker claims the partitions
desired for it whose lease is free, expired or its own, and hands over (releases) the
ones it holds that are now desired for another live broker; a dead broker's leases
simply expire.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """Where clients of one named listener reach a broker (its advertised host and port)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerRow:
    node_id: int
    host: str  # the first listener's endpoint
    port: int
    heartbeat_ms: int
    listeners: tuple[ListenerEndpoint, ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker; None when it has no listener
        of that name (Kafka leaves such a broker out of that listener's answers). A row
        that registered no listeners (a broker from before they were registered, during a
        rolling upgrade) is taken to be at its host and port on every listener."""
        if not self.listeners:
            return self.host, self.port
        for found in self.listeners:
            if found.name == listener:
                return found.host, found.port
        return None


@dataclass(frozen=True, slots=True)
class Lease:
    owner: int
    epoch: int
    expires_ms: int

    def valid(self, now_ms: int) -> bool:
        return self.expires_ms > now_ms


@dataclass(frozen=True, slots=True)
class LeasePlan:
    claim: list[TopicPartition]  # free, expired or ours in the database but not held here
    release: list[TopicPartition]  # held here, desired for another live broker


def live_brokers(rows: Iterable[BrokerRow], now_ms: int, session_ms: int) -> list[BrokerRow]:
    """Brokers whose last heartbeat is within the session, by node id."""
    return sorted((r for r in rows if now_ms - r.heartbeat_ms < session_ms), key=lambda r: r.node_id)


def desired_leader(topic: str, partition: int, live_ids: Sequence[int]) -> int | None:
    """The leader of ``topic``/``partition`` when nobody leads anything yet (None when
    no broker is live): a rotation by a stable hash of the topic, so topics with fewer
    partitions than brokers do not all land on the same one."""
    if not live_ids:
        return None
    start = zlib.crc32(topic.encode())
    return live_ids[(start + partition) % len(live_ids)]


def balanced_leaders(
    topic: str, partitions: Sequence[int], live_ids: Sequence[int], current: Mapping[int, int]
) -> dict[int, int]:
    """Partition -> live broker for one topic: every broker leads the floor or the ceiling
    of ``len(partitions) / len(live_ids)``, current leaders (``current``: partition ->
    live leader) keep what fits in their quota, the rest goes to brokers below theirs.
    Deterministic: every broker computes the same from the same rows."""
    ids = sorted(live_ids)
    if not ids:
        return {}
    start = zlib.crc32(topic.encode()) % len(ids)
    rotation = ids[start:] + ids[:start]
    base, extra = divmod(len(partitions), len(ids))
    holding = {b: sum(1 for o in current.values() if o == b) for b in ids}
    # The extra partitions go to the brokers already holding the most (fewest moves),
    # then by the topic's rotation.
    ranked = sorted(rotation, key=lambda b: (-holding[b], rotation.index(b)))
    quota = {b: base + (1 if i < extra else 0) for i, b in enumerate(ranked)}
    owners: dict[int, int] = {}
    kept = dict.fromkeys(ids, 0)
    for p in sorted(partitions):
        owner = current.get(p)
        if owner in kept and kept[owner] < quota[owner]:
            owners[p] = owner
            kept[owner] += 1
    for p in sorted(partitions):
        if p not in owners:
            # The broker furthest below its quota, by the topic's rotation.
            taker = max(rotation, key=lambda b: (quota[b] - kept[b], -rotation.index(b)))
            owners[p] = taker
            kept[taker] += 1
    return owners


def plan(
    me: int,
    partitions: Iterable[TopicPartition],
    live_ids: Sequence[int],
    leases: Mapping[TopicPartition, Lease],
    held: Mapping[TopicPartition, int],
    now_ms: int,
) -> LeasePlan:
    """What ``me`` should claim and release now.

    ``leases``: every lease row; ``held``: the partitions this broker leads (lease epoch).
    A partition whose current owner is alive keeps it until that owner hands it over,
    so a joining broker never takes a partition from under a live leader.
    """
    ids = sorted(live_ids)
    claim: list[TopicPartition] = []
    release: list[TopicPartition] = []
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    desired: dict[TopicPartition, int] = {}
    for topic, indexes in by_topic.items():
        current = {}
        for index in indexes:
            if (topic, index) in held:
                current[index] = me
            else:
                lease = current_leader(leases.get((topic, index)), ids, now_ms)
                if lease is not None:
                    current[index] = lease.owner
        for index, owner in balanced_leaders(topic, indexes, ids, current).items():
            desired[(topic, index)] = owner
    for tp in [(topic, index) for topic, indexes in by_topic.items() for index in indexes]:
        want = desired.get(tp)
        lease = leases.get(tp)
        if tp in held:
            if want is not None and want != me and want in ids:
                release.append(tp)
            continue
        if want != me:
            continue
        if lease is None or not lease.valid(now_ms) or lease.owner == me:
            claim.append(tp)
    return LeasePlan(claim, release)


def current_leader(lease: Lease | None, live_ids: Iterable[int], now_ms: int) -> Lease | None:
    """The lease if it names a live leader now, else None (the partition is leaderless)."""
    if lease is None or not lease.valid(now_ms) or lease.owner not in set(live_ids):
        return None
    return lease
