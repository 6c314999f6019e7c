"""The producer under injected faults: lost responses, broker error codes, slow or stuck
brokers. Faults come from a TCP proxy in front of the in-process broker (it drops the
connection right before chosen responses reach the client) or from patching
``BrokerConnection.request`` to answer Produce with an error instead of the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from slipstream.broker.broker import Broker
from slipstream.client.connection import BrokerConnection
from slipstream.client.producer import AIOProducer, BufferFullError, DeliveryTimeoutError
from slipstream.protocol.apis.produce import (
    ProduceRequest,
    ProduceResponse,
    ProduceResponsePartition,
    ProduceResponseTopic,
)
from slipstream.protocol.errors import BY_NAME, ErrorCode, KafkaError
from slipstream.protocol.record_batch import parse_header
from slipstream.protocol.records import Record, iter_batches

PRODUCE_KEY = 0
NOT_ENOUGH_REPLICAS = BY_NAME["NOT_ENOUGH_REPLICAS"].code


def create_topic(broker: Broker, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    assert broker.state is not None
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.state.topics.create(name, partitions, configs)
    return name


def log_batches(broker: Broker, topic: str, partition: int) -> list[tuple[Any, list[Record]]]:
    assert broker.state is not None
    plog = broker.state.topics.partition(topic, partition)
    assert plog is not None
    result = plog.read(plog.log_start_offset, 1 << 30)
    return list(iter_batches(b"".join(bytes(c) for c in result.chunks)))


def log_values(broker: Broker, topic: str, partition: int) -> list[bytes | None]:
    return [r.value for _, records in log_batches(broker, topic, partition) for r in records]


def producer(broker: Broker | str, **config: Any) -> AIOProducer:
    config.setdefault("request_timeout_ms", 5000)
    config.setdefault("delivery_timeout_ms", 15000)
    config.setdefault("max_block_ms", 5000)
    config.setdefault("retry_backoff_ms", 10)
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap_servers
    return AIOProducer(bootstrap, **config)


# --------------------------------------------------------------------------- proxy


class DroppingProxy:
    """TCP proxy that closes the client's connection instead of delivering chosen
    responses: ``drop(api_key, n)`` returns True for the n-th (1-based) response of
    that API that should be lost after the broker processed the request."""

    def __init__(self, drop: Callable[[int, int], bool]) -> None:
        self.drop = drop
        self.upstream_port = 0
        self.port = 0
        self.dropped = 0
        self.counts: dict[int, int] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.update((client_w, up_w))
        pending: dict[int, int] = {}  # correlation id -> api key

        async def frames(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
            while True:
                size = await reader.readexactly(4)
                yield size + await reader.readexactly(struct.unpack(">i", size)[0])

        async def requests() -> None:
            async for frame in frames(client_r):
                api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
                pending[correlation_id] = api_key
                up_w.write(frame)
                await up_w.drain()

        async def responses() -> None:
            async for frame in frames(up_r):
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                api_key = pending.pop(correlation_id, -1)
                n = self.counts[api_key] = self.counts.get(api_key, 0) + 1
                if self.drop(api_key, n):
                    self.dropped += 1
                    return
                client_w.write(frame)
                await client_w.drain()

        pumps = [asyncio.ensure_future(requests()), asyncio.ensure_future(responses())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, up_w):
                writer.close()
                self._writers.discard(writer)
            self._tasks.discard(task)


@contextlib.asynccontextmanager
async def broker_behind_proxy(
    drop: Callable[[int, int], bool],
) -> AsyncIterator[tuple[Broker, DroppingProxy]]:
    proxy = DroppingProxy(drop)
    await proxy.start()
    # The broker advertises the proxy, so every client connection goes through it.
    async with Broker(storage="memory", port=0, advertised_port=proxy.port) as b:
        proxy.upstream_port = b.port
        try:
            yield b, proxy
        finally:
            await proxy.stop()


async def test_lost_responses_are_retried_without_duplicates() -> None:
    # lose the 2nd, 5th and 6th Produce answers (the broker has written those batches)
    lost = {2, 5, 6}
    async with broker_behind_proxy(lambda key, n: key == PRODUCE_KEY and n in lost) as (b, proxy):
        topic = create_topic(b, 2)
        async with producer(f"127.0.0.1:{proxy.port}", linger_ms=0, batch_size=600) as p:
            futures = []
            for i in range(400):
                futures.append(await p.send(topic, b"%d" % i, partition=i % 2))
                if i % 50 == 0:
                    await asyncio.sleep(0.005)
            await p.flush(timeout=10)
            metas = [f.result() for f in futures]
            pid = p.producer_id
        assert proxy.dropped == len(lost)
        for partition in range(2):
            # exactly once, in send order, and every future reports where its record is
            assert log_values(b, topic, partition) == [b"%d" % i for i in range(partition, 400, 2)]
            offsets = [m.offset for i, m in enumerate(metas) if i % 2 == partition]
            assert offsets == list(range(200))
            headers = [h for h, _ in log_batches(b, topic, partition)]
            assert {h.producer_id for h in headers} == {pid}
            seq = 0
            for h in headers:
                assert h.base_sequence == seq
                seq += h.record_count


async def test_lost_response_of_the_first_batch() -> None:
    async with broker_behind_proxy(lambda key, n: key == PRODUCE_KEY and n == 1) as (b, proxy):
        topic = create_topic(b, 1)
        async with producer(f"127.0.0.1:{proxy.port}") as p:
            meta = await p.send_and_wait(topic, b"once")
        assert proxy.dropped == 1
        assert meta.offset == 0
        assert log_values(b, topic, 0) == [b"once"]


async def test_chaos_lost_responses_and_broker_errors_keep_exactly_once(monkeypatch: Any) -> None:
    """Lost answers, leader errors and a broker forgetting the producer, all at once:
    every record is written once, in send order, and the epoch bumps renumber safely."""
    # Every tenth answer is lost: how many requests carry the 6000 records depends on timing,
    # and a fixed stride guarantees several losses even when batching packs them tightly.
    lost = set(range(3, 5000, 10))
    seen: set[tuple[int, int, int]] = set()
    first_attempt = [True]

    def plan(n: int) -> int | None:
        # Strides, not chances: the request count varies with timing, the faults must not.
        if n % 12 == 5:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        # a broker that lost our producer state can only say so about batches it never saw
        if n % 17 == 8 and first_attempt[0]:
            return ErrorCode.UNKNOWN_PRODUCER_ID
        return None

    async with broker_behind_proxy(lambda key, n: key == PRODUCE_KEY and n in lost) as (b, proxy):
        topic = create_topic(b, 3)
        with produce_errors(monkeypatch, plan) as calls:
            inject = BrokerConnection.request

            async def spy(self: BrokerConnection, spec: Any, request: Any, **kw: Any) -> Any:
                if spec.key == PRODUCE_KEY:
                    keys = [
                        (h.producer_id, h.producer_epoch, h.base_sequence)
                        for t in request.topic_data
                        for pd in t.partition_data
                        for h in [parse_header(pd.records)]
                    ]
                    first_attempt[0] = not any(k in seen for k in keys)
                    seen.update(keys)
                return await inject(self, spec, request, **kw)

            monkeypatch.setattr(BrokerConnection, "request", spy)
            async with producer(f"127.0.0.1:{proxy.port}", linger_ms=1, batch_size=800) as p:
                futures = []
                for i in range(6000):
                    futures.append(await p.send(topic, b"%d" % i, key=b"%d" % (i % 10)))
                    if i % 300 == 0:
                        await asyncio.sleep(0)
                await p.flush(timeout=30)
                metas = [f.result() for f in futures]
        assert proxy.dropped > 3 and calls["injected"] > 3
        for partition in range(3):
            mine = [i for i, m in enumerate(metas) if m.partition == partition]
            assert log_values(b, topic, partition) == [b"%d" % i for i in mine]
            assert [metas[i].offset for i in mine] == list(range(len(mine)))


# --------------------------------------------------------------------------- error codes


@contextlib.contextmanager
def produce_errors(
    monkeypatch: Any, plan: Callable[[int], int | None], message: str | None = None
) -> Any:
    """Answer the n-th Produce request (1-based) with ``plan(n)`` as every partition's
    error code, without the broker seeing it; None passes it through."""
    original = BrokerConnection.request
    calls = {"n": 0, "injected": 0}

    async def patched(self: BrokerConnection, spec: Any, request: Any, **kw: Any) -> Any:
        if spec.key != PRODUCE_KEY:
            return await original(self, spec, request, **kw)
        calls["n"] += 1
        code = plan(calls["n"])
        if code is None:
            return await original(self, spec, request, **kw)
        calls["injected"] += 1
        assert isinstance(request, ProduceRequest)
        return ProduceResponse(
            responses=[
                ProduceResponseTopic(
                    name=t.name,
                    partition_responses=[
                        ProduceResponsePartition(
                            index=pd.index, error_code=code, base_offset=-1, error_message=message
                        )
                        for pd in t.partition_data
                    ],
                )
                for t in request.topic_data
            ]
        )

    monkeypatch.setattr(BrokerConnection, "request", patched)
    yield calls


@pytest.fixture
async def broker() -> Any:
    async with Broker(storage="memory", port=0) as b:
        yield b


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ],
)
async def test_retriable_errors_are_retried(broker: Broker, monkeypatch: Any, code: int) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(monkeypatch, lambda n: code if n <= 2 else None) as calls:
        async with producer(broker) as p:
            p.cluster.topics.clear()  # a metadata refresh must bring the leader back
            futures = [await p.send(topic, b"v%d" % i) for i in range(10)]
            metas = [await f for f in futures]
    assert calls["injected"] == 2
    assert [m.offset for m in metas] == list(range(10))
    assert log_values(broker, topic, 0) == [b"v%d" % i for i in range(10)]


async def test_non_retriable_error_fails_with_the_broker_message(
    broker: Broker, monkeypatch: Any
) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(
        monkeypatch,
        lambda n: ErrorCode.INVALID_RECORD if n == 1 else None,
        message="record 0 has a bad timestamp",
    ):
        async with producer(broker) as p:
            first = await p.send(topic, b"bad")
            with pytest.raises(KafkaError) as info:
                await first
            assert info.value.code == ErrorCode.INVALID_RECORD
            assert "record 0 has a bad timestamp" in str(info.value)
            old_pid = p.producer_id
            # the hole in the sequence makes the producer continue under a new id/epoch
            meta = await p.send_and_wait(topic, b"good")
            assert (p.producer_id, p.producer_epoch) != (old_pid, 0) or p.producer_epoch > 0
    assert meta.offset == 0
    assert log_values(broker, topic, 0) == [b"good"]


async def test_unknown_producer_id_bumps_the_epoch_and_retries(
    broker: Broker, monkeypatch: Any
) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(monkeypatch, lambda n: ErrorCode.UNKNOWN_PRODUCER_ID if n == 2 else None):
        async with producer(broker, linger_ms=0) as p:
            first = await p.send_and_wait(topic, b"a")
            old_pid = p.producer_id
            futures = [await p.send(topic, b"b%d" % i) for i in range(5)]
            metas = [await f for f in futures]
            new_pid = p.producer_id
    assert new_pid != old_pid
    assert first.offset == 0 and [m.offset for m in metas] == list(range(1, 6))
    assert log_values(broker, topic, 0) == [b"a"] + [b"b%d" % i for i in range(5)]
    headers = [h for h, _ in log_batches(broker, topic, 0)]
    assert headers[0].producer_id == old_pid
    assert {h.producer_id for h in headers[1:]} == {new_pid}
    assert headers[1].base_sequence == 0  # renumbered under the new id


async def test_out_of_order_sequence_for_the_expected_batch_fails_it(
    broker: Broker, monkeypatch: Any
) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(
        monkeypatch, lambda n: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER if n == 2 else None
    ):
        async with producer(broker, linger_ms=0) as p:
            await p.send_and_wait(topic, b"a")
            with pytest.raises(KafkaError) as info:
                await p.send_and_wait(topic, b"b")
            assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert "new producer epoch" in str(info.value)
            meta = await p.send_and_wait(topic, b"c")
    assert meta.offset == 1
    assert log_values(broker, topic, 0) == [b"a", b"c"]


async def test_duplicate_sequence_counts_as_success(broker: Broker, monkeypatch: Any) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(
        monkeypatch, lambda n: ErrorCode.DUPLICATE_SEQUENCE_NUMBER if n == 1 else None
    ):
        async with producer(broker) as p:
            meta = await p.send_and_wait(topic, b"v")
    assert meta.offset == -1  # the broker had it already; it did not say where


async def test_delivery_timeout_bounds_retries(broker: Broker, monkeypatch: Any) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(monkeypatch, lambda n: NOT_ENOUGH_REPLICAS):
        async with producer(broker, delivery_timeout_ms=400, retry_backoff_ms=20) as p:
            # (when the timeout ends the retries: test_producer_policy, on a manual clock)
            fut = await p.send(topic, b"v")
            with pytest.raises(DeliveryTimeoutError) as info:
                await fut
            assert "NOT_ENOUGH_REPLICAS" in str(info.value)
            assert info.value.code == ErrorCode.REQUEST_TIMED_OUT


async def test_retries_limit(broker: Broker, monkeypatch: Any) -> None:
    topic = create_topic(broker, 1)
    with produce_errors(monkeypatch, lambda n: ErrorCode.NOT_LEADER_OR_FOLLOWER) as calls:
        async with producer(broker, retries=2) as p:
            with pytest.raises(KafkaError) as info:
                await p.send_and_wait(topic, b"v")
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert calls["n"] == 3  # the first attempt and two retries


# --------------------------------------------------------------------------- memory bound


@contextlib.contextmanager
def slow_produce(monkeypatch: Any, delay: float | asyncio.Event) -> Any:
    original = BrokerConnection.request

    async def patched(self: BrokerConnection, spec: Any, request: Any, **kw: Any) -> Any:
        if spec.key == PRODUCE_KEY:
            if isinstance(delay, asyncio.Event):
                await delay.wait()
            else:
                await asyncio.sleep(delay)
        return await original(self, spec, request, **kw)

    monkeypatch.setattr(BrokerConnection, "request", patched)
    yield


async def test_full_buffer_blocks_send_until_memory_frees(broker: Broker, monkeypatch: Any) -> None:
    topic = create_topic(broker, 1)
    acknowledge = asyncio.Event()  # Produce requests wait for it: until then no memory frees
    with slow_produce(monkeypatch, acknowledge):
        async with producer(broker, buffer_memory=3000, batch_size=1000, linger_ms=5) as p:
            blocked = 0
            futures = []
            peak = 0
            for _ in range(60):
                send = asyncio.ensure_future(p.send(topic, b"x" * 100))
                while not send.done() and not p._memory_waiters:
                    await asyncio.sleep(0.001)
                if not send.done():
                    # Waiting for buffer memory, which only an acknowledgement frees.
                    blocked += 1
                    acknowledge.set()
                futures.append(await send)
                peak = max(peak, p._acc.buffer_used)
            await p.flush()
            assert [f.result().offset for f in futures] == list(range(60))
    assert peak <= 3000
    assert blocked >= 1  # some sends waited for an acknowledgement
    assert log_values(broker, topic, 0) == [b"x" * 100] * 60


async def test_buffer_full_error_after_max_block(broker: Broker, monkeypatch: Any) -> None:
    topic = create_topic(broker, 1)
    stuck = asyncio.Event()
    with slow_produce(monkeypatch, stuck):
        p = await producer(broker, buffer_memory=2000, max_block_ms=200).start()
        try:
            futures = [await p.send(topic, b"x" * 100) for _ in range(10)]
            # (that it waits max_block_ms, no less and no more: test_producer_policy's
            # test_send_waits_max_block_ms_for_memory_then_fails, on a manual clock)
            with pytest.raises(BufferFullError, match="buffer_memory"):
                for _ in range(100):
                    await p.send(topic, b"x" * 100)
            stuck.set()
            await p.flush(timeout=5)
            assert all(f.result().offset >= 0 for f in futures)
        finally:
            stuck.set()
            await p.close()


async def test_close_with_timeout_fails_what_is_left(broker: Broker, monkeypatch: Any) -> None:
    from slipstream.client.producer import ProducerClosedError

    topic = create_topic(broker, 1)
    stuck = asyncio.Event()
    with slow_produce(monkeypatch, stuck):
        p = await producer(broker).start()
        fut = await p.send(topic, b"v")
        # (that close waits its timeout, no less and no more: test_producer_policy's
        # test_close_waits_its_timeout_for_delivery_then_fails_what_is_left, on a manual clock)
        await p.close(timeout=0.2)
        with pytest.raises(ProducerClosedError):
            await fut
        stuck.set()


# --------------------------------------------------------------------------- connections


async def test_producer_reconnects_after_a_broker_restart(tmp_path: Any) -> None:
    first = await Broker(storage="disk", data_dir=str(tmp_path), port=0).start()
    port = first.port
    topic = create_topic(first, 1)
    p = await producer(first, linger_ms=0, retry_backoff_ms=20).start()
    second: Broker | None = None
    try:
        assert (await p.send_and_wait(topic, b"before")).offset == 0
        await first.stop()
        # sent while the broker is down: retried until it is back
        pending = await p.send(topic, b"during")
        await asyncio.sleep(0.2)
        assert not pending.done()
        second = await Broker(storage="disk", data_dir=str(tmp_path), port=port).start()
        meta = await asyncio.wait_for(pending, 10)
        assert meta.offset == 1
        assert (await p.send_and_wait(topic, b"after")).offset == 2
        assert log_values(second, topic, 0) == [b"before", b"during", b"after"]
    finally:
        await p.close(timeout=1)
        if second is not None:
            await second.stop()


async def test_unreachable_bootstrap_fails_start() -> None:
    p = AIOProducer("127.0.0.1:1", request_timeout_ms=1000)
    with pytest.raises(ConnectionError, match="bootstrap"):
        await p.start()
    await p.close()


async def test_send_before_start_is_an_error() -> None:
    from slipstream.client.producer import ProducerError

    p = AIOProducer("127.0.0.1:1")
    with pytest.raises(ProducerError, match="start"):
        await p.send("t", b"v")
