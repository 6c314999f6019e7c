"""What client_throughput.py runs in its child interpreters, one client library at a time:
produce N values, consume them from the earliest offset, fill a topic, or consume slowly
in a Slipstream ConsumerGroup while sampling this process's RSS. Run as a script
(``python bench/client_loads.py KIND CLIENT BOOTSTRAP TOPIC ...``), it does one of them
and prints the result as a JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any

MIB = 1024 * 1024
PARTITIONS = 4
VALUE_SIZE = 100
MEM_VALUE_SIZE = 1024
SCRIPT = os.path.abspath(__file__)  # what the parent runs

# (label, max_partition_fetch_bytes, fetch_max_bytes, partition_buffer_bytes)
MEMORY_SETTINGS = [
    ("tiny (overhead reference)", 16 * 1024, 64 * 1024, 16 * 1024),
    ("small", 256 * 1024, 1 * MIB, 256 * 1024),
    ("large", 4 * MIB, 16 * MIB, 4 * MIB),
]


def _value(i: int, size: int) -> bytes:
    return (b"%012d" % i) + b"x" * (size - 12)


async def _produce_slip_aio(bs: str, topic: str, n: int) -> None:
    from slipstream.client.producer import AIOProducer

    async with AIOProducer(bs, acks="all") as p:
        for i in range(n):
            await p.send(topic, _value(i, VALUE_SIZE))
        await p.flush()


def _produce_slip_sync(bs: str, topic: str, n: int) -> None:
    from slipstream.client.producer import Producer

    failed: list[BaseException] = []

    def cb(err: BaseException | None, _md: Any) -> None:
        if err is not None:
            failed.append(err)

    with Producer(bs, acks="all") as p:
        for i in range(n):
            p.produce(topic, _value(i, VALUE_SIZE), on_delivery=cb)
            if i % 10000 == 0:
                p.poll(0)
        p.flush(120)
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[0]!r}")


async def _produce_aiokafka(bs: str, topic: str, n: int) -> None:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True)
    await p.start()
    try:
        for i in range(n):
            await p.send(topic, _value(i, VALUE_SIZE))
        await p.flush()
    finally:
        await p.stop()


def _produce_kafka_python(bs: str, topic: str, n: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs, acks="all", enable_idempotence=True)
    for i in range(n):
        p.send(topic, _value(i, VALUE_SIZE))
    p.flush(timeout=120)
    p.close()


def _produce_confluent(
    bs: str, topic: str, n: int, size: int = VALUE_SIZE, batch_size: int | None = None
) -> None:
    from confluent_kafka import Producer

    failed: list[Any] = []

    def cb(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    p = Producer({
        "bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
    } | ({"batch.size": batch_size} if batch_size else {}))
    for i in range(n):
        while True:
            try:
                p.produce(topic, _value(i, size), on_delivery=cb)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("confluent flush left messages undelivered")
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[0]}")


def child_produce(client: str, bs: str, topic: str, n: int) -> dict[str, Any]:
    start = time.perf_counter()
    if client == "slipstream-aio":
        asyncio.run(_produce_slip_aio(bs, topic, n))
    elif client == "slipstream-sync":
        _produce_slip_sync(bs, topic, n)
    elif client == "aiokafka":
        asyncio.run(_produce_aiokafka(bs, topic, n))
    elif client == "kafka-python":
        _produce_kafka_python(bs, topic, n)
    elif client == "confluent-kafka":
        _produce_confluent(bs, topic, n)
    else:
        raise ValueError(client)
    return {"seconds": time.perf_counter() - start, "count": n}


class _Clock:
    """Start (consumer created; for a group: the session's setup) to the N-th message."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.nbytes = 0
        self.first = time.perf_counter()
        self.last = 0.0

    def restart(self) -> None:
        if self.count == 0:
            self.first = time.perf_counter()

    def add(self, k: int, nbytes: int) -> bool:
        self.count += k
        self.nbytes += nbytes
        if self.count >= self.n:
            self.last = time.perf_counter()
            return True
        return False

    def result(self, started: float) -> dict[str, Any]:
        return {
            "seconds": self.last - self.first,
            "total_seconds": self.last - started,
            "count": self.count,
            "bytes": self.nbytes,
        }


async def _consume_slip_aio(bs: str, topic: str, clock: _Clock) -> None:
    from slipstream.client.aio_consumer import AIOConsumer

    c = AIOConsumer(bs, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        await c.assign([(topic, p) for p in range(PARTITIONS)])
        while True:
            msgs = await c.getmany(1.0)
            if msgs and clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                return
    finally:
        await c.close()


def _consume_slip_poll(bs: str, topic: str, clock: _Clock) -> None:
    from slipstream.client.consumer import Consumer

    c = Consumer(bs, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.assign([(topic, p) for p in range(PARTITIONS)])
        while True:
            msgs = c.poll(1.0)
            if msgs and clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                return
    finally:
        c.close()


async def _consume_slip_group(
    bs: str, topic: str, clock: _Clock, group: str, sleep_s: float = 0.0,
    config: dict[str, Any] | None = None, stop_after: float | None = None,
) -> None:
    from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler

    done = asyncio.Event()

    class Handler(ConsumerGroupHandler):
        async def setup(self, session: Any) -> None:
            clock.restart()

        async def consume_claim(self, session: Any, claim: Any) -> None:
            async for msg in claim.messages():
                if sleep_s:
                    await asyncio.sleep(sleep_s)
                session.mark_message(msg)
                # Counted inline, not with a clock.add() call per message: the other rows
                # call it once per batch, so the harness's own per-message cost (a count and
                # len(value)) stays the same for every client.
                clock.count += 1
                clock.nbytes += len(msg.value or b"")
                if clock.count >= clock.n and clock.add(0, 0):
                    done.set()

    g = ConsumerGroup(bs, group, auto_offset_reset="earliest", **(config or {}))

    async def loop() -> None:
        while not done.is_set() and not g.closed:
            await g.consume([topic], Handler())

    task = asyncio.create_task(loop())
    try:
        waiter = asyncio.create_task(done.wait())
        finished, _ = await asyncio.wait(
            {task, waiter}, timeout=stop_after, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        if task in finished:
            task.result()
    finally:
        await asyncio.wait_for(g.close(), 30)
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _consume_aiokafka(bs: str, topic: str, clock: _Clock) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bs, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await c.start()
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while True:
            batches = await c.getmany(timeout_ms=1000)
            for msgs in batches.values():
                if clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                    return
    finally:
        await c.stop()


def _consume_kafka_python(bs: str, topic: str, clock: _Clock) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bs, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        while True:
            for msgs in c.poll(timeout_ms=1000).values():
                if clock.add(len(msgs), sum(len(m.value or b"") for m in msgs)):
                    return
    finally:
        c.close()


def _consume_confluent(bs: str, topic: str, clock: _Clock) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bs, "group.id": f"bench-unused-{os.getpid()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        # Fetching pauses for fetch.queue.backoff.ms (default 1 s) whenever
        # queued.min.messages are buffered, which 200k small records reach: as in
        # broker_throughput.py, a client artefact, not consuming.
        "fetch.queue.backoff.ms": 10,
    })
    try:
        # Metadata first, inside the window (the other clients' start-up fetches it too):
        # partitions assigned before librdkafka knows their leader wait out a 500 ms
        # offset-query retry timer ("no current leader"), which would dominate this run.
        c.list_topics(topic, timeout=10.0)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while True:
            msgs = [m for m in c.consume(num_messages=10000, timeout=1.0) if not m.error()]
            if msgs and clock.add(len(msgs), sum(len(m.value() or b"") for m in msgs)):
                return
    finally:
        c.close()


_CONSUMER_MODULES = {
    "slipstream-aio": "slipstream.client.aio_consumer",
    "slipstream-poll": "slipstream.client.consumer",
    "slipstream-group": "slipstream.client.consumer_group",
    "aiokafka": "aiokafka",
    "kafka-python": "kafka",
    "confluent-kafka": "confluent_kafka",
}


def child_consume(client: str, bs: str, topic: str, n: int) -> dict[str, Any]:
    import importlib

    # Import the client library before the clock starts (for every client alike): the
    # measurement starts when the consumer is created, not when its package is loaded.
    importlib.import_module(_CONSUMER_MODULES[client])
    clock = _Clock(n)
    started = time.perf_counter()
    if client == "slipstream-aio":
        asyncio.run(_consume_slip_aio(bs, topic, clock))
    elif client == "slipstream-poll":
        _consume_slip_poll(bs, topic, clock)
    elif client == "slipstream-group":
        asyncio.run(_consume_slip_group(bs, topic, clock, f"bench-group-{os.getpid()}"))
    elif client == "aiokafka":
        asyncio.run(_consume_aiokafka(bs, topic, clock))
    elif client == "kafka-python":
        _consume_kafka_python(bs, topic, clock)
    elif client == "confluent-kafka":
        _consume_confluent(bs, topic, clock)
    else:
        raise ValueError(client)
    return clock.result(started)


class OwnRssSampler:
    """This process's RSS every ``interval`` seconds in a thread: the peak and every sample."""

    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self._proc = psutil.Process()
        self.peak = self._proc.memory_info().rss
        self.samples: list[tuple[float, int]] = []
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            rss = self._proc.memory_info().rss
            self.samples.append((time.monotonic(), rss))
            self.peak = max(self.peak, rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self._proc.memory_info().rss)


def child_memory(bs: str, topic: str, setting: str, seconds: float, sleep_ms: float) -> dict[str, Any]:
    import gc

    import slipstream.client.consumer_group  # noqa: F401  (import before the baseline)

    _label, mpfb, fmb, pbb = next(s for s in MEMORY_SETTINGS if s[0] == setting)
    config = {
        "max_partition_fetch_bytes": mpfb, "fetch_max_bytes": fmb, "partition_buffer_bytes": pbb,
    }
    gc.collect()
    sampler = OwnRssSampler()
    baseline = sampler.peak
    clock = _Clock(10**12)
    asyncio.run(_consume_slip_group(
        bs, topic, clock, f"bench-mem-{os.getpid()}", sleep_s=sleep_ms / 1000,
        config=config, stop_after=seconds,
    ))
    peak = sampler.stop()
    samples = sampler.samples
    half = samples[0][0] + (samples[-1][0] - samples[0][0]) / 2 if samples else 0.0
    first = max((r for t, r in samples if t <= half), default=baseline)
    second = max((r for t, r in samples if t > half), default=baseline)
    return {
        "baseline": baseline, "peak": peak, "consumed": clock.count,
        "peak_first_half": first, "peak_second_half": second,
    }


def child_main(argv: list[str]) -> int:
    kind, client, bs, topic = argv[:4]
    if kind == "produce":
        result = child_produce(client, bs, topic, int(argv[4]))
    elif kind == "consume":
        result = child_consume(client, bs, topic, int(argv[4]))
    elif kind == "fill":
        start = time.perf_counter()
        # 16 KiB batches (the Java default): a fetch returns at least one whole batch,
        # so librdkafka's 1 MB batches would exceed the smaller fetch limits by design.
        _produce_confluent(bs, topic, int(argv[4]), int(argv[5]), batch_size=16384)
        result = {"seconds": time.perf_counter() - start}
    elif kind == "memory":
        result = child_memory(bs, topic, client, float(argv[4]), float(argv[5]))
    else:
        raise ValueError(kind)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
