"""What this broker knows of the cluster, for handlers: live brokers and partition leaders.

Refreshed by the member loop from the database every heartbeat; ``held`` changes the
moment this broker gains or gives up a lease, so it never serves a partition it does
not lead (it may learn late that it lost one: its writes are then refused by the lease
check inside the commit transaction).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    def leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader node id, leader epoch), or None while the partition has no live leader."""
        epoch = self.held.get((topic, partition))
        if epoch is not None:
            return self.node_id, epoch
        lease = current_leader(self.leases.get((topic, partition)), (b.node_id for b in self.live), self.now_ms)
        if lease is None or lease.owner == self.node_id:  # ours in the rows, not (yet) served here
            return None
        return lease.owner, lease.epoch

    def broker(self, node_id: int) -> BrokerRow | None:
        for row in self.live:
            if row.node_id == node_id:
                return row
        return None
