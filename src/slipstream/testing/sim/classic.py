"""A classic-protocol member: the real ``MemberCore`` driven from the simulator's events.

This is ``GroupMembership`` (the asyncio adapter in ``client/classic_membership.py``) turned
inside out: its two tasks, ``_run`` (join, lead, sync, back off, idle with the
leader's metadata watch) and ``_heartbeat_loop``, become continuation callbacks on
the event queue, with the same calls into the core in the same order. Only the
listener hooks differ: on a revocation this member commits what it processed (as the
consumer facade does) and stops processing; on a loss it just stops.
"""

from __future__ import annotations

import math
from typing import Any

from ...client.classic_member_core import MemberCore
from ...client.consumer_config import ConsumerConfig
from ...client.membership_types import Action, Outcome, PrepareResult
from ...protocol.errors import ErrorCode
from .events import Event
from .members import REQUEST_TIMEOUT_MS, Credentials, MemberWorld, SimMember, TopicPartition
from .network import Connection

# Same margin as the client's JOIN_GROUP_TIMEOUT_LAPSE_S.
JOIN_TIMEOUT_LAPSE_MS = 5_000


class ClassicMember(SimMember):
    protocol = "classic"

    def __init__(
        self,
        world: MemberWorld,
        slot: int,
        incarnation: int,
        topics: list[str],
        instance_id: str | None,
        assignors: list[str],
    ) -> None:
        super().__init__(world, slot, incarnation, topics, instance_id)
        t = world.timing
        self.config = ConsumerConfig(
            group_id=world.group_of(slot),
            client_id=self.label,
            group_instance_id=instance_id,
            session_timeout_ms=t.session_ms,
            heartbeat_interval_ms=t.heartbeat_ms,
            rebalance_timeout_ms=t.rebalance_ms,
            partition_assignment_strategy=list(assignors),
            metadata_max_age_ms=t.metadata_max_age_ms,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        ).validate()
        self.core = MemberCore(self.config)
        self.core.subscribe(topics)
        self.join_timeout_ms = max(REQUEST_TIMEOUT_MS, t.rebalance_ms + JOIN_TIMEOUT_LAPSE_MS)
        self._run_busy = False
        self._run_event: Event | None = None
        self._attempt = 0
        self._hb_event: Event | None = None
        self._hb_waiting = False
        self.rebalances = 0
        self.fatal: int | None = None
        # For the diagnosis: the subscription the last JoinGroup carried, and whether this
        # member last came back as a static leader told to skip the assignment.
        self.joined_subscription: tuple[str, ...] = ()
        self.skipped_assignment = False

    # ------------------------------------------------------------ what the world reads

    def held(self) -> set[TopicPartition]:
        return set() if self.gone else set(self.core.owned)

    @property
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription

    def commit_credentials(self) -> Credentials | None:
        gen = self.core.generation
        if gen is None:
            return None  # like the consumer: commits go out with a stable generation only
        return Credentials(gen.member_id, gen.generation_id)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        super().start()
        self._run_wake()
        self._hb_wake()

    def subscribe(self, topics: list[str]) -> None:
        if self.gone or self.closing:
            return
        if self.core.subscribe(topics):
            self._run_wake()

    def leave(self) -> None:
        """``GroupMembership.close()``: revoke (commit) or lose, then LeaveGroup for dynamic members."""
        if self.gone or self.closing:
            return
        self.closing = True
        self._cancel_tasks()
        result = self.core.prepare_leave()
        self._notify(result)
        core = self.core
        if core.sends_leave_group and self.locator.known:
            conn = self.locator.conn
            assert conn is not None
            request = core.leave_request("the consumer is being closed")
            self.world.network.request(
                conn, "leave_group", 5, request, lambda _r: self._closed(), lambda _why: self._closed(), 5_000
            )
        else:
            self._closed()
        core.left()

    def _closed(self) -> None:
        self.world.touch(self)
        self.gone = True
        self.locator.close()

    def crash(self) -> None:
        self._cancel_tasks()
        super().crash()

    def _cancel_tasks(self) -> None:
        for event in (self._run_event, self._hb_event):
            if event is not None:
                event.cancel()
        self._run_event = self._hb_event = None

    def _fail(self, code: int, reason: str) -> None:
        self.fatal = code
        self.world.member_failed(self, code, reason)
        self.partitions_removed(self.core.fail())
        self._cancel_tasks()
        self._closed()

    # ------------------------------------------------------------ listener hooks

    def _notify(self, result: PrepareResult) -> None:
        if result.kind == "revoked":
            self._revoke(result.partitions)
        elif result.kind == "lost":
            self.partitions_removed(result.partitions)

    def _revoke(self, tps: tuple[TopicPartition, ...] | list[TopicPartition]) -> None:
        # The facade commits the revoked partitions' positions before giving them up. The
        # core already dropped them from ``owned``, so commit with the positions we kept.
        creds = Credentials(self.core.member_id, self.core.generation_id)
        self._commit_revoked(list(tps), creds)
        self.partitions_removed(tps)

    def _commit_revoked(self, tps: list[TopicPartition], creds: Credentials) -> None:
        if creds.generation >= 0 and creds.member_id:
            self._process(tps)
            self.commit(tps, creds, releasing=True)

    def on_commit_error(self, code: int, creds: Credentials) -> None:
        before = self.core.rejoin_needed
        self.core.on_commit_error(code, (creds.generation, creds.member_id))
        if self.core.rejoin_needed and not before:
            self._run_wake()

    # ------------------------------------------------------------ the run task

    def _run_wake(self) -> None:
        if self.gone or self.closing or self._run_busy:
            return
        if self._run_event is not None:
            self._run_event.cancel()
        self._run_event = self.after(0, "run", self._run_step)

    def _run_step(self) -> None:
        self._run_event = None
        if self.closing or self._run_busy:
            return
        core = self.core
        if core.rejoin_needed:
            self._run_busy = True
            self.locator.connection(self.guard(self._join_connected))
            return
        # Stable: idle until woken, the leader re-reading partition counts on a timer.
        delay = core.time_to_metadata_check(self.now / 1000.0)
        if delay is not None:
            self._run_event = self.after(max(1, math.ceil(delay * 1000)), "metadata check", self._metadata_due)

    def _metadata_due(self) -> None:
        self._run_event = None
        core = self.core
        if core.metadata_check_due(self.now / 1000.0):
            core.on_metadata(self.world.partition_counts(list(core.leader.topics)))
        self._run_wake()

    def _join_connected(self, conn: Connection) -> None:
        if self.closing:
            return
        core = self.core
        if core.needs_join_prepare:
            core.needs_join_prepare = False
            self._notify(core.prepare_join())
        if not core.rejoin_needed:
            self._join_done()
            return
        request = core.join_request()
        self.joined_subscription = core.subscription
        sent_member = core.member_id
        self.send(
            conn,
            "join_group",
            9,
            request,
            lambda r: self._on_join(conn, r, sent_member),
            self._join_connection_failed,
            self.join_timeout_ms,
        )

    def _on_join(self, conn: Connection, response: Any, sent_member: str) -> None:
        if self.closing:
            return
        core = self.core
        outcome = core.on_join_response(response, sent_member, self.now / 1000.0)
        self._hb_wake()
        if not self._check(outcome):
            return
        self.skipped_assignment = core.is_leader and core.leader.skip_assignment
        assignment = core.leader_assignment(self.world.partition_counts(core.leader_topics()))
        sent = core.generation_key
        self.send(
            conn,
            "sync_group",
            5,
            core.sync_request(assignment),
            lambda r: self._on_sync(conn, r, sent),
            self._join_connection_failed,
            self.join_timeout_ms,
        )

    def _on_sync(self, conn: Connection, response: Any, sent: tuple[int, str]) -> None:
        if self.closing:
            return
        core = self.core
        outcome, assigned = core.on_sync_response(response, sent)
        if not self._check(outcome):
            return
        assert assigned is not None
        change = core.complete_assignment(assigned, self.now / 1000.0)
        self.rebalances += 1
        self._hb_wake()
        if change.revoked:
            self._commit_revoked(list(change.revoked), Credentials(core.member_id, core.generation_id))
            self.partitions_removed(change.revoked)
        self.partitions_added(list(change.added))
        self.world.coverage.member_state("classic", core.state.value)
        if core.assignment_check_due:
            self._check_inherited_assignment(conn)
            return
        self._join_done()

    def _check_inherited_assignment(self, conn: Connection) -> None:
        """``GroupMembership._check_inherited_assignment``: a static leader that skipped the
        assignment, or a static follower's first assignment, reads the group's back and
        rebalances if it leaves something unowned."""
        core = self.core
        request, sent = core.describe_request()

        def described(response: Any) -> None:
            if self.closing:
                return
            group = core.on_describe_response(response, sent)
            if group is None:
                outcome = "rebalanced (unverified)" if core.rejoin_needed else "dropped"
            else:
                gaps = core.check_assignment(group, self.world.partition_counts(group.topics), sent)
                outcome = "rebalanced (gaps)" if gaps else "kept"
            self.world.coverage.action(f"static-check:{outcome}")
            self._join_done()

        def failed(reason: str) -> None:
            if self.closing:
                return
            self.locator.mark_unknown(reason)
            core.assignment_check_failed(reason, sent)
            self._retry(backoff=True)

        self.send(conn, "describe_groups", 5, request, described, failed)

    def _join_done(self) -> None:
        self._attempt = 0
        self._run_busy = False
        self._run_wake()

    def _check(self, outcome: Outcome) -> bool:
        action = outcome.action
        if action is Action.OK:
            return True
        if action is Action.FATAL:
            self._run_busy = False
            self._fail(outcome.error or ErrorCode.UNKNOWN_SERVER_ERROR, outcome.reason)
            return False
        if action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            self._retry(backoff=True)
            return False
        self._retry(backoff=action is Action.BACKOFF)
        return False

    def _retry(self, *, backoff: bool) -> None:
        if not backoff:
            self._run_busy = False
            self._run_wake()
            return
        delay = self.backoff_ms(self._attempt)
        self._attempt += 1

        def done() -> None:
            self._run_busy = False
            self._run_wake()

        self.after(delay, "join backoff", done)

    def _join_connection_failed(self, reason: str) -> None:
        if self.closing:
            return
        self.locator.mark_unknown(reason)
        self.core.join_failed(reason)
        self._retry(backoff=True)

    # ------------------------------------------------------------ the heartbeat task

    def _hb_wake(self, delay_ms: int = 0) -> None:
        if self.gone or self.closing or self._hb_waiting:
            return
        if self._hb_event is not None:
            self._hb_event.cancel()
        self._hb_event = self.after(delay_ms, "heartbeat tick", self._hb_step)

    def _hb_step(self) -> None:
        self._hb_event = None
        if self.closing or self._hb_waiting:
            return
        core = self.core
        now_s = self.now / 1000.0
        delay = core.time_to_next_heartbeat(now_s)
        if delay is None:
            return  # woken again after a join or an assignment
        if delay > 0:
            self._hb_wake(max(1, math.ceil(delay * 1000)))
            return
        if core.session_expired(now_s):
            self.locator.mark_unknown("no heartbeat answer within the session timeout")
        self._hb_waiting = True
        self.locator.connection(self.guard(self._hb_connected))

    def _hb_connected(self, conn: Connection) -> None:
        self._hb_waiting = False
        if self.closing:
            return
        core = self.core
        if core.time_to_next_heartbeat(self.now / 1000.0) != 0.0:
            self._hb_wake()
            return
        request, sent = core.heartbeat_request(self.now / 1000.0)
        self.send(
            conn,
            "heartbeat",
            4,
            request,
            lambda r: self._on_heartbeat(r, sent),
            self._heartbeat_failed,
            REQUEST_TIMEOUT_MS,
        )

    def _heartbeat_failed(self, reason: str) -> None:
        if self.closing:
            return
        self.core.heartbeat_failed(self.now / 1000.0)
        self.locator.mark_unknown(f"heartbeat failed: {reason}")
        self._hb_wake()

    def _on_heartbeat(self, response: Any, sent: tuple[int, str]) -> None:
        if self.closing:
            return
        outcome = self.core.on_heartbeat_response(response, sent, self.now / 1000.0)
        if outcome.action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
        elif outcome.action is Action.REJOIN:
            self._run_wake()
        elif outcome.action is Action.FATAL:
            self._fail(outcome.error, outcome.reason)
            return
        self._hb_wake()
