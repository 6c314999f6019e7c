"""Partition maps ``{topic_id: frozenset[partition]}`` and the set algebra on them.

Every map in this package is normalized: no topic maps to an empty set, so two
maps holding the same partitions compare equal.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

TopicId = uuid.UUID
PartitionMap = Mapping[TopicId, frozenset[int]]

EMPTY: PartitionMap = {}


def normalize(partitions: Mapping[TopicId, Iterable[int]]) -> dict[TopicId, frozenset[int]]:
    """A normalized copy: frozensets, no empty topics."""
    out: dict[TopicId, frozenset[int]] = {}
    for topic_id, parts in partitions.items():
        frozen = frozenset(parts)
        if frozen:
            out[topic_id] = frozen
    return out


def union(a: PartitionMap, b: PartitionMap) -> dict[TopicId, frozenset[int]]:
    out = dict(a)
    for topic_id, parts in b.items():
        out[topic_id] = out.get(topic_id, frozenset()) | parts
    return normalize(out)


def difference(a: PartitionMap, b: PartitionMap) -> dict[TopicId, frozenset[int]]:
    return normalize({t: parts - b.get(t, frozenset()) for t, parts in a.items()})


def intersection(a: PartitionMap, b: PartitionMap) -> dict[TopicId, frozenset[int]]:
    return normalize({t: parts & b.get(t, frozenset()) for t, parts in a.items()})


def is_subset(a: PartitionMap, b: PartitionMap) -> bool:
    return all(parts <= b.get(t, frozenset()) for t, parts in a.items())


def overlaps(a: PartitionMap, b: PartitionMap) -> bool:
    return any(parts & b.get(t, frozenset()) for t, parts in a.items())


def count(partitions: PartitionMap) -> int:
    return sum(len(parts) for parts in partitions.values())


def iter_partitions(partitions: PartitionMap) -> Iterator[tuple[TopicId, int]]:
    """(topic id, partition) pairs in a stable order."""
    for topic_id in sorted(partitions):
        for partition in sorted(partitions[topic_id]):
            yield topic_id, partition


def filter_partitions(
    partitions: PartitionMap, keep: Callable[[TopicId, int], bool]
) -> dict[TopicId, frozenset[int]]:
    return normalize({t: {p for p in parts if keep(t, p)} for t, parts in partitions.items()})
