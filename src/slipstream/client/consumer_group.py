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
            await group.consume(["orders"], Handler())   # one session per call
    finally:
        await group.close()

Each :meth:`ConsumerGroup.consume` call runs one session
(:mod:`.consumer_group_session`); how sessions meet rebalances under each protocol
is told in the :class:`ConsumerGroup` docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from . import logs
from .assignors import COOPERATIVE, TopicPartition
from .connection import ConnectionClosed
from .consumer_clients import ConsumerClients
from .consumer_config import ConsumerConfig, consumer_config_from
from .consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from .group_errors import FatalGroupError
from .membership_types import Generation, MemberState
from .offsets import CommitFailedError, reset_offsets
from .rebalance_listener import RebalanceListener
from .statistics import ConsumerStatistics, StatisticsTracker
from .tasks import deadline
from .transactions import ConsumerGroupMetadata

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroup", "ConsumerGroupClosedError", "ConsumerGroupHandler"]


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


class _Listener(RebalanceListener):
    """Eager: ends the session before every rejoin. Cooperative: revokes and adds claims.

    Each hook is awaited by the membership, so a revocation completes (claims
    returned, offsets committed) before this member rejoins or syncs again.
    """

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group

    async def on_join_prepare(self, generation: Generation | None) -> None:
        if not self.group._incremental():
            await self.group._end_session("the group is rebalancing")
        elif generation is not None:
            await self.group._commit_before_join()

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if not revoked:
            return
        if self.group._incremental():
            await self.group._revoke_claims(revoked)
        else:
            await self.group._end_session("partitions revoked")

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.group._stats.rebalanced()
        if self.group._incremental():
            await self.group._assign_claims(assigned)

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        await self.group._end_session("partitions lost", lost=True)


