"""The classic group member's asyncio adapter (:class:`GroupMembership`).

One task drives joins and rebalances (finding the coordinator again, with backoff,
when it moves), another sends heartbeats every ``heartbeat_interval_ms``; both act
on what :class:`~.classic_member_core.MemberCore` decides. The adapter awaits the
facade's :class:`~.rebalance_listener.RebalanceListener` hooks in order around each
join, and raises fatal errors from :meth:`GroupMembership.ensure_active`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ..protocol.apis.describe_groups import SPEC as DESCRIBE_GROUPS
from ..protocol.apis.heartbeat import SPEC as HEARTBEAT
from ..protocol.apis.join_group import SPEC as JOIN_GROUP
from ..protocol.apis.leave_group import SPEC as LEAVE_GROUP
from ..protocol.apis.sync_group import SPEC as SYNC_GROUP
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from .assignors import RebalanceProtocol, TopicPartition
from .classic_member_core import MemberCore
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .coordinator_locator import CoordinatorLocator
from .group_errors import FatalGroupError, classic_fatal_error
from .membership_adapter import MembershipAdapter
from .membership_types import Action, Clock, Outcome
from .rebalance_listener import RebalanceListener
from .tasks import cancel_and_wait

log = logging.getLogger(__name__)

JOIN_GROUP_TIMEOUT_LAPSE_S = 5.0
"""Added to the rebalance timeout for JoinGroup/SyncGroup, which block on the coordinator."""


class _Retry(Exception):
    def __init__(self, reason: str, *, backoff: bool) -> None:
        super().__init__(reason)
        self.backoff = backoff


class GroupMembership(MembershipAdapter[MemberCore]):
    """This consumer's membership in one group, driven by background asyncio tasks.

    Typical use by a facade::

        m = GroupMembership(cluster, config, listener=my_listener)
        m.subscribe(["orders"])
        generation = await m.ensure_active()   # joined, assigned, hooks run
        ...                                     # rebalances happen in the background
        await m.close()                         # revoke hooks, LeaveGroup
    """

    def __init__(
        self,
        cluster: Cluster,
        config: ConsumerConfig,
        *,
        listener: RebalanceListener | None = None,
        locator: CoordinatorLocator | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(
            MemberCore(config), cluster, config, listener=listener, locator=locator, clock=clock
        )
        self._hb_task: asyncio.Task[None] | None = None
        self._hb_wakeup = asyncio.Event()

    # ------------------------------------------------------------ public API

    @property
    def protocol(self) -> RebalanceProtocol:
        return self.core.protocol

    @property
    def rejoin_needed(self) -> bool:
        """A rebalance is due or under way (the current assignment may be about to change)."""
        return self.core.rejoin_needed


    def request_rejoin(self, reason: str) -> None:
        self.core.request_rejoin(reason)
        self._stable.clear()
        self._wakeup.set()

    def on_commit_error(self, code: int, sent: tuple[int, str]) -> None:
        """Called by the offsets client when a commit says the membership is stale."""
        before = self.core.rejoin_needed
        self.core.on_commit_error(code, sent)
        if self.core.rejoin_needed and not before:
            self._stable.clear()
            self._wakeup.set()

    def start(self) -> None:
        """Start the background tasks (idempotent); ``ensure_active`` calls it."""
        if self._closed:
            raise RuntimeError("group membership is closed")
        if self.error is not None:
            raise self.error
        if not self.core.subscription:
            raise ValueError("subscribe to at least one topic before joining the group")
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name=f"group-{self.group_id}")
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = loop.create_task(
                self._heartbeat_loop(), name=f"heartbeat-{self.group_id}"
            )

    async def leave_group(self, reason: str = "the consumer is leaving the group") -> None:
        """Leave the group now (e.g. max_poll_interval_ms passed); ``ensure_active`` rejoins.

        The owned partitions are reported lost (revoked if the member was
        stable). Static members send no LeaveGroup (KIP-345): they keep their
        place until the session times out.
        """
        await self._stop_tasks()
        await self._leave(reason)
        self.core.reset(reason, reset_member_id=True)
        self._stable.clear()

    # ------------------------------------------------------------ internals

    def _subscription_changed(self) -> None:
        self._stable.clear()
        self._wakeup.set()

    async def _stop_tasks(self) -> None:
        tasks = [t for t in (self._task, self._hb_task) if t is not None]
        self._task = self._hb_task = None
        await cancel_and_wait(tasks)

    async def _leave(self, reason: str) -> None:
        result = self.core.prepare_leave()
        await self._notify(result)
        core = self.core
        if core.sends_leave_group and self.locator.known:
            try:
                conn = await self.locator.connection()
                response = await conn.request(
                    LEAVE_GROUP,
                    core.leave_request(reason),
                    timeout_s=min(5.0, self.config.request_timeout_ms / 1000.0),
                )
                codes = [response.error_code] + [m.error_code for m in response.members]
                bad = [c for c in codes if c]
                if bad:
                    log.info("group %s: LeaveGroup answered %s", self.group_id, error_name(bad[0]))
                else:
                    log.info("group %s: member %s left (%s)", self.group_id, core.member_id, reason)
            except (ConnectionClosed, OSError, KafkaError) as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        core.left()

    async def _fail(self, exc: FatalGroupError) -> None:
        log.error("group %s: %s", self.group_id, exc)
        self.error = exc
        owned = self.core.fail()
        if owned:
            await self._call("on_partitions_lost", list(owned))
        self._stable.set()  # wake ensure_active, which raises
        self._hb_wakeup.set()

    async def _run(self) -> None:
        try:
            while not self._closed and self.error is None:
                if self.core.rejoin_needed:
                    self._stable.clear()
                    try:
                        await self._join_once()
                        self._attempt = 0
                    except _Retry as retry:
                        if retry.backoff:
                            await self._backoff(str(retry))
                    except (ConnectionClosed, OSError) as exc:
                        self.locator.mark_unknown(str(exc))
                        self.core.join_failed(f"connection to the coordinator failed: {exc}")
                        await self._backoff(f"connection to the coordinator failed: {exc}")
                    except FatalGroupError:
                        raise
                    except KafkaError as exc:
                        if exc.code == ErrorCode.REQUEST_TIMED_OUT or exc.retriable:
                            self.locator.mark_unknown(str(exc))
                            self.core.join_failed(str(exc))
                            await self._backoff(str(exc))
                        else:
                            raise FatalGroupError(exc.code, str(exc)) from exc
                    continue
                self._stable.set()
                await self._idle()
        except FatalGroupError as exc:
            await self._fail(exc)

    async def _backoff(self, reason: str) -> None:
        delay = self._next_backoff()
        log.debug("group %s: retrying in %.3fs: %s", self.group_id, delay, reason)
        await asyncio.sleep(delay)

    async def _idle(self) -> None:
        """Stable: wait for a rejoin request, checking metadata when leading."""
        timeout = self.core.time_to_metadata_check(self.clock())
        self._wakeup.clear()
        if self.core.rejoin_needed:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()
        if self.core.metadata_check_due(self.clock()):
            await self._check_metadata()

    async def _check_metadata(self) -> None:
        try:
            infos = await self.cluster.refresh_metadata(list(self.core.leader.topics))
        except (ConnectionClosed, OSError, KafkaError) as exc:
            log.debug("group %s: metadata refresh failed: %s", self.group_id, exc)
            return
        if self.core.on_metadata({t: i.partition_count for t, i in infos.items() if i.error_code == 0}):
            self._stable.clear()
            self._wakeup.set()

    async def _join_once(self) -> None:
        core = self.core
        conn = await self.locator.connection()
        if core.needs_join_prepare:
            core.needs_join_prepare = False
            await self._call("on_join_prepare", core.generation)
            await self._notify(core.prepare_join())
        if not core.rejoin_needed:
            return
        join_timeout = max(
            self.config.request_timeout_ms / 1000.0,
            core.rebalance_timeout_ms / 1000.0 + JOIN_GROUP_TIMEOUT_LAPSE_S,
        )
        request = core.join_request()
        sent_member = core.member_id
        response = await conn.request(JOIN_GROUP, request, timeout_s=join_timeout)
        outcome = core.on_join_response(response, sent_member, self.clock())
        self._hb_wakeup.set()
        self._check(outcome)
        assignment = await self._lead() if core.is_leader else None
        sent = core.generation_key
        response = await conn.request(
            SYNC_GROUP, core.sync_request(assignment), timeout_s=join_timeout
        )
        outcome, assigned = core.on_sync_response(response, sent)
        self._check(outcome)
        assert assigned is not None
        change = core.complete_assignment(assigned, self.clock())
        self.rebalances += 1
        self._hb_wakeup.set()
        gen = core.generation
        log.info(
            "group %s: generation %d: member %s owns %d partition(s) (+%d -%d)%s",
            self.group_id,
            core.generation_id,
            core.member_id,
            len(change.assigned),
            len(change.added),
            len(change.revoked),
            "; rejoining for the second round" if change.rejoin else "",
        )
        if change.revoked:
            await self._call("on_partitions_revoked", list(change.revoked))
        await self._call("on_partitions_assigned", list(change.added))
        if core.assignment_check_due:
            await self._check_inherited_assignment()
        if gen is not None and not core.rejoin_needed:
            self._stable.set()

    def _check(self, outcome: Outcome) -> None:
        action = outcome.action
        if action is Action.OK:
            return
        if action is Action.FATAL:
            raise (
                classic_fatal_error(
                    outcome.error, self.group_id, self.core.group_instance_id, outcome.reason
                )
                if outcome.error
                else FatalGroupError(ErrorCode.UNKNOWN_SERVER_ERROR, outcome.reason)
            )
        if action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            raise _Retry(outcome.reason, backoff=True)
        raise _Retry(outcome.reason, backoff=action is Action.BACKOFF)

    async def _lead(self) -> dict[str, list[TopicPartition]] | None:
        """The leader reads the partition counts; the core assigns (or, skipping, keeps a baseline)."""
        core = self.core
        topics = core.leader_topics()
        infos = await self.cluster.refresh_metadata(topics) if topics else {}
        counts = {t: i.partition_count for t, i in infos.items() if i.error_code == 0}
        assignment = core.leader_assignment(counts)
        if assignment is None:
            return None
        log.info(
            "group %s: leader assigned %d partition(s) of %s to %d member(s) with %s",
            self.group_id,
            sum(len(v) for v in assignment.values()),
            topics,
            len(assignment),
            core.protocol_name,
        )
        return assignment

    async def _check_inherited_assignment(self) -> None:
        """A static leader that skipped the assignment, or a static follower's first
        assignment: read the group's (DescribeGroups) and the partition counts; the core
        rejoins if anything subscribed is left unowned."""
        core = self.core
        request, sent = core.describe_request()
        try:
            conn = await self.locator.connection()
            response = await conn.request(
                DESCRIBE_GROUPS, request, timeout_s=self.config.request_timeout_ms / 1000.0
            )
            described = core.on_describe_response(response, sent)
            if described is None:
                return
            infos = await self.cluster.refresh_metadata(described.topics)
        except (ConnectionClosed, OSError, KafkaError) as exc:
            core.assignment_check_failed(str(exc), sent)
            return
        counts = {t: i.partition_count for t, i in infos.items() if i.error_code == 0}
        gaps = core.check_assignment(described, counts, sent)
        if gaps:
            log.info(
                "group %s: the assignment inherited by static leader %s misses %s; rebalancing",
                self.group_id,
                core.member_id,
                gaps,
            )

    async def _heartbeat_loop(self) -> None:
        core = self.core
        while not self._closed and self.error is None:
            now = self.clock()
            delay = core.time_to_next_heartbeat(now)
            if delay is None or delay > 0:
                self._hb_wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._hb_wakeup.wait()
                continue
            if core.session_expired(now):
                self.locator.mark_unknown("no heartbeat answer within the session timeout")
            try:
                conn = await self.locator.connection()
            except FatalGroupError as exc:
                await self._fail(exc)
                return
            if core.time_to_next_heartbeat(self.clock()) != 0.0:
                continue
            request, sent = core.heartbeat_request(self.clock())
            try:
                response = await conn.request(
                    HEARTBEAT, request, timeout_s=self.config.request_timeout_ms / 1000.0
                )
            except asyncio.CancelledError:
                core.heartbeat_failed(self.clock())
                raise
            except (ConnectionClosed, OSError, KafkaError) as exc:
                core.heartbeat_failed(self.clock())
                self.locator.mark_unknown(f"heartbeat failed: {exc}")
                continue
            outcome = core.on_heartbeat_response(response, sent, self.clock())
            if outcome.action is Action.REDISCOVER:
                self.locator.mark_unknown(outcome.reason)
            elif outcome.action is Action.REJOIN:
                self._stable.clear()
                self._wakeup.set()
            elif outcome.action is Action.FATAL:
                if self._task is not None:
                    self._task.cancel()
                await self._fail(
                    classic_fatal_error(
                        outcome.error, self.group_id, core.group_instance_id, outcome.reason
                    )
                )
                return
