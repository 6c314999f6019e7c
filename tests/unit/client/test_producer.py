"""AIOProducer and Producer against a real in-process broker.

Records are read back with confluent-kafka (an independent client) or straight
from the broker's partition logs (to see batches, producer ids and sequences).
Blocking clients run in a worker thread while the broker serves on the test's loop.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka import Producer as CKProducer
from kafka.partitioner import murmur2 as kp_murmur2

from slipstream.broker.broker import Broker
from slipstream.client.producer import (
    AIOProducer,
    Producer,
    ProducerClosedError,
    RecordMetadata,
)
from slipstream.protocol import compression
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.record_batch import BatchHeader
from slipstream.protocol.records import Record, iter_batches

TIMEOUT = 10.0


def _name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(broker: Broker, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    assert broker.state is not None
    name = _name()
    broker.state.topics.create(name, partitions, configs)
    return name


def log_batches(
    broker: Broker, topic: str, partition: int
) -> list[tuple[BatchHeader, list[Record]]]:
    assert broker.state is not None
    plog = broker.state.topics.partition(topic, partition)
    assert plog is not None
    result = plog.read(plog.log_start_offset, 1 << 30)
    return list(iter_batches(b"".join(bytes(c) for c in result.chunks)))


def log_records(broker: Broker, topic: str, partition: int) -> list[Record]:
    return [r for _, records in log_batches(broker, topic, partition) for r in records]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record of the topic, read with confluent-kafka (blocking; run in a thread)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": _name("g"),
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.2):
                assert msg.error() is None, msg.error()
                out.append(msg)
        # anything beyond the expected count would be a duplicate: look a little longer
        for msg in consumer.consume(1000, timeout=0.3):
            out.append(msg)
        return out
    finally:
        consumer.close()


def create_topic_blocking(
    broker: Broker, partitions: int = 1, configs: dict[str, str] | None = None
) -> str:
    """create_topic for the threaded ``with Broker(...)`` form (runs on the broker's loop)."""

    async def create() -> str:
        return create_topic(broker, partitions, configs)

    assert broker._thread_loop is not None
    return asyncio.run_coroutine_threadsafe(create(), broker._thread_loop).result(TIMEOUT)


@pytest.fixture
async def broker() -> Any:
    async with Broker(storage="memory", port=0) as b:
        yield b


def producer(broker: Broker, **config: Any) -> AIOProducer:
    config.setdefault("request_timeout_ms", 5000)
    config.setdefault("delivery_timeout_ms", 15000)
    config.setdefault("max_block_ms", 5000)
    return AIOProducer(broker.bootstrap_servers, **config)


# --------------------------------------------------------------------------- round trip


async def test_round_trip_across_partitions(broker: Broker) -> None:
    topic = create_topic(broker, 4)
    sent = []
    async with producer(broker, linger_ms=2) as p:
        assert p.idempotent and p.producer_id >= 0
        futures = []
        for i in range(2000):
            key = None if i % 5 == 0 else f"key-{i % 37}".encode()
            value = None if i % 97 == 0 else f"value-{i}".encode() * (1 + i % 3)
            headers = [("h", f"{i}".encode()), ("empty", None)] if i % 3 == 0 else None
            ts = 1_700_000_000_000 + i
            futures.append(await p.send(topic, value, key=key, headers=headers, timestamp_ms=ts))
            sent.append((key, value, headers or [], ts))
        await p.flush()
        metas: list[RecordMetadata] = [f.result() for f in futures]
    msgs = await asyncio.to_thread(consume_all, broker.bootstrap_servers, topic, 4, len(sent))
    assert len(msgs) == len(sent)  # exactly once
    by_position = {(m.partition(), m.offset()): m for m in msgs}
    assert len(by_position) == len(msgs)
    last_offset: dict[int, int] = {}
    for (key, value, headers, ts), meta in zip(sent, metas, strict=True):
        assert meta.topic == topic and meta.timestamp == ts
        # send order is log order within a partition
        assert meta.offset > last_offset.get(meta.partition, -1)
        last_offset[meta.partition] = meta.offset
        msg = by_position[(meta.partition, meta.offset)]
        assert msg.key() == key and msg.value() == value
        assert (msg.headers() or []) == headers
        assert msg.timestamp() == (1, ts)  # CreateTime
    # keyed records all went through murmur2; unkeyed ones were spread (sticky)
    assert len({m.partition for m in metas}) == 4


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_each_compression_codec(broker: Broker, codec: str) -> None:
    topic = create_topic(broker, 1)
    values = [f"record {i} ".encode() * 20 for i in range(300)]
    async with producer(broker, compression=codec, linger_ms=20) as p:
        futures = [await p.send(topic, v, key=b"k%d" % i) for i, v in enumerate(values)]
        await p.flush()
        assert [f.result().offset for f in futures] == list(range(300))
    batches = log_batches(broker, topic, 0)
    assert all(h.compression == compression.codec_by_name(codec) for h, _ in batches)
    msgs = await asyncio.to_thread(consume_all, broker.bootstrap_servers, topic, 1, 300)
    assert [m.value() for m in msgs] == values
    assert [m.key() for m in msgs] == [b"k%d" % i for i in range(300)]


async def test_keyed_records_follow_the_java_partitioner(broker: Broker) -> None:
    topic = create_topic(broker, 7)
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"\x00\xff" * 9]
    async with producer(broker) as p:
        metas = await asyncio.gather(*[await p.send(topic, b"v", key=k) for k in keys])
    expected = [(kp_murmur2(k) & 0x7FFFFFFF) % 7 for k in keys]
    assert [m.partition for m in metas] == expected

    # and librdkafka's murmur2_random (the Java-compatible setting) agrees
    other = create_topic(broker, 7)

    def produce_with_librdkafka() -> list[int]:
        got: dict[bytes, int] = {}
        ck = CKProducer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "partitioner": "murmur2_random",
                "log_level": 0,
            }
        )
        for k in keys:
            ck.produce(
                other,
                b"v",
                key=k,
                on_delivery=lambda err, msg: got.update({msg.key(): msg.partition()}),
            )
        assert ck.flush(TIMEOUT) == 0
        return [got[k] for k in keys]

    assert await asyncio.to_thread(produce_with_librdkafka) == expected