class ConsumerGroup:
    """A member of a consumer group running handler sessions (sarama's ConsumerGroup).

    ``ConsumerGroup(bootstrap_servers, group_id, config=None, **overrides)``:
    settings are :class:`~.consumer_config.ConsumerConfig` fields, given as a
    config object and/or keyword overrides. Not thread-safe: use from one event loop.

    A session: join, ``handler.setup``, one ``consume_claim`` task per claimed
    partition; when it ends, the claims' iterators stop, their tasks are awaited (at
    most the rebalance timeout, then cancelled), then ``handler.cleanup`` and a commit
    of the marked offsets (``enable_auto_commit``; also every ``auto_commit_interval_ms``).

    Sessions and rebalances:

    - EAGER protocol: every rebalance ends the session before this member
      rejoins (claims stop, cleanup, final commit); ``consume`` returns and
      the next call starts a session for the new generation.
    - COOPERATIVE protocol (cooperative-sticky, and ``group_protocol="consumer"``,
      where the broker assigns): the session survives
      rebalances. Revoked partitions: only their claims stop (``claim.revoked``,
      iterator ends, ``session.ended`` true inside their ``consume_claim``);
      the revocation completes after their ``consume_claim`` returned (or the
      rebalance timeout cancelled it) and, with ``enable_auto_commit``, after
      the session's marked offsets were committed -- the membership awaits all
      this before it rejoins, so the next owner starts later and from that
      commit. Kept claims go on untouched. Added partitions get new claims in
      the same session (no second ``setup``). ``session.claims`` and
      ``session.generation_id`` track the current assignment and generation.
      An exception from any ``consume_claim`` (revoked or not) ends the session
      and is raised from ``consume``; a ``consume_claim`` returning while its
      claim was not revoked ends the session, as in sarama.
    - Either protocol: lost partitions (session expiry, fencing, a fatal
      error) end the whole session without committing; ``close`` ends it
      with a final commit.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        group_id: str,
        config: ConsumerConfig | None = None,
        **overrides: Any,
    ) -> None:
        self.config = consumer_config_from(bootstrap_servers, group_id, overrides, config)
        self.group_id = group_id
        # group_protocol="consumer" (KIP-848) is incremental like a cooperative assignor:
        # the session spans rebalances and only revoked claims stop.
        clients = ConsumerClients.build(self.config, listener=_Listener(self))
        assert clients.group is not None  # a group_id is given
        self._clients = clients
        self._cluster = clients.cluster
        self._fetcher = clients.fetcher
        self._membership = clients.group.membership
        self._offsets = clients.group.offsets
        self._session: ConsumerGroupSession | None = None
        self._consuming = False
        self._consume_task: asyncio.Task[Any] | None = None
        self._closed = False
        self._shut_down = False
        self._shutdown_deferred = False
        self.sessions = 0
        """Sessions started so far (for tests and metrics)."""
        self._stats = StatisticsTracker(
            self.config.client_id, group_id, time.monotonic(), self.config.statistics_interval_ms / 1000.0
        )

    # ------------------------------------------------------------ public API

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation, for ``AIOProducer.send_offsets_to_transaction``
        (the running session's generation; -1 before the first one)."""
        generation = self._membership.generation
        group_id = self.config.group_id or ""
        if generation is None:
            return ConsumerGroupMetadata(group_id, group_instance_id=self.config.group_instance_id)
        return ConsumerGroupMetadata(
            group_id, generation.generation_id, generation.member_id, self.config.group_instance_id
        )

    def statistics(self) -> ConsumerStatistics:
        """A snapshot (the poll consumers' shape): per-partition position, high watermark
        and lag of the partitions this member holds, records handed to its claims and
        their rate since the previous snapshot, and the rebalances (assignments received).
        With ``statistics_callback`` the group also calls it every
        ``statistics_interval_ms``, from a claim's ``messages()`` as records arrive."""
        fetcher = self._fetcher
        session = self._session
        held = set(session._owned) if session is not None else fetcher.assigned()

        def position(tp: TopicPartition) -> int | None:
            try:
                return fetcher.position(tp)
            except KeyError:  # revoked between the listing and now
                return None

        def high_watermark(tp: TopicPartition) -> int | None:
            try:
                return fetcher.highwater(tp)
            except KeyError:
                return None

        return self._stats.snapshot(time.monotonic(), held, position, high_watermark)

    def _handed_out(self, count: int) -> None:
        """Count records given to a claim; report statistics when an interval has passed."""
        stats = self._stats
        stats.consumed(count)
        callback = self.config.statistics_callback
        if callback is not None and stats.report_due(time.monotonic()):
            callback(self.statistics())

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

    async def consume(
        self, topics: Iterable[str], handler: Any, *, join_timeout_s: float | None = None
    ) -> None:
        """Run one session of ``handler`` over this member's partitions of ``topics``.

        Joins the group if needed and returns when the session ends (a
        rebalance, a ``consume_claim`` returning, or close). Call it in a loop.
        Raises the handler's exception, or the membership's fatal error; with
        ``join_timeout_s``, a TimeoutError naming the group when joining takes longer
        (e.g. no broker answers).
        """
        if self._closed:
            raise ConsumerGroupClosedError("the consumer group is closed")
        if self._consuming:
            raise RuntimeError("consume() is already running on this consumer group")
        topic_list = list(topics)
        if not topic_list:
            raise ValueError("consume needs at least one topic")
        self._consuming = True
        logs.bind(self.config.client_id)  # the session's tasks log under this client's id
        try:
            self._membership.subscribe(topic_list)
            if join_timeout_s is None:
                generation = await self._active_generation()
            else:
                async with deadline(join_timeout_s, f"joining consumer group {self.group_id!r}"):
                    generation = await self._active_generation()
            if generation is not None:
                await self._run_session(generation, handler)
        finally:
            self._consuming = False
            self._consume_task = None
            if self._shutdown_deferred:
                self._shutdown_deferred = False
                await self._shutdown()

    async def _active_generation(self) -> Generation | None:
        """The stable generation to run a session in, or None once the group is closed."""
        while True:
            try:
                generation = await self._membership.ensure_active()
            except RuntimeError:
                if self._closed:
                    return None
                raise
            if self._closed:
                return None
            if self._membership.rejoin_needed or self._membership.generation != generation:
                continue
            return generation

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
            current in session._tasks.values() or current is self._consume_task
        )

    def _incremental(self) -> bool:
        """Cooperative protocol: rebalances revoke and add claims within the session."""
        return self._membership.protocol == COOPERATIVE

    async def _shutdown(self) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        try:
            await self._membership.close()
        finally:
            await self._clients.close()

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

    def _add_claims(self, session: ConsumerGroupSession, offsets: dict[TopicPartition, int]) -> None:
        """Create claims for the partitions the session still holds (a revocation may have won)."""
        offsets = {
            tp: o for tp, o in offsets.items() if tp in session._owned and tp not in session._claims
        }
        self._fetcher.add(offsets)
        session._fold_marks()  # before the claims change (see _fold_marks)
        for (topic, partition), offset in sorted(offsets.items()):
            claim = ConsumerGroupClaim(session, topic, partition, offset)
            session._claims[claim.tp] = claim
            if session._setup_done:
                session._start_claim(claim)

    async def _run_session(self, generation: Generation, handler: Any) -> None:
        session = ConsumerGroupSession(self, generation)
        session._handler = handler
        self._session = session
        self._consume_task = asyncio.current_task()
        self.sessions += 1
        errors = session._errors
        autocommit: asyncio.Task[None] | None = None
        try:
            partitions = sorted(session._owned)
            offsets = await self._initial_offsets(partitions) if partitions else {}
            if session.ended:
                return
            self._add_claims(session, offsets)
            await handler.setup(session)
            session._setup_done = True
            if session.ended:
                return
            for claim in list(session._claims.values()):
                session._start_claim(claim)
            loop = asyncio.get_running_loop()
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
            await self._finish_session(session, autocommit)
        if errors:
            raise errors[0]
        if self._membership.error is not None:
            raise self._membership.error

    def _park(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching and delivering ``partitions`` and wake their claims' iterators now.

        A fresh paused entry replaces each partition's fetch state: a waiting
        ``fetch_partition`` sees the swap and returns at once, and later calls
        wait instead of returning immediately (no busy loop for an iterator
        driven outside its claim's task) until the claim is gone.
        """
        for tp in partitions:
            try:
                position = self._fetcher.position(tp)
            except KeyError:
                position = None
            self._fetcher.remove([tp])
            if position is not None:
                self._fetcher.add({tp: position})
                self._fetcher.pause([tp])

    async def _revoke_claims(self, revoked: list[TopicPartition]) -> None:
        """Cooperative revocation: stop just these claims, commit, hand them over."""
        session = self._session
        if session is None:
            return
        session._set_generation(self._membership.generation)
        tps = sorted(tp for tp in set(revoked) if tp in session._owned or tp in session._claims)
        if not tps:
            return
        log.info(
            "group %s: generation %d revokes %s; the other claims go on",
            self.group_id,
            session.generation_id,
            [f"{t}-{p}" for t, p in tps],
        )
        session._owned.difference_update(tps)
        session._update_claims()
        for tp in tps:
            claim = session._claims.get(tp)
            if claim is not None:
                claim.revoked = True
                claim._stop()
        self._park(tps)
        tasks = [session._tasks[tp] for tp in tps if tp in session._tasks]
        try:
            if tasks:
                await session._wait_claims(tasks)
            if self.config.enable_auto_commit and not session.lost:
                try:
                    await session.commit()
                except Exception as exc:
                    log.warning("group %s: commit on revocation failed: %s", self.group_id, exc)
            await session._forget(tps)
        finally:
            session._fold_marks()  # before the claims change (see _fold_marks)
            for tp in tps:
                session._claims.pop(tp, None)
                session._tasks.pop(tp, None)
            self._fetcher.remove(tps)

    async def _assign_claims(self, assigned: list[TopicPartition]) -> None:
        """Cooperative assignment: carry the session into the new generation, add claims."""
        session = self._session
        if session is None or session.ended:
            return
        session._set_generation(self._membership.generation)
        new = sorted(tp for tp in set(assigned) if tp not in session._owned)
        if not new:
            return
        session._owned.update(new)
        session._update_claims()
        try:
            offsets = await self._initial_offsets(new)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            session._errors.append(exc)
            session._end(f"cannot start claims for newly assigned {new}: {exc!r}")
            return
        if session.ended:
            return
        log.info(
            "group %s: generation %d adds claims %s",
            self.group_id,
            session.generation_id,
            [f"{t}-{p}" for t, p in new],
        )
        self._add_claims(session, offsets)

    async def _commit_before_join(self) -> None:
        """Cooperative, auto-commit: commit before JoinGroup (the Java client does too),
        since commits are refused until the rebalance completes while claims go on."""
        session = self._session
        if session is None or session.ended or not self.config.enable_auto_commit:
            return
        try:
            await session.commit()
        except Exception as exc:
            log.warning("group %s: commit before rejoining failed: %s", self.group_id, exc)

    async def _autocommit_loop(self, session: ConsumerGroupSession) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not session.ended:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await session._ended.wait()
            if session.ended:
                return
            if self._membership.state is not MemberState.STABLE:
                # Mid-rebalance (cooperative: claims go on): the coordinator would answer
                # REBALANCE_IN_PROGRESS; the next tick commits.
                continue
            try:
                await session.commit()
            except CommitFailedError as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except (ConnectionClosed, OSError, TimeoutError, FatalGroupError) as exc:
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)
            except Exception as exc:  # KafkaError and friends: keep going
                log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def _finish_session(
        self, session: ConsumerGroupSession, autocommit: asyncio.Task[None] | None
    ) -> None:
        errors = session._errors
        try:
            if autocommit is not None:
                autocommit.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await autocommit
            tasks = list(session._tasks.values())
            if tasks:
                await session._wait_claims(tasks)
            if session._setup_done:
                try:
                    await session._handler.cleanup(session)
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
            self._fetcher.remove(session._owned | set(session._claims))
            if self._session is session:
                self._session = None
            session._ended.set()
            for claim in session._claims.values():
                claim._stop()
            session._finished.set()
