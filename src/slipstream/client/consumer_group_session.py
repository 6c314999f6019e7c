"""A consumer-group session and its claims: what ``ConsumerGroup.consume`` hands the handler.

A :class:`ConsumerGroupSession` holds this member's claims from ``setup`` to
``cleanup`` and the offsets the handler marked (:mod:`.consumer_offset_marks`); a
:class:`ConsumerGroupClaim` is one partition, read through ``claim.messages()``,
which pulls from the fetcher's buffer only when the handler asks for the next
message (backpressure: a partition whose buffer is full, and not drained for
``max_processing_time_ms``, is not fetched, without holding up the others).
:class:`~.consumer_group.ConsumerGroup` starts, revokes and ends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from ..protocol.errors import ErrorCode, KafkaError
from .assignors import TopicPartition
from .consumer_config import ConsumerConfig
from .consumer_membership import ConsumerGroupMembership
from .consumer_messages import Message
from .consumer_offset_marks import FOLD_AT, OffsetMarks, as_offsets
from .fetcher import Fetcher
from .membership_factory import AnyMembership
from .membership_types import Generation, MemberState
from .offsets import GroupOffsets, OffsetAndMetadata
from .serde import RecordDeserializers

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroupClaim", "ConsumerGroupSession", "SessionHost"]

# The claim whose consume_claim task (or a task it started) is running: lets
# ``session.ended`` answer per claim, so a revoked claim's iterator ends alone.
_CURRENT_CLAIM: contextvars.ContextVar[ConsumerGroupClaim | None] = contextvars.ContextVar(
    "slipstream_consumer_group_claim", default=None
)
_REJOINING = (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)


class SessionHost(Protocol):
    """What a session uses of its :class:`~.consumer_group.ConsumerGroup`."""

    group_id: str
    config: ConsumerConfig
    _fetcher: Fetcher
    _membership: AnyMembership
    _offsets: GroupOffsets

    def _handed_out(self, count: int) -> None:
        """Count records given to a claim (statistics)."""


class ConsumerGroupClaim:
    """One partition claimed by this member, from its assignment until it is revoked or the session ends."""

    def __init__(
        self, session: ConsumerGroupSession, topic: str, partition: int, initial_offset: int
    ) -> None:
        self.session = session
        self.topic = topic
        self.partition = partition
        self.initial_offset = initial_offset
        """The offset consumption started from (committed offset, or the reset position)."""
        self._high_watermark: int | None = None
        self._iterating = False
        self._stopped = asyncio.Event()
        # Mirrors _stopped as a plain attribute: messages() reads it once per message.
        self._over = False
        self.revoked = False
        """A cooperative rebalance revoked this claim alone; the session goes on without it."""

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def stopped(self) -> bool:
        """The claim is over (revoked, or its session ended): ``messages()`` ends, return soon."""
        return self._over or self.session._ended.is_set()

    def _stop(self) -> None:
        self._over = True
        self._stopped.set()

    async def wait_stopped(self) -> None:
        """Wait until the claim is revoked or its session ends."""
        await self._stopped.wait()

    @property
    def high_watermark_offset(self) -> int | None:
        """The partition's high watermark as of the latest fetch (None before the first)."""
        with contextlib.suppress(KeyError):
            hw = self.session._fetcher.highwater(self.tp)
            if hw is not None:
                self._high_watermark = hw
        return self._high_watermark

    async def messages(self) -> AsyncIterator[Message]:
        """The partition's messages in offset order; ends when the claim is revoked or
        the session ends (whichever task drives the iterator).

        Only pulls from the fetcher's buffer when the handler asks for the next
        message, so a slow handler stops its partition from being fetched.
        """
        if self._iterating:
            raise RuntimeError(f"{self.topic}-{self.partition}: messages() is already iterated")
        self._iterating = True
        session = self.session
        ended = session._ended
        fetcher = session._fetcher
        limit = session._config.max_poll_records
        deserializers = RecordDeserializers(session._config.key_deserializer, session._config.value_deserializer)
        tp = self.tp
        try:
            # The claim's own flag, not session.ended: that one answers per claim only
            # inside the claim's task (context variable), and costs a lookup per message.
            # An async generator over a local list is the cheapest per-message step
            # (measured below a hand-written __anext__, which must build an awaitable).
            while not (self._over or ended.is_set()):
                # One decoded batch at a time (at most max_poll_records of it): what
                # this iterator holds stays small, the rest stays counted in the
                # fetcher's buffer (and its backpressure). Records come decoded as
                # Messages already.
                records = await fetcher.fetch_partition(tp, limit, 0.5, one_batch=True)
                if records:
                    session._group._handed_out(len(records))
                    if deserializers.active:
                        records = deserializers.apply_all(records)
                for msg in records:
                    if self._over:  # set with session end too (ConsumerGroupSession._end)
                        return
                    yield msg
        finally:
            self._iterating = False

    def __repr__(self) -> str:
        return f"ConsumerGroupClaim({self.topic}-{self.partition}, initial_offset={self.initial_offset})"


