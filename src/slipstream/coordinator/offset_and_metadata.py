"""A committed offset as the coordinator keeps it, and its ``__consumer_offsets`` value."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import group_records as gr
from ..protocol.schema import fast_frozen_init


@fast_frozen_init  # made on every request: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator keeps it (-1 = absent for epoch/expiry)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1

    @classmethod
    def from_value(cls, value: gr.OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=value.expire_timestamp,
        )

    def to_value(self) -> gr.OffsetCommitValue:
        return gr.OffsetCommitValue(
            offset=self.offset,
            leader_epoch=self.leader_epoch,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            expire_timestamp=self.expire_timestamp_ms,
        )
