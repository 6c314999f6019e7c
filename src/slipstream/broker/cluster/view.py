"""What this broker knows of the cluster, for handlers: live brokers (with each one's
advertised listeners) and partition leaders.

Refreshed by the member loop from the database every heartbeat; ``held`` changes the
moment this broker gains or gives up a lease, so it never serves a partition it does
not lead (it may learn late that it lost one: its writes are then refused by the lease
check inside the commit transaction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode
from .assignment import BrokerRow, Lease, TopicPartition, current_leader


@dataclass
class ClusterView:
    node_id: int
    now_ms: int = 0
    live: list[BrokerRow] = field(default_factory=list)
    leases: dict[TopicPartition, Lease] = field(default_factory=dict)
    # Partitions this broker leads and serves (loaded), with their lease epochs.
    held: dict[TopicPartition, int] = field(default_factory=dict)

    def leads(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.held

    def epoch_error(self, topic: str, partition: int, requested: int) -> int:
        """KIP-320, for a partition this broker leads: a request naming the leader epoch
        its client knows is answered FENCED_LEADER_EPOCH when that epoch is older than
        the lease's (the client's metadata is stale) and UNKNOWN_LEADER_EPOCH when newer
        (this broker's is); 0 when it matches or names none (-1)."""
        held = self.held.get((topic, partition))
        if requested < 0 or held is None or requested == held:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < held else ErrorCode.UNKNOWN_LEADER_EPOCH

    def leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader node id, leader epoch), or None while the partition has no live leader."""
        epoch = self.held.get((topic, partition))
        if epoch is not None:
            return self.node_id, epoch
        lease = current_leader(self.leases.get((topic, partition)), (b.node_id for b in self.live), self.now_ms)
        if lease is None or lease.owner == self.node_id:  # ours in the rows, not (yet) served here
            return None
        return lease.owner, lease.epoch

    def told_leader(self, topic: str, partition: int, listener: str) -> tuple[int, int, int]:
        """(error, leader id, leader epoch) as a client of ``listener`` is told (Metadata,
        DescribeTopicPartitions): LEADER_NOT_AVAILABLE with no leader while none leads;
        LISTENER_NOT_FOUND with no leader when the leader has no listener of that name."""
        found = self.leader(topic, partition)
        if found is None:
            return ErrorCode.LEADER_NOT_AVAILABLE, -1, -1
        leader, epoch = found
        if leader != self.node_id and self.endpoint(leader, listener) is None:
            return ErrorCode.LISTENER_NOT_FOUND, -1, epoch
        return ErrorCode.NONE, leader, epoch

    def broker(self, node_id: int) -> BrokerRow | None:
        for row in self.live:
            if row.node_id == node_id:
                return row
        return None

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches live broker ``node_id``; None when that
        broker is not live or has no listener of that name."""
        row = self.broker(node_id)
        return None if row is None else row.endpoint(listener)

    def others_on(self, listener: str) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every other live broker with a ``listener`` listener:
        the brokers an answer on that listener names (Kafka leaves the rest out)."""
        found = []
        for row in self.live:
            endpoint = row.endpoint(listener) if row.node_id != self.node_id else None
            if endpoint is not None:
                found.append((row.node_id, *endpoint))
        return found