class ConsumerGroupSession:
    """This member's claims from ``setup`` to ``cleanup``, and the offsets it marked.

    With an EAGER protocol a session is one generation. With a COOPERATIVE one
    it spans generations: ``generation`` / ``generation_id`` follow the
    membership (commits use the current one) and ``claims`` changes as
    partitions are revoked and assigned incrementally.
    """

    def __init__(
        self,
        group: SessionHost,
        generation: Generation,
    ) -> None:
        self._group = group
        self._config = group.config
        self._fetcher = group._fetcher
        self.generation = generation
        self.generation_id = generation.generation_id
        self.member_id = generation.member_id
        # Partitions the session holds: a revoked one leaves at once, an assigned one joins.
        self._owned: set[TopicPartition] = set(generation.assignment)
        # Live claims, including revoked ones still winding down (their marks still count).
        self._claims: dict[TopicPartition, ConsumerGroupClaim] = {}
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        self.claims: dict[str, list[int]] = {}
        """topic -> the partitions this session holds now."""
        self._update_claims()
        self._marks = OffsetMarks(self._claims)
        # Serialises commits: offsets sent in mark order, never backwards.
        self._commit_lock = asyncio.Lock()
        self._ended = asyncio.Event()
        self._finished = asyncio.Event()
        self._setup_done = False
        self._handler: Any = None
        self._errors: list[BaseException] = []
        self._reaped: set[asyncio.Task[None]] = set()
        self.end_reason: str | None = None
        self.lost = False
        """The partitions were lost (not revoked): the final commit is skipped."""

    @property
    def ended(self) -> bool:
        """The session is ending: claims' iterators stop, handlers should return.

        Read inside a claim's ``consume_claim`` (or a task it started), it is
        also true once that claim alone is revoked by a cooperative rebalance.
        """
        if self._ended.is_set():
            return True
        claim = _CURRENT_CLAIM.get()
        return claim is not None and claim.session is self and claim._stopped.is_set()

    async def wait_ended(self) -> None:
        """Wait until the session ends (sarama's ``Context().Done()``); per claim as ``ended``."""
        claim = _CURRENT_CLAIM.get()
        if claim is not None and claim.session is self:
            await claim._stopped.wait()  # also set when the session ends
        else:
            await self._ended.wait()

    def _end(self, reason: str, *, lost: bool = False) -> None:
        if lost:
            self.lost = True
        if self._ended.is_set():
            return
        self.end_reason = reason
        log.debug(
            "group %s: session of generation %d ends: %s",
            self._group.group_id,
            self.generation_id,
            reason,
        )
        self._ended.set()
        for claim in self._claims.values():
            claim._stop()
        # Wake claims waiting in fetch_partition: removal makes it return [] at once.
        self._fetcher.remove(self._owned | set(self._claims))

    def _update_claims(self) -> None:
        claims: dict[str, list[int]] = {}
        for topic, partition in self._owned:
            claims.setdefault(topic, []).append(partition)
        self.claims = {t: sorted(ps) for t, ps in sorted(claims.items())}

    def _set_generation(self, generation: Generation | None) -> None:
        if generation is not None:
            self.generation = generation
            self.generation_id = generation.generation_id
            self.member_id = generation.member_id

    def _start_claim(self, claim: ConsumerGroupClaim) -> None:
        if claim.tp in self._tasks or claim.stopped:
            return
        self._tasks[claim.tp] = asyncio.get_running_loop().create_task(
            self._run_claim(claim), name=f"claim-{claim.topic}-{claim.partition}"
        )

    async def _wait_claims(self, tasks: list[asyncio.Task[None]]) -> None:
        """Wait for claim tasks (at most the rebalance timeout, then cancel); keep their errors."""
        timeout_s = self._config.effective_rebalance_timeout_ms / 1000.0
        _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for t in pending:
            log.warning(
                "group %s: %s did not return within the rebalance timeout; cancelling",
                self._group.group_id,
                t.get_name(),
            )
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        for t in tasks:
            if t in self._reaped:
                continue
            self._reaped.add(t)
            if not t.cancelled() and t.exception() is not None:
                self._errors.append(t.exception())  # type: ignore[arg-type]

    async def _run_claim(self, claim: ConsumerGroupClaim) -> None:
        """The body of a claim's task: the handler's ``consume_claim``."""
        _CURRENT_CLAIM.set(claim)  # this task's context only: session.ended answers per claim
        tp = f"{claim.topic}-{claim.partition}"
        try:
            await self._handler.consume_claim(self, claim)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._end(f"consume_claim of {tp} raised {exc!r}")
            raise
        if not claim.revoked:
            # sarama: the session ends as soon as the first claim's handler returns.
            self._end(f"consume_claim of {tp} returned")

    # ------------------------------------------------------------ offsets

    def mark_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` (the next offset to consume) for commit; lower offsets are ignored."""
        if not self._marks.mark_offset((topic, partition), offset, metadata):
            log.debug("group %s: ignoring mark of unclaimed %s-%d", self._group.group_id, topic, partition)

    def mark_message(self, msg: Message, metadata: str = "") -> None:
        """Mark ``msg`` as processed: its offset + 1 is committed (sarama's ``MarkMessage``)."""
        marks = self._marks
        if metadata:
            marks.mark_message(msg, metadata)
            return
        # Called once per message: only logged here (inline, no call), folded into the
        # per-partition marks when they are read, committed or the claims change.
        logged = marks.log
        logged.append(msg)
        if len(logged) >= FOLD_AT:
            marks.fold()

    def _fold_marks(self) -> None:
        """Apply the logged marks: call before ``_claims`` changes (see OffsetMarks.fold)."""
        self._marks.fold()

    def marked(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._marks.marked()

    def pending_commits(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The marked offsets not committed yet (a copy): what :meth:`commit` would send now.

        Partitions leave it once committed, and when a revoked claim is handed
        over (its marks are committed first, if ``enable_auto_commit``).
        """
        return as_offsets(self._marks.pending())

    async def commit(self) -> None:
        """Commit the offsets marked since the last commit, now.

        Commits of one session go out one at a time, in mark order. Raises
        CommitFailedError if the group rebalanced without this member's
        partitions (the session then ends), KafkaError / TimeoutError otherwise;
        KafkaError(REBALANCE_IN_PROGRESS) without sending anything while this
        member is rejoining (JoinGroup or SyncGroup outstanding; cooperative
        sessions go on meanwhile): the offsets stay pending for a later commit.
        """
        async with self._commit_lock:
            raw = self._marks.pending()
            if not raw:
                return
            group = self._group
            if group._membership.state in _REJOINING:
                # Doomed: behind the JoinGroup on the coordinator connection it meets a new
                # generation (ILLEGAL_GENERATION), between JoinGroup and SyncGroup a refusal
                # (REBALANCE_IN_PROGRESS) that the membership would take as a reason to
                # rebalance once more.
                raise KafkaError(
                    ErrorCode.REBALANCE_IN_PROGRESS,
                    f"group {group.group_id!r} is rebalancing; "
                    "the marked offsets stay pending",
                )
            await group._offsets.commit(as_offsets(raw), self._commit_generation())
            self._marks.committed(raw)

    def _commit_generation(self) -> Generation:
        """The generation a commit carries.

        Classic: the session's own (a commit from an older generation must fail).
        Consumer protocol: the member's latest epoch, a fencing token that moves
        without the assignment changing (the Java client commits with it too).
        """
        membership = self._group._membership
        if isinstance(membership, ConsumerGroupMembership):
            return membership.generation or self.generation
        return self.generation

    async def _forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop handed-over partitions' marks, after any commit in flight."""
        async with self._commit_lock:
            self._marks.forget(partitions)

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupSession(generation_id={self.generation_id}, "
            f"member_id={self.member_id!r}, claims={self.claims})"
        )