async def test_unkeyed_records_stick_to_a_partition_per_batch(broker: Broker) -> None:
    topic = create_topic(broker, 6)
    async with producer(broker, batch_size=2000, linger_ms=50) as p:
        futures = [await p.send(topic, b"x" * 100) for _ in range(400)]
        await p.flush()
        partitions = [f.result().partition for f in futures]
    # runs of ~batch_size bytes on one partition, then a switch
    switches = sum(1 for a, b in itertools.pairwise(partitions) if a != b)
    assert 10 <= switches <= 40
    assert len(set(partitions)) > 1


# --------------------------------------------------------------------------- batching


async def test_linger_collects_records_into_one_batch(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    # (that linger holds a batch back until it is due: test_producer_accumulator's
    # test_linger_then_ready, on a manual clock)
    async with producer(broker, linger_ms=200) as p:
        futures = [await p.send(topic, b"v%d" % i) for i in range(50)]
        await asyncio.gather(*futures)
    batches = log_batches(broker, topic, 0)
    assert [h.record_count for h, _ in batches] == [50]


async def test_batch_size_splits_batches(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, linger_ms=600_000, batch_size=1200) as p:
        futures = [await p.send(topic, b"x" * 100) for _ in range(100)]
        # Full batches go out without waiting for linger (ten minutes here; the last
        # batch, 10 records, lingers). On a manual clock: test_full_batch_is_ready_at_once...
        await asyncio.wait_for(asyncio.gather(*futures[:90]), 60)
        await p.flush()
    counts = [h.record_count for h, _ in log_batches(broker, topic, 0)]
    assert sum(counts) == 100
    assert len(counts) >= 10 and max(counts) <= 10
    assert all(h.size <= 1200 for h, _ in log_batches(broker, topic, 0))


async def test_one_request_carries_batches_for_many_partitions(
    broker: Broker, monkeypatch: Any
) -> None:
    from slipstream.client.connection import BrokerConnection

    topic = create_topic(broker, 5)
    sizes: list[int] = []
    original = BrokerConnection.request

    async def counting(self: BrokerConnection, spec: Any, request: Any, **kw: Any) -> Any:
        if spec.key == 0:
            sizes.append(sum(len(t.partition_data) for t in request.topic_data))
        return await original(self, spec, request, **kw)

    monkeypatch.setattr(BrokerConnection, "request", counting)
    async with producer(broker, linger_ms=100) as p:
        futures = [await p.send(topic, b"v", partition=i % 5) for i in range(50)]
        await asyncio.gather(*futures)
    assert sizes == [5]


# --------------------------------------------------------------------------- idempotence


async def test_idempotent_sequences_increase(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, linger_ms=0) as p:
        for round_ in range(4):
            futures = [await p.send(topic, b"r%d-%d" % (round_, i)) for i in range(10 + round_)]
            await p.flush()
            assert all(f.done() for f in futures)
        pid = p.producer_id
    headers = [h for h, _ in log_batches(broker, topic, 0)]
    assert {h.producer_id for h in headers} == {pid}
    assert {h.producer_epoch for h in headers} == {0}
    expected_seq = 0
    for h in headers:
        assert h.base_sequence == expected_seq
        expected_seq += h.record_count
    assert expected_seq == sum(10 + r for r in range(4))


async def test_non_idempotent_producer_sends_no_producer_id(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, enable_idempotence=False) as p:
        await p.send_and_wait(topic, b"v")
        assert p.producer_id == -1
    [(header, _)] = log_batches(broker, topic, 0)
    assert header.producer_id == -1 and header.base_sequence == -1


async def test_acks_1_disables_idempotence_by_default(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, acks=1) as p:
        assert not p.idempotent
        meta = await p.send_and_wait(topic, b"v")
        assert meta.offset == 0
    with pytest.raises(ValueError, match="acks"):
        producer(broker, acks=1, enable_idempotence=True)


# --------------------------------------------------------------------------- errors


async def test_message_too_large_carries_the_broker_message(broker: Broker) -> None:
    topic = create_topic(broker, 1, {"max.message.bytes": "1000"})
    async with producer(broker) as p:
        ok = await p.send(topic, b"small")
        big = await p.send(topic, b"x" * 5000)
        with pytest.raises(KafkaError) as info:
            await big
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert "max.message.bytes=1000" in str(info.value)
        assert (await ok).offset == 0
        # the producer goes on (new epoch after the hole in the sequence)
        after = await p.send_and_wait(topic, b"after")
        assert after.offset == 1
    assert [r.value for r in log_records(broker, topic, 0)] == [b"small", b"after"]


async def test_record_larger_than_max_request_size_fails_at_send(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, max_request_size=1000) as p:
        with pytest.raises(KafkaError) as info:
            await p.send(topic, b"x" * 2000)
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert "max_request_size=1000" in str(info.value)


async def test_unknown_topic_with_auto_create_disabled() -> None:
    async with (
        Broker(storage="memory", port=0, auto_create_topics=False) as b,
        producer(b, topic_metadata_propagation_max_ms=200) as p,
    ):
        # (that it fails once topic_metadata_propagation_max_ms passed, not before and
        # not at max_block_ms: test_producer_policy, on a manual clock)
        with pytest.raises(KafkaError) as info:
            await p.send("no-such-topic", b"v")
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "no-such-topic" in str(info.value)


async def test_unknown_topic_is_auto_created_when_allowed(broker: Broker) -> None:
    async with producer(broker) as p:
        meta = await p.send_and_wait("auto-created", b"v")
    assert meta.offset == 0
    assert broker.state is not None and broker.state.topics.get("auto-created") is not None


async def test_explicit_partition_must_exist(broker: Broker) -> None:
    topic = create_topic(broker, 2)
    async with producer(broker) as p:
        assert (await p.send_and_wait(topic, b"v", partition=1)).partition == 1
        with pytest.raises(KafkaError, match="partition 5 does not exist"):
            await p.send(topic, b"v", partition=5)


async def test_bad_values_are_rejected(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker) as p:
        with pytest.raises(TypeError, match="value"):
            await p.send(topic, 123)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="header"):
            await p.send(topic, b"v", headers=[("h", 1)])  # type: ignore[list-item]
        # str is encoded as UTF-8; dict headers are accepted
        meta = await p.send_and_wait(topic, "välue", key="k", headers={"a": "b"})  # type: ignore[arg-type]
    [record] = log_records(broker, topic, 0)
    assert meta.offset == 0 and record.value == "välue".encode() and record.headers == [("a", b"b")]


