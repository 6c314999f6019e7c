"""Consumer group handler API, modelled on sarama's ``ConsumerGroup`` (seed 000).

Usage::

    class Handler(ConsumerGroupHandler):
        async def consume_claim(self, session, claim):
            async for msg in claim.messages():
                print(msg.topic, msg.partition, msg.offset, msg.value)
                session.mark_message(msg)

    group = ConsumerGroup("127.0.0.1:9092", "my-group", auto_offset_reset="earliest")
    try:
        while not stopping:
            await group.consume(["orders"], Handler())   # one session per generation
    finally:
        await group.close()

One *session* per generation: :meth:`ConsumerGroup.consume` joins (or waits
for the running membership to be stable), then awaits ``handler.setup(session)``,
runs ``handler.consume_claim(session, claim)`` concurrently, one task per
assigned partition, and when the session ends -- a rebalance starts (before
this member rejoins), the first ``consume_claim`` returns or raises (sarama
does the same), or :meth:`ConsumerGroup.close` -- it stops every claim's
``messages()`` iterator, waits for the ``consume_claim`` tasks (at most the
rebalance timeout, then cancels them), awaits ``handler.cleanup(session)`` and
commits the marked offsets (``enable_auto_commit``; they are also committed
every ``auto_commit_interval_ms``). Then ``consume`` returns; the documented
pattern calls it in a loop.

The session ends *before* the member sends JoinGroup (the membership awaits
it in ``on_join_prepare``), so a partition is never consumed by two members at
once and offsets marked before the rebalance are committed before the new owner
reads them. Partitions reported *lost* (session expiry, fenced) are not committed.

Wiring: one :class:`~.cluster.Cluster`, one
:class:`~.membership.CoordinatorLocator` shared by
:class:`~.membership.GroupMembership` (joins, heartbeats, the error handling
the seed lists) and :class:`~.offsets.GroupOffsets`; one
:class:`~.fetcher.Fetcher` (one fetch loop per broker). Backpressure comes from
the fetcher: a claim's iterator pulls from its partition's buffer only when the
handler asks for the next message, and a partition whose buffer is full (and
not drained for ``max_processing_time_ms``) is not fetched, without holding up
the others.

Errors: fatal membership errors (e.g. FENCED_INSTANCE_ID, configuration
errors) and exceptions raised by the handler end the session and are raised
from ``consume`` (after cleanup). ``close`` leaves the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from ..protocol.records import Record
from .assignors import TopicPartition
from .cluster import Cluster
from .connection import ConnectionClosed
from .consumer_config import ConsumerConfig
from .fetcher import Fetcher
from .membership import (
    CoordinatorLocator,
    FatalGroupError,
    Generation,
    GroupMembership,
    RebalanceListener,
)
from .offsets import CommitFailedError, GroupOffsets, OffsetAndMetadata, reset_offsets

log = logging.getLogger(__name__)

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupClaim",
    "ConsumerGroupClosedError",
    "ConsumerGroupHandler",
    "ConsumerGroupSession",
    "ConsumerMessage",
]


@dataclass(frozen=True, slots=True)
class ConsumerMessage:
    """One record of a claimed partition (sarama's ``ConsumerMessage``)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int = -1
    """Milliseconds since the epoch (create or log-append time, see ``timestamp_type``)."""
    timestamp_type: int = 0
    leader_epoch: int = -1

    @classmethod
    def from_record(cls, topic: str, partition: int, r: Record) -> ConsumerMessage:
        return cls(
            topic,
            partition,
            r.offset,
            r.key,
            r.value,
            r.headers,
            r.timestamp,
            r.timestamp_type,
            r.leader_epoch,
        )


class ConsumerGroupClosedError(RuntimeError):
    """``consume`` was called on a closed consumer group (sarama's ErrClosedConsumerGroup)."""


class ConsumerGroupHandler:
    """Subclass and override ``consume_claim`` (``setup`` and ``cleanup`` default to no-ops).

    Any object with these three coroutine methods works as well.
    """

    async def setup(self, session: ConsumerGroupSession) -> None:
        """Called at the start of a session, before any ``consume_claim``."""
        return None

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        """Called at the end of a session, after every ``consume_claim`` returned."""
        return None

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        """Process ``claim.messages()``; must return soon after the iterator ends."""
        raise NotImplementedError


class ConsumerGroupClaim:
    """One partition claimed by this member for one session."""

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

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def high_watermark_offset(self) -> int | None:
        """The partition's high watermark as of the latest fetch (None before the first)."""
        with contextlib.suppress(KeyError):
            hw = self.session._fetcher.highwater(self.tp)
            if hw is not None:
                self._high_watermark = hw
        return self._high_watermark

    async def messages(self) -> AsyncIterator[ConsumerMessage]:
        """The partition's messages in offset order; ends when the session ends.

        Only pulls from the fetcher's buffer when the handler asks for the next
        message, so a slow handler stops its partition from being fetched.
        """
        if self._iterating:
            raise RuntimeError(f"{self.topic}-{self.partition}: messages() is already iterated")
        self._iterating = True
        session = self.session
        fetcher = session._fetcher
        limit = session._config.max_poll_records
        try:
            while not session.ended:
                records = await fetcher.fetch_partition(self.tp, limit, 0.5)
                for r in records:
                    if session.ended:
                        return
                    yield ConsumerMessage.from_record(self.topic, self.partition, r)
        finally:
            self._iterating = False

    def __repr__(self) -> str:
        return f"ConsumerGroupClaim({self.topic}-{self.partition}, initial_offset={self.initial_offset})"


class ConsumerGroupSession:
    """One generation of this member: its claims and the offsets it marked."""

    def __init__(
        self,
        group: ConsumerGroup,
        generation: Generation,
    ) -> None:
        self._group = group
        self._config = group.config
        self._fetcher = group._fetcher
        self.generation = generation
        self.generation_id = generation.generation_id
        self.member_id = generation.member_id
        claims: dict[str, list[int]] = {}
        for topic, partition in generation.assignment:
            claims.setdefault(topic, []).append(partition)
        self.claims: dict[str, list[int]] = {t: sorted(ps) for t, ps in sorted(claims.items())}
        """topic -> the partitions claimed in this session."""
        self._marked: dict[TopicPartition, OffsetAndMetadata] = {}
        self._committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self._ended = asyncio.Event()
        self._finished = asyncio.Event()
        self.end_reason: str | None = None
        self.lost = False
        """The partitions were lost (not revoked): the final commit is skipped."""
        self._claim_tasks: list[asyncio.Task[None]] = []

    @property
    def ended(self) -> bool:
        """The session is ending: claims' iterators stop, handlers should return."""
        return self._ended.is_set()

    async def wait_ended(self) -> None:
        """Wait until the session ends (sarama's ``Context().Done()``)."""
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
        # Wake claims waiting in fetch_partition: removal makes it return [] at once.
        self._fetcher.remove(self.generation.assignment)

    # ------------------------------------------------------------ offsets

    def mark_offset(self, topic: str, partition: int, offset: int, metadata: str = "") -> None:
        """Mark ``offset`` (the next offset to consume) for commit; lower offsets are ignored."""
        tp = (topic, partition)
        if tp not in self.generation.assignment:
            log.debug("group %s: ignoring mark of unclaimed %s-%d", self._group.group_id, *tp)
            return
        current = self._marked.get(tp)
        if current is None or offset > current.offset:
            self._marked[tp] = OffsetAndMetadata(offset, metadata or None)

    def mark_message(self, msg: ConsumerMessage, metadata: str = "") -> None:
        """Mark ``msg`` as processed: its offset + 1 is committed (sarama's ``MarkMessage``)."""
        om = OffsetAndMetadata(msg.offset + 1, metadata or None, msg.leader_epoch)
        tp = (msg.topic, msg.partition)
        if tp not in self.generation.assignment:
            return
        current = self._marked.get(tp)
        if current is None or om.offset > current.offset:
            self._marked[tp] = om

    def marked(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._marked)

    def _pending(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: om for tp, om in self._marked.items() if self._committed.get(tp) != om}

    async def commit(self) -> None:
        """Commit the offsets marked since the last commit, now.

        Raises CommitFailedError if the group rebalanced without this member's
        partitions (the session then ends), KafkaError / TimeoutError otherwise.
        """
        pending = self._pending()
        if not pending:
            return
        await self._group._offsets.commit(pending, self.generation)
        self._committed.update(pending)

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupSession(generation_id={self.generation_id}, "
            f"member_id={self.member_id!r}, claims={self.claims})"
        )


class _Listener(RebalanceListener):
    """Ends the running session before every rejoin (awaited by the membership)."""

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group

    async def on_join_prepare(self, generation: Generation | None) -> None:
        await self.group._end_session("the group is rebalancing")

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if revoked:
            await self.group._end_session("partitions revoked")

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        await self.group._end_session("partitions lost", lost=True)


class ConsumerGroup:
    """A member of a consumer group running handler sessions (sarama's ConsumerGroup).

    ``ConsumerGroup(bootstrap_servers, group_id, config=None, **overrides)``:
    settings are :class:`~.consumer_config.ConsumerConfig` fields, given as a
    config object and/or keyword overrides. Not thread-safe: use from one event loop.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        group_id: str,
        config: ConsumerConfig | None = None,
        **overrides: Any,
    ) -> None:
        base = config or ConsumerConfig()
        names = {f.name for f in fields(ConsumerConfig)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown consumer setting(s): {', '.join(unknown)}")
        values = {f.name: getattr(base, f.name) for f in fields(ConsumerConfig)}
        values.update(overrides)
        values["bootstrap_servers"] = bootstrap_servers
        values["group_id"] = group_id
        self.config = ConsumerConfig(**values).validate()
        self.group_id = group_id
        self._cluster = Cluster(
            bootstrap_servers,
            client_id=self.config.client_id,
            request_timeout_s=self.config.request_timeout_ms / 1000.0,
        )
        self._locator = CoordinatorLocator(self._cluster, self.config)
        self._membership = GroupMembership(
            self._cluster, self.config, listener=_Listener(self), locator=self._locator
        )
        self._offsets = GroupOffsets(
            self._locator, self.config, on_membership_error=self._membership.on_commit_error
        )
        self._fetcher = Fetcher(self._cluster, self.config)
        self._session: ConsumerGroupSession | None = None
        self._consuming = False
        self._consume_task: asyncio.Task[Any] | None = None
        self._closed = False
        self._shut_down = False
        self._shutdown_deferred = False
        self.sessions = 0
        """Sessions started so far (for tests and metrics)."""

    # ------------------------------------------------------------ public API

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    @property
    def session(self) -> ConsumerGroupSession | None:
        """The running session, if any."""
        return self._session

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> ConsumerGroup:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def consume(self, topics: Iterable[str], handler: Any) -> None:
        """Run one session of ``handler`` over this member's partitions of ``topics``.

        Joins the group if needed and returns when the session ends (a
        rebalance, a ``consume_claim`` returning, or close). Call it in a loop.
        Raises the handler's exception, or the membership's fatal error.
        """
        if self._closed:
            raise ConsumerGroupClosedError("the consumer group is closed")
        if self._consuming:
            raise RuntimeError("consume() is already running on this consumer group")
        topic_list = list(topics)
        if not topic_list:
            raise ValueError("consume needs at least one topic")
        self._consuming = True
        try:
            self._membership.subscribe(topic_list)
            while True:
                try:
                    generation = await self._membership.ensure_active()
                except RuntimeError:
                    if self._closed:
                        return
                    raise
                if self._closed:
                    return
                if self._membership.rejoin_needed or self._membership.generation != generation:
                    continue
                await self._run_session(generation, handler)
                return
        finally:
            self._consuming = False
            self._consume_task = None
            if self._shutdown_deferred:
                self._shutdown_deferred = False
                await self._shutdown()

    async def commit(self) -> None:
        """Commit the running session's marked offsets (no-op without a session)."""
        if self._session is not None:
            await self._session.commit()

    async def close(self) -> None:
        """End the session (cleanup, final commit), leave the group, close connections.

        Called from inside the session (a handler's ``consume_claim``, ``setup``
        or ``cleanup``) it only ends the session and returns; ``consume`` then
        finishes the session and the shutdown before it returns.
        """
        if self._closed:
            return
        self._closed = True
        session = self._session
        if session is not None:
            session._end("the consumer group is closing")
            if self._inside(session):
                self._shutdown_deferred = True
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._rebalance_timeout_s() + 5.0):
                    await session._finished.wait()
        await self._shutdown()

    # ------------------------------------------------------------ internals

    def _inside(self, session: ConsumerGroupSession) -> bool:
        """Whether the current task is one the session's teardown waits for."""
        current = asyncio.current_task()
        return current is not None and (
            current in session._claim_tasks or current is self._consume_task
        )

    async def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            await self._membership.close()
        finally:
            await self._fetcher.close()
            await self._locator.close()
            await self._cluster.close()

    def _rebalance_timeout_s(self) -> float:
        return self.config.effective_rebalance_timeout_ms / 1000.0

    async def _end_session(self, reason: str, *, lost: bool = False) -> None:
        session = self._session
        if session is None:
            return
        session._end(reason, lost=lost)
        if not self._inside(session):
            await session._finished.wait()

    async def _initial_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        committed = await self._offsets.fetch_committed(partitions)
        out = {tp: om.offset for tp, om in committed.items() if om is not None and om.offset >= 0}
        missing = [tp for tp in partitions if tp not in out]
        if missing:
            policy = self.config.auto_offset_reset
            out.update(
                await reset_offsets(self._cluster, {tp: policy for tp in missing}, self.config)
            )
        return out

    async def _run_session(self, generation: Generation, handler: Any) -> None:
        session = ConsumerGroupSession(self, generation)
        self._session = session
        self._consume_task = asyncio.current_task()
        self.sessions += 1
        errors: list[BaseException] = []
        setup_done = False
        autocommit: asyncio.Task[None] | None = None
        try:
            partitions = list(generation.assignment)
            offsets = await self._initial_offsets(partitions) if partitions else {}
            if session.ended:
                return
            self._fetcher.add(offsets)
            claims = [ConsumerGroupClaim(session, t, p, offsets[(t, p)]) for t, p in partitions]
            await handler.setup(session)
            setup_done = True
            if session.ended:
                return
            loop = asyncio.get_running_loop()
            for claim in claims:
                session._claim_tasks.append(
                    loop.create_task(
                        self._run_claim(session, handler, claim),
                        name=f"claim-{claim.topic}-{claim.partition}",
                    )
                )
            if self.config.enable_auto_commit:
                autocommit = loop.create_task(self._autocommit_loop(session), name="autocommit")
            while not session.ended:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.25):
                        await session._ended.wait()
                if self._membership.error is not None:
                    session._end(f"group membership failed: {self._membership.error}", lost=True)
        except BaseException as exc:
            errors.append(exc)
            session._end(f"session failed: {exc!r}")
        finally:
            await self._finish_session(session, handler, setup_done, autocommit, errors)
        if errors:
            raise errors[0]
        if self._membership.error is not None:
            raise self._membership.error

    async def _run_claim(
        self, session: ConsumerGroupSession, handler: Any, claim: ConsumerGroupClaim
    ) -> None:
        try:
            await handler.consume_claim(session, claim)
        finally:
            # sarama: the session ends as soon as the first claim's handler returns.
            session._end(f"consume_claim of {claim.topic}-{claim.partition} returned")

    async def _autocommit_loop(self, session: ConsumerGroupSession) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not session.ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await session._ended.wait()
            if session.ended:
                return
            try:
                await session.commit()
            except CommitFailedError as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except (ConnectionClosed, OSError, TimeoutError, FatalGroupError) as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except Exception as exc:  # KafkaError and friends: keep going
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def _finish_session(
        self,
        session: ConsumerGroupSession,
        handler: Any,
        setup_done: bool,
        autocommit: asyncio.Task[None] | None,
        errors: list[BaseException],
    ) -> None:
        try:
            if autocommit is not None:
                autocommit.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await autocommit
            tasks = session._claim_tasks
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=self._rebalance_timeout_s())
                for t in pending:
                    log.warning(
                        "group %s: %s did not return within the rebalance timeout; cancelling",
                        self.group_id,
                        t.get_name(),
                    )
                    t.cancel()
                if pending:
                    await asyncio.wait(pending)
                for t in tasks:
                    if t.cancelled():
                        continue
                    exc = t.exception()
                    if exc is not None:
                        errors.append(exc)
            if setup_done:
                try:
                    await handler.cleanup(session)
                except Exception as exc:
                    errors.append(exc)
            if self.config.enable_auto_commit and not session.lost:
                try:
                    await session.commit()
                except (CommitFailedError, ConnectionClosed, OSError, TimeoutError) as exc:
                    log.warning("group %s: final commit failed: %s", self.group_id, exc)
                except Exception as exc:
                    log.warning("group %s: final commit failed: %s", self.group_id, exc)
        finally:
            self._fetcher.remove(session.generation.assignment)
            if self._session is session:
                self._session = None
            session._ended.set()
            session._finished.set()
