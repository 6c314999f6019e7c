"""Which partitions of a coordinator's log (``__consumer_offsets``, ``__transaction_state``)
this coordinator serves now.

A partition is ours, loading (its log is being replayed: its keys answer
COORDINATOR_LOAD_IN_PROGRESS) or foreign (another broker of a cluster owns it: its
keys answer NOT_COORDINATOR). A key (group id, transactional id) lives in the
partition Kafka's mapping gives.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..protocol.errors import ErrorCode
from . import records as rec


class PartitionOwnership:
    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.loading: set[int] = set()
        self.foreign: set[int] = set()

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id`` (Kafka's mapping)."""
        return rec.partition_for(group_id, self.num_partitions)

    @property
    def is_loading(self) -> bool:
        return bool(self.loading)

    def is_group_loading(self, group_id: str) -> bool:
        return self.is_key_loading(group_id)

    def is_key_loading(self, key: str) -> bool:
        return bool(self.loading) and self.partition_for(key) in self.loading

    def group_unavailable(self, group_id: str) -> int:
        """Why this coordinator cannot serve the group now: NOT_COORDINATOR (another broker
        owns its partition), COORDINATOR_LOAD_IN_PROGRESS, or 0 (it can)."""
        return self.key_unavailable(group_id)

    def key_unavailable(self, key: str) -> int:
        """``group_unavailable`` for any key of the log (a transactional id)."""
        if not self.loading and not self.foreign:
            return ErrorCode.NONE
        partition = self.partition_for(key)
        if partition in self.foreign:
            return ErrorCode.NOT_COORDINATOR
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def owns(self, partition: int) -> bool:
        return partition not in self.foreign

    def begin_loading(self, partitions: Iterable[int] | None = None) -> None:
        """Mark partitions (default: all) as loading."""
        loading = set(range(self.num_partitions) if partitions is None else partitions)
        self.foreign -= loading
        self.loading |= loading

    def finish_loading(self, partitions: Iterable[int] | None = None) -> set[int]:
        """These partitions (default: every loading one) are served now; returns them."""
        done = set(self.loading if partitions is None else partitions)
        self.loading -= done
        return done

    def disown(self, partitions: Iterable[int]) -> set[int]:
        """Another broker owns these partitions now; returns them."""
        gone = set(partitions)
        self.foreign |= gone
        self.loading -= gone
        return gone
