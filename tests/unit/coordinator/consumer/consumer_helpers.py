"""Shorthands for consumer-group tests: topic ids, partition maps, topic metadata."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from slipstream.coordinator.consumer import PartitionMap, TopicMetadata


def tid(name: str) -> uuid.UUID:
    """A stable topic id per topic name."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def pm(spec: Mapping[str, Iterable[int]]) -> PartitionMap:
    """``{"foo": [0, 1]}`` -> ``{tid("foo"): frozenset({0, 1})}`` (empty sets dropped)."""
    return {tid(name): frozenset(parts) for name, parts in spec.items() if frozenset(parts)}


def topics(**counts: int) -> dict[uuid.UUID, TopicMetadata]:
    """``topics(foo=3)`` -> metadata of topic foo with 3 partitions."""
    return {tid(name): TopicMetadata(tid(name), name, count) for name, count in counts.items()}


def all_pairs(assignment: PartitionMap) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, parts in assignment.items() for p in parts}