# --------------------------------------------------------------------------- lifecycle


async def test_close_delivers_lingering_records(broker: Broker) -> None:
    topic = create_topic(broker, 3)
    p = await producer(broker, linger_ms=600_000).start()
    futures = [await p.send(topic, b"v%d" % i, partition=i % 3) for i in range(30)]
    # close sends lingering batches at once (the linger is ten minutes; on a manual
    # clock: test_producer_accumulator's test_closing_flushing_or_a_full_buffer_sends_now)
    await asyncio.wait_for(p.close(), 60)
    assert all(f.result().offset >= 0 for f in futures)
    with pytest.raises(ProducerClosedError):
        await p.send(topic, b"late")
    assert sum(len(log_records(broker, topic, i)) for i in range(3)) == 30


async def test_flush_waits_for_acknowledgements(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, linger_ms=60_000) as p:
        futures = [await p.send(topic, b"v") for _ in range(20)]
        assert len(p) == 20
        await p.flush(timeout=5)
        assert all(f.done() for f in futures) and len(p) == 0
        await p.flush()  # nothing pending: returns at once


async def test_acks_zero_is_fire_and_forget(broker: Broker) -> None:
    topic = create_topic(broker, 1)
    async with producer(broker, acks=0, linger_ms=1) as p:
        assert not p.idempotent
        futures = [await p.send(topic, b"v%d" % i) for i in range(100)]
        metas = await asyncio.gather(*futures)
    assert {m.offset for m in metas} == {-1}
    for _ in range(50):  # the broker appends after we stopped listening
        if len(log_records(broker, topic, 0)) == 100:
            break
        await asyncio.sleep(0.02)
    assert [r.value for r in log_records(broker, topic, 0)] == [b"v%d" % i for i in range(100)]


