"""The consumer-protocol (KIP-848) member's asyncio adapter (:class:`ConsumerGroupMembership`).

It has the public surface of :class:`~.classic_membership.GroupMembership`, so the
facades drive either one the same way, and acts on what
:class:`~.consumer_member_core.ConsumerMemberCore` decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ..protocol.apis.consumer_group_heartbeat import SPEC as CONSUMER_GROUP_HEARTBEAT
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from .assignors import COOPERATIVE, RebalanceProtocol, TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .consumer_member_core import ConsumerMemberCore, Phase, Reconciliation
from .coordinator_locator import CoordinatorLocator
from .group_errors import FatalGroupError, consumer_fatal_error
from .membership_adapter import MembershipAdapter
from .membership_types import Action, Clock, Generation, Outcome
from .rebalance_listener import RebalanceListener
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)


class ConsumerGroupMembership(MembershipAdapter[ConsumerMemberCore]):
    """This consumer's membership in a consumer-protocol group, driven by asyncio tasks.

    Same surface as :class:`~.classic_membership.GroupMembership`. One task heartbeats;
    it starts a reconciliation task whenever an answer changes the target, and
    never two at once, so hooks run in order while heartbeats go on (a slow
    hook must not cost the member its session).
    """

    protocol: RebalanceProtocol = COOPERATIVE
    """Incremental: kept partitions are never interrupted (facades act as for cooperative)."""

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener | None = None,
        locator: CoordinatorLocator | None = None,
        clock: Clock = time.monotonic,
        member_id: str | None = None,
    ) -> None:
        super().__init__(
            ConsumerMemberCore(config, member_id=member_id),
            cluster,
            config,
            listener=listener,
            locator=locator,
            clock=clock,
        )
        self._reconcile_task: asyncio.Task[None] | None = None
        self._answered = asyncio.Event()

    # ------------------------------------------------------------ public API

    @property
    def member_epoch(self) -> int:
        return self.core.member_epoch

    @property
    def rejoin_needed(self) -> bool:
        """Joining, fenced or reconciling: the assignment may be about to change."""
        return not self.core.stable

    def subscribe_pattern(self, regex: str) -> None:
        """Subscribe to what the broker's regular expression (RE2) matches (v1 brokers)."""
        if self.core.subscribe_pattern(regex):
            self._subscription_changed()

    def request_rejoin(self, reason: str) -> None:
        self.core.request_rejoin(reason)

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> None:
        """Called by the offsets client when a commit says the member is gone."""
        if self.core.on_commit_error(code, sent):
            self._stable.clear()
            self._wakeup.set()

    async def next_generation(self, stale_epoch: int) -> Generation | None:
        """After STALE_MEMBER_EPOCH: the generation of the next heartbeat answer (None: left)."""
        running = self._task is not None and not self._task.done()
        if self.core.member_epoch == stale_epoch and running and self.error is None:
            self._answered.clear()
            self.core.heartbeat_now = True
            self._wakeup.set()
            await self._answered.wait()
        return self.core.generation

    def start(self) -> None:
        """Start the heartbeat task (idempotent); ``ensure_active`` calls it."""
        if self._closed:
            raise RuntimeError("group membership is closed")
        if self.error is not None:
            raise self.error
        if not self.core.subscribed:
            raise ValueError("subscribe to at least one topic before joining the group")
        if self.core.phase is Phase.UNJOINED:
            self.core.join()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"consumer-group-{self.group_id}"
            )

    async def leave_group(self, reason: str = "the consumer is leaving the group") -> None:
        """Leave now (e.g. max_poll_interval_ms passed); ``ensure_active`` rejoins, same id."""
        await self._stop_tasks()
        await self._leave(reason)
        self._stable.clear()

    def _on_closed(self) -> None:
        self._answered.set()  # a commit waiting for a new epoch gives up

    def _after_stable_wait(self) -> None:
        # A reconciliation may have started since ``_stable`` was set: wait for it too.
        if self._stable.is_set() and not self.core.stable and self.error is None:
            self._stable.clear()

    # ------------------------------------------------------------ internals: hooks

    async def _fail(self, exc: FatalGroupError) -> None:
        log.error("group %s: %s", self.group_id, exc)
        self.error = exc
        self.core.phase = Phase.UNJOINED
        self._answered.set()  # a commit waiting for a new epoch gives up (no deadlock below)
        await self._finish_reconciliation()
        owned = self.core.take_owned()
        if owned:
            await self._call("on_partitions_lost", list(owned))
        self._stable.set()  # wake ensure_active, which raises
        self._answered.set()

    # ------------------------------------------------------------ internals: tasks

    async def _stop_tasks(self) -> None:
        tasks = [t for t in (self._task, self._reconcile_task) if t is not None]
        self._task = self._reconcile_task = None
        await cancel_and_wait(tasks)
        self.core.reconciling = None

    async def _leave(self, reason: str) -> None:
        await self._notify(self.core.prepare_leave())
        request = self.core.leave_request()
        if request is None or not self.locator.known:
            return
        try:
            conn = await self.locator.connection()
            response = await conn.request(
                CONSUMER_GROUP_HEARTBEAT,
                request,
                timeout_s=min(5.0, self.config.request_timeout_ms / 1000.0),
            )
            if response.error_code:
                log.info(
                    "group %s: leave heartbeat answered %s",
                    self.group_id,
                    error_name(response.error_code),
                )
            else:
                log.info(
                    "group %s: member %s left with epoch %d (%s)",
                    self.group_id,
                    request.member_id,
                    request.member_epoch,
                    reason,
                )
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.info("group %s: leave heartbeat failed: %s", self.group_id, exc)

    async def _run(self) -> None:
        core = self.core
        try:
            while not self._closed and self.error is None:
                if core.phase is Phase.FENCED:
                    await self._rejoin_after_fencing()
                    continue
                self._maybe_reconcile()
                self._update_stable()
                delay = core.time_to_next_heartbeat(self.clock())
                if delay is None or delay > 0:
                    self._wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self._wakeup.wait()
                    continue
                await self._heartbeat_once()
        except FatalGroupError as exc:
            await self._fail(exc)

    def _update_stable(self) -> None:
        if self.core.stable:
            self._stable.set()
        else:
            self._stable.clear()

    async def _heartbeat_once(self) -> None:
        core = self.core
        conn = await self.locator.connection()  # FatalGroupError propagates
        try:
            version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
        except KafkaError as exc:
            raise FatalGroupError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"group {self.group_id!r}: group_protocol='consumer' needs a broker with "
                f"ConsumerGroupHeartbeat (Kafka 4.0+): {exc}",
            ) from exc
        request, token = core.heartbeat_request(self.clock(), version)
        try:
            response = await conn.request(
                CONSUMER_GROUP_HEARTBEAT,
                request,
                version=version,
                timeout_s=self.config.request_timeout_ms / 1000.0,
            )
        except asyncio.CancelledError:
            core.heartbeat_failed(self.clock(), 0.0)
            raise
        except (ConnectionClosed, OSError, KafkaError) as exc:
            self.locator.mark_unknown(f"heartbeat failed: {exc}")
            core.heartbeat_failed(self.clock(), self._next_backoff())
            return
        outcome = core.on_heartbeat_response(response, token, self.clock())
        self._answered.set()
        self._act(outcome)

    def _act(self, outcome: Outcome) -> None:
        core = self.core
        action = outcome.action
        if action is Action.OK:
            self._attempt = 0
        elif action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            core.heartbeat_failed(self.clock(), self._next_backoff())
        elif action is Action.BACKOFF:
            log.info("group %s: %s; retrying", self.group_id, outcome.reason)
            core.heartbeat_failed(self.clock(), self._next_backoff())
        elif action is Action.REJOIN:
            self._stable.clear()
        elif action is Action.FATAL:
            raise consumer_fatal_error(
                outcome.error, self.group_id, core.group_instance_id, outcome.reason
            )

    async def _finish_reconciliation(self) -> None:
        """Let a running reconciliation's hooks finish (they may be committing)."""
        task = self._reconcile_task
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._reconcile_task = None

    async def _rejoin_after_fencing(self) -> None:
        """Fenced: the partitions may already be someone else's: report them lost, rejoin."""
        self._stable.clear()
        await self._finish_reconciliation()
        lost = self.core.take_owned()
        if lost:
            await self._call("on_partitions_lost", list(lost))
        if self._closed or self.error is not None:
            return
        self.core.join()

    def _maybe_reconcile(self) -> None:
        running = self._reconcile_task
        if running is not None and not running.done():
            return
        if self.core.reconcile_due:
            self._reconcile_task = asyncio.get_running_loop().create_task(
                self._reconcile(), name=f"reconcile-{self.group_id}"
            )

    async def _reconcile(self) -> None:
        core = self.core
        try:
            if core.unresolved_topic_ids():
                await self._refresh_topic_ids()
            step = core.start_reconciliation()
            if step is None:
                return
            await self._apply(step)
        finally:
            self._wakeup.set()

    async def _refresh_topic_ids(self) -> None:
        try:
            await self.cluster.refresh_metadata(None)
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.debug("group %s: metadata refresh for topic ids failed: %s", self.group_id, exc)
        self.core.learn_topic_ids({i.topic_id: n for n, i in self.cluster.topics.items()})
        missing = self.core.unresolved_topic_ids()
        if missing:
            log.info(
                "group %s: assigned topic ids %s are not in the metadata yet; kept pending",
                self.group_id,
                sorted(str(t) for t in missing),
            )

    async def _apply(self, step: Reconciliation) -> None:
        """Revoke (commit first), then assign, then acknowledge: never two owners at once."""
        core = self.core
        log.info(
            "group %s: epoch %d: member %s reconciles to %d partition(s) (+%d -%d)",
            self.group_id,
            core.member_epoch,
            core.member_id,
            len(step.target),
            len(step.added),
            len(step.revoked),
        )
        try:
            if step.revoked:
                await self._prepare_revoke(list(step.revoked))
                await self._call("on_partitions_revoked", list(step.revoked))
            core.revocation_done(step)
            await self._call("on_partitions_assigned", list(step.added))
            self.rebalances += 1
        finally:
            core.complete_reconciliation(step)

    async def _prepare_revoke(self, revoked: list[TopicPartition]) -> None:
        """Before revoking: the facade stops handing out those records and commits."""
        hook = getattr(self.listener, "on_revoke_prepare", None)
        if hook is not None:
            await self._call("on_revoke_prepare", revoked)
        else:
            await self._call("on_join_prepare", self.core.generation)
