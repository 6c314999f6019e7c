"""The client's public surface: imports, Admin from a bootstrap string, serializers,
offsets_for_times, seek_to_beginning/end, wakeup(), statistics."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import slipstream
import slipstream.client as client
from slipstream.broker.broker import Broker
from slipstream.client import (
    Admin,
    AIOConsumer,
    AIOProducer,
    Consumer,
    ConsumerGroup,
    ConsumerGroupHandler,
    DeserializationError,
    Producer,
    WakeupError,
    json_deserializer,
    json_serializer,
    string_deserializer,
    string_serializer,
)
from slipstream.client.cluster import Cluster
from slipstream.client.statistics import StatisticsTracker
from slipstream.testing import create_topic, read_to_end

FAST = {"fetch_max_wait_ms": 100, "retry_backoff_ms": 20}


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b


def produce(bootstrap: str, topic: str, records: list[tuple[object, object, int | None]], **settings: object) -> None:
    """(key, value, partition) records, acknowledged before returning."""
    with Producer(bootstrap, linger_ms=0, **settings) as producer:
        for key, value, partition in records:
            producer.produce(topic, value, key=key, partition=partition)  # type: ignore[arg-type]
        assert producer.flush(10) == 0


def test_public_surface_and_py_typed():
    for name in ("Producer", "AIOProducer", "Consumer", "AIOConsumer", "ConsumerGroup", "Admin"):
        assert name in client.__all__ and getattr(client, name).__name__ == name
    assert all(hasattr(client, name) for name in client.__all__)
    package = Path(slipstream.__file__).parent
    assert (package / "py.typed").is_file()
    pyproject = (package.parents[1] / "pyproject.toml").read_text()
    assert 'slipstream = ["py.typed"]' in pyproject
    assert "slipstream.client" in (slipstream.__doc__ or "")


async def test_admin_takes_a_bootstrap_string_and_is_an_async_context_manager(broker: Broker):
    async with Admin(broker.bootstrap_servers, client_id="ops") as admin:
        await admin.create_topic("from-string", 2)
        assert [t.name for t in await admin.list_topics()] == ["from-string"]
        assert admin.cluster.client_id == "ops"
        cluster = admin.cluster
    assert not cluster._opened  # its connections were closed on exit
    # The older form: a Cluster of the caller's, which the admin leaves open.
    own = Cluster(broker.bootstrap_servers)
    try:
        async with Admin(own) as admin:
            assert (await admin.describe_topic("from-string")).partition_count == 2
        assert own._opened
    finally:
        await own.close()


def test_json_and_string_serializers_round_trip(broker: Broker):
    create_topic(broker, "serde", 1)
    produce(
        broker.bootstrap_servers, "serde",
        [("k1", {"id": 1, "tags": ["a"]}, 0), ("k2", None, 0)],
        key_serializer=string_serializer, value_serializer=json_serializer,
    )  # fmt: skip
    raw = read_to_end(broker, "serde")
    assert [(m.key, m.value) for m in raw] == [(b"k1", b'{"id":1,"tags":["a"]}'), (b"k2", None)]
    decoded = read_to_end(broker, "serde", key_deserializer=string_deserializer, value_deserializer=json_deserializer)
    assert [(m.key, m.value, m.offset) for m in decoded] == [("k1", {"id": 1, "tags": ["a"]}, 0), ("k2", None, 1)]


async def test_aio_clients_apply_serializers_and_a_bad_record_keeps_the_batch(broker: Broker):
    create_topic(broker, "aio-serde", 1)
    async with AIOProducer(broker.bootstrap_servers, linger_ms=0, value_serializer=string_serializer) as producer:
        await producer.send_and_wait("aio-serde", "héllo")
    produce(broker.bootstrap_servers, "aio-serde", [(None, b"\xff not utf-8", 0)])
    async with AIOConsumer(
        broker.bootstrap_servers, auto_offset_reset="earliest", value_deserializer=string_deserializer, **FAST
    ) as consumer:
        await consumer.assign([("aio-serde", 0)])
        # Both records come in one batch: the bad one fails it, and the error hands over
        # the whole batch undecoded, so nothing the consumer moved past is lost.
        with pytest.raises(DeserializationError) as failure:
            await consumer.getone(10)
        assert failure.value.message.offset == 1
        assert [m.value for m in failure.value.messages] == ["héllo".encode(), b"\xff not utf-8"]
        consumer.seek(("aio-serde", 0), 0)
        assert (await consumer.getmany(10, max_records=1))[0].value == "héllo"


def test_offsets_for_times_and_seeks(broker: Broker):
    create_topic(broker, "times", 2)
    with Producer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i, ts in enumerate((1_000, 2_000, 3_000)):
            producer.produce("times", b"v%d" % i, partition=0, timestamp_ms=ts)
        producer.produce("times", b"other", partition=1, timestamp_ms=500)
        assert producer.flush(10) == 0
    with Consumer(broker.bootstrap_servers, auto_offset_reset="latest", **FAST) as consumer:
        found = consumer.offsets_for_times({("times", 0): 1_500, ("times", 1): 9_999})
        assert found == {("times", 0): 1, ("times", 1): None}
        assert consumer.offsets_for_times({("times", 0): 0}) == {("times", 0): 0}
        consumer.assign([("times", 0)])
        consumer.seek(("times", 0), found[("times", 0)])  # type: ignore[arg-type]
        assert [m.value for m in poll_until(consumer, 2)] == [b"v1", b"v2"]
        consumer.seek_to_beginning([("times", 0)])
        assert consumer.position(("times", 0)) == 0
        consumer.seek_to_end([("times", 0)])
        assert consumer.position(("times", 0)) == 3
        with pytest.raises(ValueError, match="times >= 0"):
            consumer.offsets_for_times({("times", 0): -1})


async def test_aio_consumer_seeks_and_offsets_for_times(broker: Broker):
    create_topic(broker, "aio-times", 1)
    produce(broker.bootstrap_servers, "aio-times", [(None, b"a", 0), (None, b"b", 0)])
    async with AIOConsumer(broker.bootstrap_servers, auto_offset_reset="latest", **FAST) as consumer:
        await consumer.assign([("aio-times", 0)])
        consumer.seek_to_beginning([("aio-times", 0)])
        assert (await consumer.getone(10)).value == b"a"
        consumer.seek_to_end([("aio-times", 0)])
        assert await consumer.position(("aio-times", 0)) == 2
        found = await consumer.offsets_for_times({("aio-times", 0): 0})
        assert found == {("aio-times", 0): 0}


def poll_until(consumer: Consumer, count: int) -> list:
    got: list = []
    for _ in range(100):
        got.extend(consumer.poll(0.2))
        if len(got) >= count:
            return got
    raise AssertionError(f"got {len(got)} of {count} records")


def test_wakeup_interrupts_a_blocked_poll_in_its_thread(broker: Broker):
    create_topic(broker, "wake", 1)
    outcome: list[BaseException | list] = []
    with Consumer(broker.bootstrap_servers, auto_offset_reset="earliest", **FAST) as consumer:
        consumer.assign([("wake", 0)])
        polling = threading.Event()

        def run() -> None:
            polling.set()
            try:
                outcome.append(consumer.poll(60))
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        polling.wait(10)
        # Let the poll reach its wait on the network loop, then wake it (another thread).
        while not thread.is_alive() or consumer._poll_task is None:
            if outcome:
                break
            threading.Event().wait(0.01)
        consumer.wakeup()
        thread.join(20)
        assert not thread.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], WakeupError)
        # Woken once: the next poll works, and records written meanwhile all arrive.
        produce(broker.bootstrap_servers, "wake", [(None, b"x", 0)])
        assert [m.value for m in poll_until(consumer, 1)] == [b"x"]
        # A wakeup with no poll blocked makes the next poll raise at once, then it is spent.
        consumer.wakeup()
        with pytest.raises(WakeupError):
            consumer.poll(60)
        assert consumer.poll(0) == []


def test_statistics_method_and_callback(broker: Broker):
    create_topic(broker, "stats", 2)
    produce(broker.bootstrap_servers, "stats", [(None, b"v", p) for p in (0, 0, 0, 1)])
    reports = []
    with Consumer(
        broker.bootstrap_servers, group_id="stats-g", auto_offset_reset="earliest", max_poll_records=1,
        statistics_callback=reports.append, statistics_interval_ms=0, **FAST,
    ) as consumer:  # fmt: skip
        consumer.subscribe(["stats"])
        first = poll_until(consumer, 1)[0]
        stats = consumer.statistics()
        assert stats.rebalances == 1 and stats.group_id == "stats-g"
        assert stats.records_consumed == 1
        tp = (first.topic, first.partition)
        assert stats.partitions[tp].position == 1
        assert stats.partitions[tp].high_watermark == (3 if first.partition == 0 else 1)
        assert stats.partitions[tp].lag == stats.partitions[tp].high_watermark - 1
        assert reports and reports[-1].records_consumed == 1 and reports[-1].rebalances == 1


def test_statistics_tracker_rates_on_a_manual_clock():
    tracker = StatisticsTracker("c", None, now=100.0, interval_s=5.0)
    tracker.consumed(50)
    assert not tracker.report_due(104.9) and tracker.report_due(105.0)
    snapshot = tracker.snapshot(110.0, [("t", 1), ("t", 0)], {("t", 0): 5, ("t", 1): None}.get, {("t", 0): 8}.get)
    assert snapshot.fetch_rate == 5.0  # 50 records in 10 s
    assert list(snapshot.partitions) == [("t", 0), ("t", 1)]
    assert snapshot.partitions[("t", 0)].lag == 3 and snapshot.partitions[("t", 1)].lag is None
    assert snapshot.total_lag == 3
    tracker.consumed(10)
    tracker.rebalanced()
    later = tracker.snapshot(112.0, [], lambda tp: None, lambda tp: None)
    assert (later.fetch_rate, later.records_consumed, later.rebalances) == (5.0, 60, 1)
    assert not tracker.report_due(116.9) and tracker.report_due(117.0)


def test_serializers_must_be_callable():
    with pytest.raises(TypeError, match="value_serializer must be callable"):
        AIOProducer("127.0.0.1:1", value_serializer="json")  # type: ignore[arg-type]


def left_group_records(caplog: pytest.LogCaptureFixture, group: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("slipstream.client") and f"group {group}: member" in r.getMessage() and "left" in r.getMessage()]


def test_client_log_records_name_their_client(broker: Broker, caplog: pytest.LogCaptureFixture):
    create_topic(broker, "logged", 1)
    caplog.set_level(logging.INFO, logger="slipstream.client")
    with Consumer(broker.bootstrap_servers, group_id="log-g", client_id="billing-1", **FAST) as consumer:
        consumer.subscribe(["logged"])
        for _ in range(100):
            consumer.poll(0.1)
            if consumer.assignment():
                break
        assert consumer.assignment() == {("logged", 0)}
    [record] = left_group_records(caplog, "log-g")
    assert record.client_id == "billing-1"  # type: ignore[attr-defined]
    assert record.getMessage().startswith("[billing-1] group log-g: member ")


async def test_asyncio_clients_on_one_loop_keep_their_ids_apart(broker: Broker, caplog: pytest.LogCaptureFixture):
    create_topic(broker, "logged-aio", 2)
    caplog.set_level(logging.INFO, logger="slipstream.client")
    members = [
        AIOConsumer(broker.bootstrap_servers, group_id=f"aio-log-{i}", client_id=f"aio-{i}", **FAST) for i in (1, 2)
    ]
    for member in members:
        await member.start()
        member.subscribe(["logged-aio"])
    for _ in range(100):
        for member in members:
            await member.getmany(0.05)
        if all(m.assignment() for m in members):
            break
    for member in members:
        await member.close()
    for i in (1, 2):
        [record] = left_group_records(caplog, f"aio-log-{i}")
        assert record.client_id == f"aio-{i}"  # type: ignore[attr-defined]


async def test_consumer_group_applies_deserializers(broker: Broker):
    create_topic(broker, "cg-serde", 1)
    produce(broker.bootstrap_servers, "cg-serde", [("k", {"n": 1}, 0)], key_serializer=string_serializer, value_serializer=json_serializer)
    seen = []

    class Handler(ConsumerGroupHandler):
        async def consume_claim(self, session, claim):  # type: ignore[no-untyped-def]
            async for msg in claim.messages():
                seen.append((msg.key, msg.value))
                return

    group = ConsumerGroup(
        broker.bootstrap_servers, "cg-serde-g", auto_offset_reset="earliest",
        key_deserializer=string_deserializer, value_deserializer=json_deserializer, **FAST,
    )  # fmt: skip
    try:
        await asyncio.wait_for(group.consume(["cg-serde"], Handler()), 20)
    finally:
        await group.close()
    assert seen == [("k", {"n": 1})]


async def test_consumer_group_statistics_method_and_callback(broker: Broker):
    create_topic(broker, "cg-stats", 2)
    produce(broker.bootstrap_servers, "cg-stats", [(None, b"v", p) for p in (0, 0, 0, 1)])
    reports = []
    seen = []
    during = []

    class Handler(ConsumerGroupHandler):
        async def consume_claim(self, session, claim):  # type: ignore[no-untyped-def]
            async for msg in claim.messages():
                seen.append((msg.partition, msg.offset))
                if len(seen) == 4:
                    during.append(group.statistics())
                    session._end("read everything")  # ends consume() for the assertions
                    return

    group = ConsumerGroup(
        broker.bootstrap_servers, "cg-stats-g", auto_offset_reset="earliest", client_id="cg-stats-client",
        statistics_callback=reports.append, statistics_interval_ms=0, **FAST,
    )  # fmt: skip
    try:
        before = group.statistics()
        assert (before.rebalances, before.records_consumed, before.partitions) == (0, 0, {})
        await asyncio.wait_for(group.consume(["cg-stats"], Handler()), 20)
    finally:
        await group.close()
    assert sorted(seen) == [(0, 0), (0, 1), (0, 2), (1, 0)]
    [stats] = during
    assert (stats.client_id, stats.group_id) == ("cg-stats-client", "cg-stats-g")
    assert stats.rebalances == 1 and stats.records_consumed == 4
    assert {tp: (p.position, p.high_watermark, p.lag) for tp, p in stats.partitions.items()} == {
        ("cg-stats", 0): (3, 3, 0),
        ("cg-stats", 1): (1, 1, 0),
    }
    assert reports and reports[-1].records_consumed == 4 and reports[-1].rebalances == 1
