"""``Producer``: the thread-safe, blocking producer; an ``AIOProducer`` (aio_producer.py)
runs on its own loop thread. This module also re-exports the producer's public names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from . import logs
from .aio_producer import AIOProducer
from .producer_config import ProducerConfig
from .producer_types import (
    BufferFullError,
    DeliveryCallback,
    DeliveryTimeoutError,
    ProducerClosedError,
    ProducerError,
    RecordMetadata,
)
from .transactions import ConsumerGroupMetadata, TransactionError

log = logging.getLogger(__name__)


class Producer:
    """Thread-safe blocking producer; an ``AIOProducer`` runs on its own loop thread.

    ``produce`` queues a record (from any thread) and returns at once; it blocks only
    while the topic's metadata is fetched or ``buffer_memory`` is full.

    Delivery callbacks ``on_delivery(err, metadata)`` (err is None on success; metadata
    is a RecordMetadata, offset -1 on failure) run, by default, on the thread that
    calls ``poll()`` or ``flush()`` - as in confluent-kafka, so callbacks never race
    with your code; call ``poll(0)`` regularly. With ``delivery_callbacks="background"``
    they run on the producer's own thread instead (keep them short and thread-safe).
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        *,
        delivery_callbacks: str = "poll",
        start_timeout: float | None = 30.0,
        **config: Any,
    ) -> None:
        if delivery_callbacks not in ("poll", "background"):
            raise ValueError("delivery_callbacks must be 'poll' or 'background'")
        self._callbacks: deque[tuple[Any, BaseException | None, RecordMetadata]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._close_lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=logs.run_as(str(config.get("client_id", "slipstream-producer")), lambda: self._run_loop(ready)),
            name="slipstream-producer",
            daemon=True,
        )
        self._thread.start()
        ready.wait()

        async def create() -> AIOProducer:
            producer = AIOProducer(bootstrap_servers, **config)
            if delivery_callbacks == "poll":
                producer._outcomes.callback_sink = self._enqueue_callbacks
            try:
                return await producer.start()
            except BaseException:
                await producer.close()
                raise

        try:
            self._aio = asyncio.run_coroutine_threadsafe(create(), self._loop).result(start_timeout)
        except BaseException:
            self._stop_loop()
            raise

    def _run_loop(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(ready.set)
        try:
            self._loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _enqueue_callbacks(
        self, items: list[tuple[Any, BaseException | None, RecordMetadata]]
    ) -> None:
        with self._cond:
            self._callbacks.extend(items)
            self._cond.notify_all()

    @property
    def aio(self) -> AIOProducer:
        return self._aio

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp_ms: int | None = None,
    ) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if on_delivery is not None and not callable(on_delivery):
            raise TypeError("on_delivery must be callable")
        aio = self._aio
        if aio.serializers.active:
            key, value = aio.serializers.apply(key, value)
        status = aio._try_append(
            topic, value, key, headers, partition, timestamp_ms, on_delivery, True, True
        )
        if status:
            self._not_on_producer_thread("a blocking produce")
            asyncio.run_coroutine_threadsafe(
                aio._append_slow(topic, value, key, headers, partition, timestamp_ms, on_delivery),
                self._loop,
            ).result()

    def poll(self, timeout: float | None = 0.0) -> int:
        """Run queued delivery callbacks on this thread; wait up to ``timeout`` s (None:
        forever) for the first one. Returns how many ran."""
        if not self._callbacks and timeout != 0:
            with self._cond:
                if not self._callbacks:
                    self._cond.wait(timeout)
        served = 0
        callbacks = self._callbacks
        while True:
            try:
                callback, error, metadata = callbacks.popleft()
            except IndexError:
                return served
            served += 1
            callback(error, metadata)

    def _not_on_producer_thread(self, what: str) -> None:
        if threading.current_thread() is self._thread:
            raise ProducerError(f"{what}() cannot be called from a delivery callback")

    def flush(self, timeout: float | None = None) -> int:
        """Deliver everything queued, running callbacks meanwhile; returns how many records
        are still undelivered (0 unless ``timeout`` s passed first)."""
        if self._closed:
            return 0
        self._not_on_producer_thread("flush")
        future = asyncio.run_coroutine_threadsafe(self._aio.flush(), self._loop)

        def notify(_: Any) -> None:
            with self._cond:
                self._cond.notify_all()

        future.add_done_callback(notify)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not future.done():
            self.poll(0)
            with self._cond:
                if future.done() or self._callbacks:
                    continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
        if not future.done():
            future.cancel()
        elif future.exception() is not None:
            log.debug("flush ended with %s", future.exception())
        self.poll(0)
        return len(self)

    # ---- transactions (see AIOProducer): blocking, delivery callbacks run meanwhile

    def _run_txn(self, what: str, coro: Any) -> None:
        self._not_on_producer_thread(what)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        while True:
            try:
                future.result(0.05)
                break
            except concurrent.futures.TimeoutError:
                self.poll(0)
        self.poll(0)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._run_txn("init_transactions", self._aio.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._aio.begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: Mapping[tuple[str, int], int], group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        self._run_txn("send_offsets_to_transaction", self._aio.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._run_txn("commit_transaction", self._aio.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._run_txn("abort_transaction", self._aio.abort_transaction(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Flush (at most ``timeout`` s), run the remaining callbacks, stop the thread."""
        self._not_on_producer_thread("close")
        with self._close_lock:
            if self._closed:
                return
            self.flush(timeout)
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._aio.close(0), self._loop).result(30)
        finally:
            self._stop_loop()
            self.poll(0)

    def __len__(self) -> int:
        return len(self._aio)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "AIOProducer",
    "BufferFullError",
    "ConsumerGroupMetadata",
    "DeliveryTimeoutError",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "ProducerError",
    "RecordMetadata",
    "TransactionError",
]
