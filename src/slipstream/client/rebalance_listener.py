"""The rebalance hooks a consumer facade implements; both group members await them."""

from __future__ import annotations

from .assignors import TopicPartition
from .membership_types import Generation


class RebalanceListener:
    """Hooks a facade implements; each is awaited by the membership task, in order.

    Around a rebalance: ``on_join_prepare`` (e.g. commit), then
    ``on_partitions_lost`` or ``on_partitions_revoked`` (before JoinGroup), then
    after SyncGroup ``on_partitions_revoked`` (COOPERATIVE: what moved away) and
    ``on_partitions_assigned`` (what was added; always called, maybe empty).
    Heartbeats continue while a hook runs, but the whole rebalance must finish
    within the rebalance timeout (``max_poll_interval_ms``).
    """

    async def on_join_prepare(self, generation: Generation | None) -> None:
        return None

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        return None

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        """Partitions that may already belong to someone else: don't commit. Default: revoked."""
        await self.on_partitions_revoked(lost)
