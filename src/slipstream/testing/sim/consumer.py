"""A consumer-protocol (KIP-848) member: the client's real ``ConsumerMemberCore`` driven by events.

This is ``ConsumerGroupMembership`` (the asyncio adapter in
``client/consumer_membership.py``) turned inside out, as ``classic.py`` is for the
classic member: its ``_run`` loop (rejoin after fencing, start a reconciliation,
heartbeat when due) becomes continuation callbacks on the event queue, with the same
calls into the core in the same order. Two differences, both about time:

- the reconciliation runs inside the step that starts it (the hooks take no
  simulated time). On a revocation this member commits what it processed, on the
  same connection, so the commit reaches the coordinator before the heartbeat that
  acknowledges the revocation (per-connection order), as the facade's awaited
  commit does;
- topic ids the core cannot name are looked up in the cluster's topics at once
  (the adapter refreshes its metadata).

The core has no lease: a member that stops hearing from the coordinator keeps its
partitions until an answer fences it (as Kafka's consumers do). The ownership
invariant therefore only counts members the coordinator still has (see
``invariants.consumer_ownership``); commits of the others must be refused.
"""

from __future__ import annotations

import math
from typing import Any

from ...client.consumer_config import ConsumerConfig
from ...client.consumer_member_core import ConsumerMemberCore, Phase, Reconciliation
from ...client.membership_types import Action, Outcome
from .events import Event
from .members import REQUEST_TIMEOUT_MS, Credentials, MemberWorld, SimMember, TopicPartition
from .network import Connection

HEARTBEAT_VERSION = 1  # v1: the member names itself (KIP-1082), regexes allowed

_NOTHING: set[TopicPartition] = set()