# --------------------------------------------------------------------------- sync facade


def test_sync_producer_with_poll_callbacks() -> None:
    with Broker(storage="memory", port=0) as b:
        topic = create_topic_blocking(b, 3)
        delivered: list[tuple[Any, RecordMetadata, int]] = []

        def on_delivery(err: Any, meta: RecordMetadata) -> None:
            delivered.append((err, meta, threading.get_ident()))

        with Producer(b.bootstrap_servers, linger_ms=5, request_timeout_ms=5000) as p:
            errors: list[BaseException] = []

            def worker(n: int) -> None:
                try:
                    for i in range(250):
                        p.produce(topic, b"%d-%d" % (n, i), key=b"%d" % n, on_delivery=on_delivery)
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(TIMEOUT)
            assert not errors
            assert p.flush(TIMEOUT) == 0
            p.poll(0)
        assert len(delivered) == 1000
        # callbacks ran on the thread that called flush/poll (this one)
        assert {ident for _, _, ident in delivered} == {threading.get_ident()}
        assert all(err is None for err, _, _ in delivered)
        assert len({(meta.partition, meta.offset) for _, meta, _ in delivered}) == 1000
        # per key (= per producing thread) the log keeps produce order
        msgs = consume_all(b.bootstrap_servers, topic, 3, 1000)
        assert len(msgs) == 1000
        for n in range(4):
            values = [m.value() for m in msgs if m.key() == b"%d" % n]
            assert values == [b"%d-%d" % (n, i) for i in range(250)]


def test_sync_producer_background_callbacks_and_errors() -> None:
    with Broker(storage="memory", port=0, auto_create_topics=False) as b:
        topic = create_topic_blocking(b, 1, {"max.message.bytes": "500"})
        results: list[tuple[Any, RecordMetadata]] = []
        done = threading.Event()

        def on_delivery(err: Any, meta: RecordMetadata) -> None:
            results.append((err, meta))
            if len(results) == 2:
                done.set()

        p = Producer(
            b.bootstrap_servers,
            delivery_callbacks="background",
            topic_metadata_propagation_max_ms=200,
        )
        try:
            p.produce(topic, b"ok", on_delivery=on_delivery)
            p.produce(topic, b"x" * 2000, on_delivery=on_delivery)
            assert done.wait(TIMEOUT)  # no poll() needed
            assert results[0][0] is None and results[0][1].offset == 0
            err, meta = results[1]
            assert isinstance(err, KafkaError) and err.code == ErrorCode.MESSAGE_TOO_LARGE
            assert meta.offset == -1
            with pytest.raises(KafkaError) as info:
                p.produce("missing-topic", b"v")
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            p.close()
        with pytest.raises(ProducerClosedError):
            p.produce(topic, b"late")
