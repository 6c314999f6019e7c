"""The rebalance hooks a consumer facade implements, and how both group members await them."""

from __future__ import annotations

import asyncio
import logging

from .assignors import TopicPartition
from .membership_types import Generation, PrepareResult


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


class ListenerCalls:
    """How a membership (either group protocol's) awaits its listener's hooks.

    A hook that raises does not stop the membership: the error is logged and kept in
    ``listener_error``. Subclasses set ``listener`` and say their ``group_id``.
    """

    listener: RebalanceListener
    listener_error: BaseException | None = None

    @property
    def group_id(self) -> str:
        raise NotImplementedError

    async def _call(self, hook: str, *args: object) -> None:
        try:
            await getattr(self.listener, hook)(*args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.listener_error = exc
            # Under the membership's own logger (the one an application tunes for it).
            logging.getLogger(type(self).__module__).exception(
                "group %s: rebalance listener %s failed", self.group_id, hook
            )

    async def _notify(self, result: PrepareResult) -> None:
        if result.kind == "lost":
            await self._call("on_partitions_lost", list(result.partitions))
        elif result.kind == "revoked":
            await self._call("on_partitions_revoked", list(result.partitions))
