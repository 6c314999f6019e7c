"""The network clients every consumer is built from, wired and closed in one place.

Used by the poll consumers' runtime and by ``ConsumerGroup``: one :class:`Cluster`
(connections and metadata) and one :class:`Fetcher`; with a group id also one
:class:`CoordinatorLocator`, shared by the membership (``group_protocol`` picks the
kind) and the offsets client.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cluster import Cluster
from .consumer_config import ConsumerConfig
from .coordinator_locator import CoordinatorLocator
from .fetcher import Fetcher
from .membership_factory import AnyMembership, new_group_offsets, new_membership
from .offsets import GroupOffsets
from .rebalance_listener import RebalanceListener

__all__ = ["ConsumerClients", "GroupClients"]


@dataclass(frozen=True, slots=True)
class GroupClients:
    """A group member's clients: they share one coordinator lookup."""

    locator: CoordinatorLocator
    membership: AnyMembership
    offsets: GroupOffsets


@dataclass(frozen=True, slots=True)
class ConsumerClients:
    cluster: Cluster
    fetcher: Fetcher
    group: GroupClients | None
    """None without a ``group_id``."""

    @classmethod
    def build(
        cls,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener,
    ) -> ConsumerClients:
        """Make the clients for ``config`` (no I/O yet); ``listener`` gets the membership's hooks."""
        cluster = Cluster(
            config.bootstrap_servers,
            client_id=config.client_id,
            request_timeout_s=config.request_timeout_ms / 1000.0,
            security=config.security(),
        )
        fetcher = Fetcher(cluster, config)
        group = None
        if config.group_id is not None:
            locator = CoordinatorLocator(cluster, config)
            membership = new_membership(cluster, config, listener=listener, locator=locator)
            group = GroupClients(locator, membership, new_group_offsets(locator, config, membership))
        return cls(cluster, fetcher, group)

    async def close(self) -> None:
        """Close the fetcher, the coordinator lookup and the connections.

        Leaving the group (the membership) is the caller's step, before this one.
        """
        await self.fetcher.close()
        if self.group is not None:
            await self.group.locator.close()
        await self.cluster.close()
