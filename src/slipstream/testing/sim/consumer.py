"""A consumer-protocol (KIP-848) member: a ``ConsumerProtocolCore`` driven by events.

One loop: heartbeat when due (or at once when the core has something to
acknowledge), apply the answer, back off on retriable errors, rejoin at once when
fenced. Before a revocation is acknowledged the member commits the revoked
partitions' positions on the same connection, so the commit reaches the coordinator
before the heartbeat that releases them (per-connection order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from .consumer_core import Applied, ConsumerProtocolCore, Reaction, SimConsumerCore
from .events import Event
from .members import REQUEST_TIMEOUT_MS, Credentials, SimMember, TopicPartition
from .network import Connection
from .topics import topic_id

if TYPE_CHECKING:
    from .world import World

# Unexpected answers for a well-behaved member: the coordinator (or this core) is wrong.
UNEXPECTED_FATAL = frozenset(
    {
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)


_NOTHING: set[TopicPartition] = set()


class ConsumerMember(SimMember):
    protocol = "consumer"

    def __init__(
        self, world: World, slot: int, incarnation: int, topics: list[str], instance_id: str | None
    ) -> None:
        super().__init__(world, slot, incarnation, topics, instance_id)
        t = world.timing
        self.core: ConsumerProtocolCore = SimConsumerCore(
            world.group_id,
            member_id=f"{self.label}-{world.seed & 0xFFFF:04x}",
            instance_id=instance_id,
            topics=topics,
            rebalance_timeout_ms=t.rebalance_ms,
            session_timeout_ms=t.consumer_session_ms,
            topic_ids={n: topic_id(n) for n in world.topics.names},
            lean=world.setup.lean,
            use_regex=world.setup.regex,
            server_assignor=world.setup.server_assignor,
        )
        self._hb_event: Event | None = None
        self._lease_event: Event | None = None
        self._in_flight = False
        self._attempt = 0
        self._resets = 0  # lease expiries: answers to heartbeats sent before one are stale
        self.fatal: int | None = None

    # ------------------------------------------------------------ what the world reads

    def held(self) -> set[TopicPartition]:
        # The core rebinds ``owned`` on every change, never mutates it: no copy needed.
        return _NOTHING if self.gone else self.core.owned

    def lease_valid(self, now_ms: int) -> bool:
        lease = getattr(self.core, "lease_until_ms", None)
        return lease is None or now_ms < lease

    @property
    def subscription(self) -> tuple[str, ...]:
        return self.core.subscription

    def commit_credentials(self) -> Credentials | None:
        if self.core.epoch <= 0:
            return None
        return Credentials(self.core.member_id, self.core.epoch)

    def fetch_identity(self) -> tuple[str | None, int]:
        return self.core.member_id, self.core.epoch

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        super().start()
        self._wake()

    def subscribe(self, topics: list[str]) -> None:
        if not self.gone and not self.closing and self.core.subscribe(topics):
            self._wake()

    def on_resume(self) -> None:
        self._check_lease()

    def crash(self) -> None:
        for event in (self._hb_event, self._lease_event):
            if event is not None:
                event.cancel()
        super().crash()

    def leave(self) -> None:
        if self.gone or self.closing:
            return
        self.closing = True
        for event in (self._hb_event, self._lease_event):
            if event is not None:
                event.cancel()
        held = sorted(self.core.owned)
        creds = self.commit_credentials()
        if held and creds is not None:
            self._process(held)
            self.commit(held, creds, releasing=True)
        self.partitions_removed(held)
        request = self.core.leave_request()
        conn = self.locator.conn
        if conn is None or not conn.open:
            self._closed()
            return
        self.world.network.request(
            conn, "consumer_group_heartbeat", 1, request, lambda _r: self._closed(), lambda _w: self._closed(), 5_000
        )

    def _closed(self) -> None:
        self.gone = True
        self.locator.close()

    # ------------------------------------------------------------ the heartbeat loop

    def _wake(self, delay_ms: int = 0) -> None:
        if self.gone or self.closing or self._in_flight:
            return
        if self._hb_event is not None:
            self._hb_event.cancel()
        self._hb_event = self.after(delay_ms, "cg heartbeat tick", self._tick)

    def _tick(self) -> None:
        self._hb_event = None
        if self.closing or self._in_flight:
            return
        self._in_flight = True
        self.locator.connection(self.guard(self._connected))

    def _connected(self, conn: Connection) -> None:
        if self.closing:
            return
        self._check_lease()
        sent_ms = self.now
        request = self.core.heartbeat_request(sent_ms)
        resets = self._resets
        self.send(
            conn,
            "consumer_group_heartbeat",
            1,
            request,
            lambda r: self._on_response(r, sent_ms, resets),
            self._failed,
            REQUEST_TIMEOUT_MS,
        )

    def _failed(self, reason: str) -> None:
        self._in_flight = False
        if self.closing:
            return
        self.core.on_failure()
        self.locator.mark_unknown(reason)
        self._backoff()

    def _backoff(self) -> None:
        delay = self.backoff_ms(self._attempt)
        self._attempt += 1
        self._wake(delay)

    def _on_response(self, response: Any, sent_ms: int, resets: int) -> None:
        self._in_flight = False
        if self.closing:
            return
        if resets != self._resets:
            # The member gave everything up (lease ran out) after sending this: the answer
            # is about a membership it abandoned. Heartbeat again (a join) instead.
            self._wake()
            return
        self.world.coverage.error("ConsumerGroupHeartbeat", response.error_code)
        applied: Applied = self.core.on_response(response, sent_ms, self.world.topics.names_by_id)
        if applied.revoked:
            # Commit what was processed, then release: the commit is ahead of the next heartbeat.
            self._process(applied.revoked)
            self.commit(applied.revoked, Credentials(self.core.member_id, self._revoking_epoch(response)), True)
            self.partitions_removed(applied.revoked)
        if applied.lost:
            self.partitions_removed(applied.lost)
        if applied.added:
            self.partitions_added(applied.added)
        reaction = applied.reaction
        if reaction is Reaction.OK:
            self._attempt = 0
            self._arm_lease()
            self._wake(self.core.next_heartbeat_ms())
        elif reaction is Reaction.REJOIN:
            self._wake()
        elif reaction is Reaction.BACKOFF:
            self._backoff()
        else:
            self.fatal = applied.error
            self.world.member_failed(self, applied.error, f"ConsumerGroupHeartbeat: {applied.error}")
            self._closed()

    @staticmethod
    def _revoking_epoch(response: Any) -> int:
        # A revocation leaves the member at its epoch until it acknowledges: commit with it.
        return int(response.member_epoch)

    # ------------------------------------------------------------ the lease

    def _arm_lease(self) -> None:
        lease = getattr(self.core, "lease_until_ms", None)
        if lease is None:
            return
        if self._lease_event is not None:
            self._lease_event.cancel()
        self._lease_event = self.world.queue.at(lease, f"{self.label} lease check", self._lease_due)

    def _lease_due(self) -> None:
        # Not guarded: a paused process does not consume, and ``held`` already says nothing
        # once the lease ran out; the member notices (and rejoins) when it resumes.
        self._lease_event = None
        if self.gone or self.paused:
            return
        self._check_lease()

    def _check_lease(self) -> None:
        lost = self.core.lease_expired(self.now)
        if lost is None:
            return
        self.world.coverage.member_state("consumer", "lease-expired")
        self._resets += 1
        self.partitions_removed(lost)
        if not self._in_flight:
            self._wake()
