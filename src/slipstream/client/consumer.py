"""The poll consumer: a blocking facade over a background network thread (seed 002;
as Kafka's ``AsyncKafkaConsumer``).

A background thread runs an asyncio loop that owns every socket and the group
membership: :class:`~.consumer_runtime.ConsumerRuntime` on that loop (the same runtime
:class:`~.aio_consumer.AIOConsumer` runs on the caller's loop). The application
thread submits coroutines to that loop and, while it waits, runs the *background
events* the network thread queues for it: rebalance listener callbacks (so they run
on the application thread, inside ``poll`` or whichever blocking call is waiting, as
in Java) and ``commit_async`` completions (in completion order).

Read-ahead (:mod:`.consumer_read_ahead`): after a poll returns, the network thread
drains the next polls' records (up to ``READ_AHEAD_POLLS`` x ``max_poll_records``;
past the first poll's worth only while the batches used up total less than
``max_partition_fetch_bytes``) and the next polls take them without a round trip
through the loop -- but only while no group is involved or the membership is steady
(no rebalance, error or auto-commit due). Whatever was read ahead is given back to
the fetcher before any other operation runs on the loop, so read-ahead records are
never counted as consumed.

Not thread-safe, by design: every public method raises
:class:`ConcurrentModificationError` if another thread is inside the consumer
(Java's ``acquire()``; re-entry from a listener callback on the same thread is fine).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from . import logs
from .assignors import TopicPartition
from .consumer_config import consumer_config_from
from .consumer_messages import Message
from .consumer_read_ahead import ReadAheadBuffer
from .consumer_runtime import ConsumerRuntime
from .statistics import ConsumerStatistics
from .subscription import TopicPattern
from .transactions import ConsumerGroupMetadata

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "CommitCallback",
    "ConcurrentModificationError",
    "Consumer",
    "WakeupError",
]


class ConcurrentModificationError(RuntimeError):
    """The consumer was used from two threads at once (it is not thread-safe)."""


class WakeupError(Exception):
    """``poll`` was interrupted by ``wakeup()`` (Java's WakeupException).

    Raised in the polling thread, by the poll that was blocked when ``wakeup()`` was
    called, or by the next poll if none was. Nothing is lost: records are counted as
    consumed only when a poll returns them.
    """


CommitCallback = Callable[[Mapping[TopicPartition, int], BaseException | None], None]


class _Wake:
    pass


class _WakeupCall:
    """Queued by ``Consumer.wakeup()`` to interrupt a blocked poll."""


# How long poll waits for a read-ahead in progress before asking the network loop.
_READ_AHEAD_WAIT_S = 0.05


_WAKE = _Wake()
_WAKEUP = _WakeupCall()


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class Consumer:
    """A Kafka consumer for blocking code; see the module docstring.

    ``Consumer(bootstrap_servers, group_id="g", **config)`` takes any
    :class:`ConsumerConfig` field as a keyword. Use it from one thread.
    """

    def __init__(
        self, bootstrap_servers: str | list[str], *, group_id: str | None = None, **config: Any
    ) -> None:
        self.config = consumer_config_from(bootstrap_servers, group_id, config)
        self._owner: int | None = None
        self._depth = 0
        self._guard = threading.Lock()
        self._closed = False
        self._events: queue.SimpleQueue[Callable[[], Any] | _Wake | _WakeupCall] = queue.SimpleQueue()
        self._commit_callbacks: collections.deque[Callable[[], None]] = collections.deque()
        self._listener_error: BaseException | None = None
        # Read-ahead: the next polls' records (in drain order), drained on the network
        # thread so polls can take them without a round trip (see poll()).
        self._ready: ReadAheadBuffer[Message] = ReadAheadBuffer(self.config.max_poll_records)
        self._refill_pending = False
        self._refilled = threading.Event()
        """Set when no read-ahead is being made (the last refill finished)."""
        self._refilled.set()
        self._wakeup = threading.Event()
        """Set by wakeup(): the blocked (or next) poll raises WakeupError."""
        self._poll_task: asyncio.Task[list[Message]] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=logs.run_as(self.config.client_id, self._loop.run_forever),
            name=f"slipstream-consumer-{self.config.client_id}",
            daemon=True,
        )
        self._thread.start()
        try:
            self._runtime = self._submit(self._setup()).result(timeout=10)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            raise

    async def _setup(self) -> ConsumerRuntime:
        runtime = ConsumerRuntime(self.config, self._invoke)
        runtime.consumed_positions = self._consumed_positions
        runtime.on_removed = self._on_removed
        return runtime

    # ------------------------------------------------------------ read-ahead

    def _read_ahead_ok(self, runtime: ConsumerRuntime) -> bool:
        """Whether records may be read ahead / handed out without the network loop's
        poll logic: always without a group; with one only while the membership is
        stable (no rebalance, error or left group: those go through ``runtime.poll``)."""
        if not runtime.in_group and runtime.pattern is None:
            return True
        m = runtime.membership
        return not (
            m is None
            or runtime.rebalancing
            or runtime.left_for_poll_timeout
            or m.error is not None
            or m.generation is None
            or m.rejoin_needed
        )

    def _take_ready(self, runtime: ConsumerRuntime) -> list[Message] | None:
        """On the application thread: the read-ahead, if it may be handed out now."""
        if not self._ready or not self._read_ahead_ok(runtime):
            return None
        if (
            self.config.enable_auto_commit
            and runtime.in_group
            and runtime.auto_commit.due(runtime.clock())
        ):
            return None  # the auto-commit is due: runtime.poll does it
        msgs, top_up = self._ready.take()
        if top_up:
            self._schedule_refill()
        return msgs or None

    def _schedule_refill(self) -> None:
        if not self._refill_pending:
            self._refill_pending = True
            self._refilled.clear()
            self._loop.call_soon_threadsafe(self._refill)

    def _refill(self) -> None:
        """On the network loop: drain the next poll's records while the application works."""
        try:
            runtime = self._runtime
            if runtime.closed or not self._read_ahead_ok(runtime):
                return
            fetcher = runtime.fetcher
            limit = self.config.max_poll_records
            want = self._ready.room()
            drained: list[Message] = []
            released = 0
            cap = self.config.max_partition_fetch_bytes
            # One drain per poll's worth, as polls would (same partition rotation). Past
            # the first, only while the batches used up (their bytes leave the fetcher's
            # buffer, which may then fetch more) stay under the cap: bounded memory.
            while want >= limit and (not drained or released < cap):
                if fetcher.has_error():
                    break  # errors are raised by a later poll's own drain
                before = fetcher.buffered_bytes()
                got = fetcher.drain_records(limit)
                if not got:
                    break
                released += before - fetcher.buffered_bytes()
                drained += got
                want -= len(got)
            # Not pending any more before publishing: a poll that takes these schedules
            # the next read-ahead.
            self._refill_pending = False
            if drained:
                # The application may have taken some meanwhile: appended behind the rest.
                self._ready.add(drained)
        finally:
            self._refill_pending = False
            self._refilled.set()

    def _unread(self) -> None:
        """On the network loop: give the read-ahead back to the fetcher (positions move
        back to it), so nothing else ever sees a read-ahead record as consumed."""
        ready = self._ready.take_all()
        if ready:
            self._runtime.fetcher.unread(ready)

    def _consumed_positions(self) -> dict[TopicPartition, int]:
        self._unread()
        return self._runtime.fetcher.positions()

    def _on_removed(self, _partitions: list[TopicPartition]) -> None:
        self._unread()  # records of removed partitions are dropped

    async def _unread_then(self, coro: Coroutine[Any, Any, T]) -> T:
        self._unread()
        return await coro

    async def _poll_on_loop(self, runtime: ConsumerRuntime, timeout_s: float) -> list[Message]:
        if self._wakeup.is_set():
            raise WakeupError("poll was woken up by wakeup()")
        # A task of its own, so wakeup() can cancel the wait (and only the wait: records
        # leave the fetcher in the step that returns them, with no await after it).
        task = asyncio.get_running_loop().create_task(runtime.poll(timeout_s, self.config.max_poll_records))
        self._poll_task = task
        try:
            msgs = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and self._wakeup.is_set() and not (current and current.cancelling()):
                raise WakeupError("poll was woken up by wakeup()") from None
            raise
        finally:
            self._poll_task = None
        if msgs and not self._refill_pending:
            # After the result is handed over: read the next poll's records ahead.
            self._refill_pending = True
            self._refilled.clear()
            asyncio.get_running_loop().call_soon(self._refill)
        return msgs

    async def _invoke(self, fn: Callable[[], Any], wait: bool) -> None:
        """On the network loop: run ``fn`` on the application thread (and wait for it)."""
        if not wait:
            self._events.put(fn)
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                fn()
            finally:
                loop.call_soon_threadsafe(_finish, done)

        self._events.put(run)
        await done

    # ------------------------------------------------------------ thread plumbing

    def _acquire(self) -> None:
        me = threading.get_ident()
        with self._guard:
            if self._owner is not None and self._owner != me:
                raise ConcurrentModificationError(
                    "the consumer is not safe for multi-threaded access: another thread is "
                    "using it right now (use one consumer per thread)"
                )
            self._owner = me
            self._depth += 1

    def _release(self) -> None:
        with self._guard:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None

    @contextlib.contextmanager
    def _use(self) -> Iterator[ConsumerRuntime]:
        self._acquire()
        try:
            if self._closed:
                raise RuntimeError("the consumer is closed")
            yield self._runtime
        finally:
            self._release()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the network loop; run listener callbacks while waiting.

        The read-ahead is given back to the fetcher first: every operation then sees
        exactly the positions of what poll returned.
        """
        fut = self._submit(self._unread_then(coro))
        fut.add_done_callback(lambda _f: self._events.put(_WAKE))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + 5.0
        while not fut.done():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                fut.cancel()
                raise TimeoutError("the consumer's network thread did not answer in time")
            try:
                item = self._events.get(timeout=remaining)
            except queue.Empty:
                continue
            self._run_event(item)
        return fut.result()

    def _do(self, fn: Callable[[], T]) -> T:
        async def go() -> T:
            return fn()

        return self._call(go())

    def _run_event(self, item: Callable[[], Any] | _Wake | _WakeupCall) -> None:
        if isinstance(item, (_Wake, _WakeupCall)):
            return
        try:
            item()
        except Exception as exc:  # surfaced from poll()
            log.exception("consumer rebalance listener failed")
            if self._listener_error is None:
                self._listener_error = exc

    def _run_pending(self, *, commit_callbacks: bool) -> None:
        while True:
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                break
            self._run_event(item)
        while commit_callbacks and self._commit_callbacks:
            cb = self._commit_callbacks.popleft()
            try:
                cb()
            except Exception:
                log.exception("commit_async callback failed")
        err, self._listener_error = self._listener_error, None
        if err is not None:
            raise err

    # ------------------------------------------------------------ subscription

    def subscribe(
        self, topics: Iterable[str] | re.Pattern[str], listener: Any = None
    ) -> None:
        """Join the group (at the next poll) for ``topics``; ``listener`` gets rebalance callbacks.

        ``topics`` may be a compiled regular expression: the consumer then subscribes
        to every non-internal topic whose whole name matches, re-checked on each
        metadata refresh (``metadata_max_age_ms``), so matching topics created later
        are picked up with a rebalance. With ``group_protocol="consumer"`` the broker
        evaluates the pattern instead (RE2 syntax, whole names) and follows new topics
        itself; ``subscription()`` is then empty.
        """
        if isinstance(topics, re.Pattern):
            pattern = TopicPattern(topics)
            with self._use() as runtime:
                self._do(lambda: runtime.subscribe(pattern, listener))
            return
        names = list(topics)
        if not names:
            self.unsubscribe()
            return
        with self._use() as runtime:
            self._do(lambda: runtime.subscribe(names, listener))

    def unsubscribe(self) -> None:
        """Leave the group (committing first with auto-commit) or drop a manual assignment."""
        with self._use() as runtime:
            self._call(runtime.unsubscribe())
            self._run_pending(commit_callbacks=False)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume ``partitions`` without a group (from committed offsets if a group_id is set)."""
        wanted = {(t, int(p)) for t, p in partitions}
        with self._use() as runtime:
            self._call(runtime.assign(wanted))

    def assignment(self) -> set[TopicPartition]:
        with self._use() as runtime:
            return self._do(runtime.fetcher.assigned)

    def subscription(self) -> tuple[str, ...]:
        return self._runtime.subscribed

    # ------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._use() as runtime:
            self._do(lambda: runtime.fetcher.seek(tp, offset))

    def seek_to_beginning(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as runtime:
            self._do(lambda: runtime.fetcher.seek_to_beginning(parts))

    def seek_to_end(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as runtime:
            self._do(lambda: runtime.fetcher.seek_to_end(parts))

    def position(self, tp: TopicPartition, timeout_s: float = 30.0) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (waits for an offset reset)."""
        with self._use() as runtime:
            return self._call(runtime.position(tp, timeout_s), timeout_s)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation, for ``Producer.send_offsets_to_transaction``."""
        with self._use() as runtime:
            return runtime.group_metadata()

    def committed(
        self, partitions: Iterable[TopicPartition], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        parts = list(partitions)
        with self._use() as runtime:
            return self._call(runtime.committed(parts, timeout_s), timeout_s)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop returning (and fetching) ``partitions``; what is buffered is kept."""
        parts = list(partitions)
        with self._use() as runtime:
            self._do(lambda: runtime.fetcher.pause(parts))

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(partitions)
        with self._use() as runtime:
            self._do(lambda: runtime.fetcher.resume(parts))

    def paused(self) -> set[TopicPartition]:
        with self._use() as runtime:
            return self._do(runtime.fetcher.paused)

    # ------------------------------------------------------------ poll and commits

    def poll(self, timeout_s: float = 1.0) -> list[Message]:
        """At most ``max_poll_records`` messages; [] if none arrived within ``timeout_s``.

        Raises WakeupError if ``wakeup()`` was called while it waited (or before it).
        Messages come deserialized when key/value deserializers are configured.
        """
        with self._use() as runtime:
            runtime.poll_interval.enter(runtime.clock())
            try:
                self._check_wakeup()
                self._run_pending(commit_callbacks=True)
                msgs = self._take_ready(runtime)
                if msgs is None and self._refill_pending and timeout_s > 0:
                    # A read-ahead is being made (about one poll's decoding): waiting
                    # for it is cheaper than a round trip through the network loop.
                    self._refilled.wait(min(timeout_s, _READ_AHEAD_WAIT_S))
                    msgs = self._take_ready(runtime)
                if msgs is None:
                    try:
                        msgs = self._call(self._poll_on_loop(runtime, timeout_s), timeout_s)
                    except WakeupError:
                        self._wakeup.clear()
                        raise
                self._run_pending(commit_callbacks=True)
                msgs = runtime.hand_out(msgs)
                self._report_statistics(runtime)
                return msgs
            finally:
                runtime.poll_interval.exit(runtime.clock())

    def wakeup(self) -> None:
        """Interrupt a blocked ``poll`` from any thread: it raises WakeupError in the
        polling thread. With no poll blocked, the next poll raises it at once."""
        self._wakeup.set()
        self._events.put(_WAKEUP)  # ends a wait for a read-ahead or a listener callback
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to interrupt
            self._loop.call_soon_threadsafe(self._interrupt_poll)

    def _interrupt_poll(self) -> None:
        """On the network loop: cancel the poll's wait, if it is still waiting."""
        task = self._poll_task
        if task is not None and not task.done():
            task.cancel()

    def _check_wakeup(self) -> None:
        if self._wakeup.is_set():
            self._wakeup.clear()
            raise WakeupError("poll was woken up by wakeup()")

    def statistics(self) -> ConsumerStatistics:
        """Per-partition position, high watermark and lag; fetch rate; rebalance count."""
        with self._use() as runtime:
            return self._do(runtime.statistics)

    def _report_statistics(self, runtime: ConsumerRuntime) -> None:
        callback = self.config.statistics_callback
        if callback is not None and runtime.stats.report_due(time.monotonic()):
            callback(self._do(runtime.statistics))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_s: float = 30.0
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset with a record timestamp at or after the time
        given (ms since the epoch), or None when no record is that recent. Feed the
        result to ``seek`` to start reading at a point in time."""
        wanted = dict(timestamps)
        with self._use() as runtime:
            return self._call(runtime.offsets_for_times(wanted, timeout_s), timeout_s)

    def commit_sync(
        self, offsets: Mapping[TopicPartition, int] | None = None, timeout_s: float = 30.0
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (default: the positions after what poll returned); returns them."""
        with self._use() as runtime:
            runtime.offsets_client()
            self._run_pending(commit_callbacks=True)
            result = self._call(runtime.commit(offsets, timeout_s), timeout_s)
            self._run_pending(commit_callbacks=True)
            return result

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Commit without waiting. Commits complete in call order; ``callback(offsets, error)``
        runs on this thread during a later ``poll`` / ``commit_sync`` / ``close``."""
        with self._use() as runtime:
            runtime.offsets_client()
            fixed = dict(offsets) if offsets is not None else None
            on_done = None
            if callback is not None:
                cb = callback

                def on_done(o: dict[TopicPartition, int], e: BaseException | None) -> None:
                    self._commit_callbacks.append(lambda: cb(o, e))

            self._loop.call_soon_threadsafe(runtime.commit_in_background, fixed, on_done)

    # ------------------------------------------------------------ close

    def close(self, timeout_s: float = 30.0) -> None:
        """Commit (with auto-commit), run the revoke callback, leave the group, stop the thread."""
        if self._closed:
            return
        with self._use() as runtime:
            try:
                self._call(runtime.close(timeout_s), timeout_s)
                self._run_pending(commit_callbacks=True)
            finally:
                self._closed = True
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=5)
                if not self._thread.is_alive():
                    self._loop.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
