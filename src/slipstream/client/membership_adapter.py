"""What both group members' asyncio adapters share (:class:`MembershipAdapter`).

The classic member (``classic_membership.py``) and the consumer-protocol member
(``consumer_membership.py``) show the facades one surface: the same state, the same
``ensure_active`` wait and the same ``close`` order. Each keeps its own tasks, its own
requests and its own way of failing; this base holds only what they do alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

from .assignors import TopicPartition
from .cluster import Cluster
from .consumer_config import ConsumerConfig
from .coordinator_locator import CoordinatorLocator
from .group_errors import FatalGroupError
from .membership_types import Clock, Generation, MemberState, PrepareResult
from .rebalance_listener import ListenerCalls, RebalanceListener


class MemberCoreView(Protocol):
    """What the adapter reads from either protocol's sans-I/O member core."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def state(self) -> MemberState: ...
    @property
    def generation(self) -> Generation | None: ...
    @property
    def owned(self) -> set[TopicPartition]: ...
    @property
    def subscription(self) -> tuple[str, ...]: ...
    def prepare_leave(self) -> PrepareResult: ...
    def subscribe(self, topics: Iterable[str]) -> bool: ...


CoreT = TypeVar("CoreT", bound=MemberCoreView)


class MembershipAdapter(ListenerCalls, Generic[CoreT]):
    """A member's asyncio side: its core, listener, coordinator locator and wake-up events.

    ``_task`` is the task that drives the membership (the classic join loop, the
    consumer heartbeat loop); ``_stable`` is set while the member holds a settled
    assignment (or has failed, so that ``ensure_active`` wakes and raises).
    Subclasses say ``rejoin_needed`` and implement ``start``, ``_stop_tasks`` and
    ``_leave``.
    """

    def __init__(
        self,
        core: CoreT,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener | None,
        locator: CoordinatorLocator | None,
        clock: Clock = time.monotonic,
    ) -> None:
        config.validate()
        self.cluster = cluster
        self.config = config
        self.core = core
        self.listener = listener or RebalanceListener()
        self._own_locator = locator is None
        self.locator = locator or CoordinatorLocator(cluster, config)
        self.clock = clock
        self.error: FatalGroupError | None = None
        self.listener_error: BaseException | None = None
        self.rebalances = 0
        """Completed rebalances: generations with an assignment (classic), reconciliations (consumer)."""
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stable = asyncio.Event()
        self._closed = False
        self._attempt = 0
        self._retry_backoff = config.retry_backoff()

    # ------------------------------------------------------------ public API

    @property
    def group_id(self) -> str:
        return self.core.group_id

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def state(self) -> MemberState:
        return self.core.state

    @property
    def generation(self) -> Generation | None:
        return self.core.generation

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.core.owned)

    @property
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription

    @property
    def rejoin_needed(self) -> bool:
        raise NotImplementedError

    def subscribe(self, topics: Iterable[str]) -> None:
        """Set the topics to subscribe to; a change makes a running member rejoin."""
        topics = list(topics)
        if not topics:
            raise ValueError(
                "subscribe to at least one topic (to stop, use leave_group() or close())"
            )
        if self.core.subscribe(topics):
            self._subscription_changed()

    def start(self) -> None:
        raise NotImplementedError

    async def ensure_active(self, timeout_s: float | None = None) -> Generation:
        """Join (or finish rejoining or reconciling) and return the settled generation.

        Raises the fatal error if the member failed, TimeoutError after ``timeout_s``.
        """
        self.start()
        async with asyncio.timeout(timeout_s):
            while True:
                if self.error is not None:
                    raise self.error
                gen = self.core.generation
                if gen is not None and not self.rejoin_needed and self._stable.is_set():
                    return gen
                task = self._task
                waiter = asyncio.ensure_future(self._stable.wait())
                try:
                    pending: set[asyncio.Future[object]] = {waiter}  # type: ignore[arg-type]
                    if task is not None:
                        pending.add(task)  # type: ignore[arg-type]
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
                self._after_stable_wait()
                if task is not None and task.done() and self.error is None:
                    if self._closed:
                        raise RuntimeError("group membership is closed")
                    exc = task.exception() if not task.cancelled() else None
                    if exc is not None:
                        raise exc
                    self.start()

    async def close(
        self, *, leave: bool = True, reason: str = "the consumer is being closed"
    ) -> None:
        """Stop: the revoke (or lost) hook, then leave the group, then the connection."""
        if self._closed:
            return
        await self._stop_tasks()
        self._closed = True
        self._on_closed()
        try:
            if leave:
                await self._leave(reason)
            else:
                await self._notify(self.core.prepare_leave())
        finally:
            self._stable.clear()
            if self._own_locator:
                await self.locator.close()

    # ------------------------------------------------------------ internals

    def _after_stable_wait(self) -> None:
        """``ensure_active`` woke (stable set, or the task ended); a subclass may look again."""

    def _on_closed(self) -> None:
        """Marked closed, tasks stopped; before leaving."""

    def _subscription_changed(self) -> None:
        self._wakeup.set()

    async def _stop_tasks(self) -> None:
        raise NotImplementedError

    async def _leave(self, reason: str) -> None:
        raise NotImplementedError

    def _next_backoff(self) -> float:
        """The next retry delay; ``_attempt`` counts the retries since the last success."""
        delay = self._retry_backoff.delay_s(self._attempt)
        self._attempt += 1
        return delay