class ConsumerMember(SimMember):
    protocol = "consumer"

    def __init__(
        self, world: MemberWorld, slot: int, incarnation: int, topics: list[str], instance_id: str | None
    ) -> None:
        super().__init__(world, slot, incarnation, topics, instance_id)
        t = world.timing
        self.config = ConsumerConfig(
            group_id=world.group_of(slot),
            client_id=self.label,
            group_protocol="consumer",
            group_instance_id=instance_id,
            group_remote_assignor=world.setup.server_assignor,
            max_poll_interval_ms=t.rebalance_ms,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        ).validate()
        self.core = ConsumerMemberCore(self.config, member_id=f"{self.label}-{world.seed & 0xFFFF:04x}")
        self.use_regex = world.setup.regex
        self._topics: tuple[str, ...] = ()
        self._set_subscription(topics)
        self._run_event: Event | None = None
        self._attempt = 0
        self.fatal: int | None = None

    # ------------------------------------------------------------ what the world reads

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def epoch(self) -> int:
        return self.core.member_epoch

    def held(self) -> set[TopicPartition]:
        return _NOTHING if self.gone else self.core.owned

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._topics

    def commit_credentials(self) -> Credentials | None:
        gen = self.core.generation
        if gen is None:
            return None
        return Credentials(gen.member_id, gen.generation_id)

    def fetch_identity(self) -> tuple[str | None, int]:
        return self.core.member_id, self.core.member_epoch

    # ------------------------------------------------------------ lifecycle

    def _set_subscription(self, topics: list[str]) -> bool:
        self._topics = tuple(sorted(set(topics)))
        if self.use_regex:
            # A pattern that matches exactly these names, resolved by the coordinator (RE2).
            return self.core.subscribe_pattern("|".join(self._topics))
        return self.core.subscribe(self._topics)

    def start(self) -> None:
        super().start()
        self.core.join()
        self._wake()

    def subscribe(self, topics: list[str]) -> None:
        if not self.gone and not self.closing and self._set_subscription(topics):
            self._wake()

    def crash(self) -> None:
        if self._run_event is not None:
            self._run_event.cancel()
        super().crash()

    def leave(self) -> None:
        """``ConsumerGroupMembership.close()``: revoke (commit) or lose, then the leave heartbeat."""
        if self.gone or self.closing:
            return
        self.closing = True
        if self._run_event is not None:
            self._run_event.cancel()
        creds = self.commit_credentials()
        result = self.core.prepare_leave()
        if result.kind == "revoked" and creds is not None:
            self._process(result.partitions)
            self.commit(result.partitions, creds, releasing=True)
        self.partitions_removed(result.partitions)
        request = self.core.leave_request()
        conn = self.locator.conn
        if request is None or conn is None or not conn.open:
            self._closed()
            return
        self.world.network.request(
            conn, "consumer_group_heartbeat", HEARTBEAT_VERSION, request,
            lambda _r: self._closed(), lambda _w: self._closed(), 5_000,
        )

    def _closed(self) -> None:
        self.world.touch(self)
        self.gone = True
        self.locator.close()

    def on_commit_error(self, code: int, creds: Credentials) -> None:
        if self.core.on_commit_error(code, (creds.generation, creds.member_id)):
            self._wake()

    # ------------------------------------------------------------ the run loop

    def _wake(self, delay_ms: int = 0) -> None:
        if self.gone or self.closing:
            return
        if self._run_event is not None:
            self._run_event.cancel()
        self._run_event = self.after(delay_ms, "cg run tick", self._step)

    def _step(self) -> None:
        """One turn of ``ConsumerGroupMembership._run``."""
        self._run_event = None
        if self.closing:
            return
        core = self.core
        if core.phase is Phase.FENCED:
            lost = core.take_owned()
            self.partitions_removed(lost)
            core.join()
        self._maybe_reconcile()
        now_s = self.now / 1000.0
        delay = core.time_to_next_heartbeat(now_s)
        if delay is None:
            return  # woken by the answer, a failure or a subscription change
        if delay > 0:
            self._run_event = self.after(max(1, math.ceil(delay * 1000)), "cg run tick", self._step)
            return
        self.locator.connection(self.guard(self._connected))

    def _connected(self, conn: Connection) -> None:
        core = self.core
        if self.closing or core.time_to_next_heartbeat(self.now / 1000.0) != 0.0:
            return
        request, token = core.heartbeat_request(self.now / 1000.0, HEARTBEAT_VERSION)
        self.send(
            conn,
            "consumer_group_heartbeat",
            HEARTBEAT_VERSION,
            request,
            lambda r: self._on_response(r, token),
            self._failed,
            REQUEST_TIMEOUT_MS,
        )

    def _failed(self, reason: str) -> None:
        if self.closing:
            return
        self.locator.mark_unknown(f"heartbeat failed: {reason}")
        self.core.heartbeat_failed(self.now / 1000.0, self._next_backoff_s())
        self._wake()

    def _on_response(self, response: Any, token: int) -> None:
        if self.closing:
            return
        outcome = self.core.on_heartbeat_response(response, token, self.now / 1000.0)
        self._act(outcome)
        if not self.gone:
            self._wake()

    def _act(self, outcome: Outcome) -> None:
        """``ConsumerGroupMembership._act``."""
        core = self.core
        action = outcome.action
        if action is Action.OK:
            self._attempt = 0
        elif action is Action.REDISCOVER:
            self.locator.mark_unknown(outcome.reason)
            core.heartbeat_failed(self.now / 1000.0, self._next_backoff_s())
        elif action is Action.BACKOFF:
            core.heartbeat_failed(self.now / 1000.0, self._next_backoff_s())
        elif action is Action.FATAL:
            self._fail(outcome.error, outcome.reason)

    def _next_backoff_s(self) -> float:
        delay = self.backoff_ms(self._attempt) / 1000.0
        self._attempt += 1
        return delay

    def _fail(self, code: int, reason: str) -> None:
        self.fatal = code
        self.world.member_failed(self, code, f"ConsumerGroupHeartbeat: {reason}")
        self.core.phase = Phase.UNJOINED
        self.partitions_removed(self.core.take_owned())
        self._closed()

    # ------------------------------------------------------------ reconciliation

    def _maybe_reconcile(self) -> None:
        core = self.core
        if not core.reconcile_due or core.reconciling is not None:
            return
        if core.unresolved_topic_ids():
            core.learn_topic_ids(self.world.topics.current_names_by_id())
        step = core.start_reconciliation()
        if step is not None:
            self._apply(step)

    def _apply(self, step: Reconciliation) -> None:
        """``ConsumerGroupMembership._apply``: revoke (commit first), assign, acknowledge."""
        core = self.core
        if step.revoked:
            self._process(step.revoked)
            self.commit(step.revoked, Credentials(core.member_id, core.member_epoch), releasing=True)
            self.partitions_removed(step.revoked)
        core.revocation_done(step)
        core.complete_reconciliation(step)
        self.partitions_added(list(step.added))
