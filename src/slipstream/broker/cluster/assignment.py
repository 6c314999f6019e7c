"""Pure cluster decisions: live brokers, the desired leader of each partition, lease moves.

Every broker runs the same computation over the same rows (read from the database,
judged by the database's clock), so they agree on who should lead what without
talking to each other. A partition's desired leader is a live broker chosen by a
stable hash of the topic name plus the partition index, so each topic's partitions
spread evenly over the live brokers. A broker claims the partitions desired for it
whose lease is free, expired or its own, and hands over (releases) the ones it holds
that are now desired for another live broker; a dead broker's leases simply expire.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    heartbeat_ms: int


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
    """The live broker that should lead ``topic``/``partition`` (None when none is live)."""
    if not live_ids:
        return None
    start = zlib.crc32(topic.encode())
    return live_ids[(start + partition) % len(live_ids)]


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
    for tp in partitions:
        want = desired_leader(tp[0], tp[1], ids)
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
