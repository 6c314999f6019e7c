"""Which partitions changed owner between two classic assignments (for ``AssignmentSent``).

A classic group's assignments are opaque bytes to the coordinator; with the consumer
protocol they can be read. Anything else (or bytes that do not parse) leaves the
moves unknown.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from ..protocol import consumer_protocol as cp
from .history import PartitionMove

# "topic-N" -> the member owning it.
Owners = dict[str, str]


def owners_of(assignments: Mapping[str, bytes]) -> Owners | None:
    """Who owns each partition in consumer-protocol ``assignments`` (member id -> bytes); None
    when one of them does not parse."""
    owners: Owners = {}
    for member_id, data in assignments.items():
        if not data:
            continue
        try:
            _version, assignment = cp.decode_assignment(data)
        except (ValueError, IndexError, struct.error):  # DecodeError is a ValueError
            return None
        for tp in assignment.assigned_partitions:
            for p in tp.partitions:
                owners[f"{tp.topic}-{p}"] = member_id
    return owners


def partition_moves(before: Owners | None, after: Owners) -> tuple[PartitionMove, ...]:
    """Partitions whose owner differs (gained, lost, or handed over), in partition order."""
    old = before or {}
    names = sorted(set(old) | set(after), key=_partition_order)
    return tuple(
        PartitionMove(partition=name, from_member=old.get(name), to_member=after.get(name))
        for name in names
        if old.get(name) != after.get(name)
    )


def partition_counts(owners: Owners) -> dict[str, int]:
    counts: dict[str, int] = {}
    for member_id in owners.values():
        counts[member_id] = counts.get(member_id, 0) + 1
    return counts


def _partition_order(name: str) -> tuple[str, int]:
    topic, _, index = name.rpartition("-")
    return (topic, int(index)) if index.isdigit() else (name, -1)
