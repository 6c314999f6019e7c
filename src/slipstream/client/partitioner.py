"""Partitioners compatible with the Java client: murmur2 for keyed records."""

from __future__ import annotations

import random
from collections.abc import Callable

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c) as a signed 32-bit int, as Java's Utils.murmur2."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """Java's default: toPositive(murmur2(key)) % partitions."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class RecordPartitioner:
    """The producer's choice of partition for records sent without one.

    ``name``: "murmur2_random" (murmur2 of the key like the Java client, sticky for
    records without a key), "murmur2" (null keys hash like b""), "random",
    "round_robin"; or ``custom(topic, key, partition_count) -> partition``.
    The sticky case is checked inline by the producer's hot path (``sticky_unkeyed``,
    ``sticky``, ``new_sticky``).
    """

    def __init__(self, name: str, custom: Callable[[str, bytes | None, int], int] | None) -> None:
        self.name = name
        self.custom = custom
        self.sticky_unkeyed = name == "murmur2_random"
        self.sticky: dict[str, list[int]] = {}  # topic -> [partition, bytes since switch]
        self._round_robin: dict[str, int] = {}

    def choose(self, topic: str, key: bytes | None, count: int) -> int:
        """Partition for a record without an explicit one (sticky unkeyed handled inline)."""
        if self.custom is not None:
            partition = int(self.custom(topic, key, count))
            if not 0 <= partition < count:
                raise ValueError(
                    f"partitioner returned {partition} for a topic of {count} partitions"
                )
            return partition
        name = self.name
        if name == "random":
            return random.randrange(count)
        if name == "round_robin":
            n = self._round_robin.get(topic, -1) + 1
            self._round_robin[topic] = n
            return n % count
        # murmur2 (Java's default for keyed records); "murmur2" maps null keys like b"".
        return (murmur2(key if key is not None else b"") & 0x7FFFFFFF) % count

    def new_sticky(self, topic: str, old: list[int] | None, leaders: dict[int, int]) -> list[int]:
        """Sticky partitioning (KIP-480/794): unkeyed records stay on one partition for
        about batch_size bytes, then move to another one that has a leader."""
        previous = -1 if old is None else old[0]
        available = [p for p, leader in leaders.items() if leader >= 0 and p != previous]
        if not available:
            available = [p for p in leaders if p != previous] or list(leaders) or [0]
        sticky = self.sticky[topic] = [random.choice(available), 0]
        return sticky
