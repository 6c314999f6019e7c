"""A classic group member: identity, timeouts, protocols, assignment, parked requests."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .result import Pending

Protocols = list[tuple[str, bytes]]


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference.
    protocols: Protocols = field(default_factory=list)
    assignment: bytes = b""
    # The parked JoinGroup / SyncGroup of this member, if any.
    join_pending: Pending | None = None
    sync_pending: Pending | None = None
    # Joined during the current rebalance and not yet answered: may expire while
    # awaiting its JoinGroup response (Kafka's isNew).
    is_new: bool = False
    # When its last Heartbeat arrived (None: none yet), for the history's session-expired event.
    last_heartbeat_ms: int | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_pending is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_pending is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        """Same protocols, same metadata, same order."""
        return list(protocols) == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        # New members can expire while awaiting their first JoinGroup response;
        # others awaiting a rebalance response count as alive.
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync
