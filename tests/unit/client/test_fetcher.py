"""The fetcher against a real in-process broker: positions, seek, pause/resume, resets, backpressure.

Data is produced with confluent-kafka (in a worker thread: the broker runs on the
test's event loop). Backpressure tests use an injected clock, so "the consumer
has been slow for longer than max_processing_time" is a step of the test, not a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from confluent_kafka import Producer as CkProducer

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.assignors import TopicPartition
from slipstream.client.cluster import BrokerNode, Cluster
from slipstream.client.connection import ConnectionClosed
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.fetcher import Fetcher, OffsetOutOfRangeError
from slipstream.client.offsets import NoOffsetForPartitionError, list_offsets
from slipstream.protocol.records import Record

pytestmark = pytest.mark.timeout(60)

DEADLINE_S = 15.0
T0: TopicPartition = ("t", 0)
T1: TopicPartition = ("t", 1)


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def setup(partitions: int = 2, clock: Callable[[], float] = time.monotonic, **settings: Any) -> AsyncIterator[
    tuple[Broker, Fetcher]
]:
    async with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        base: dict[str, Any] = dict(
            bootstrap_servers=b.bootstrap_servers, fetch_max_wait_ms=50, retry_backoff_ms=20,
            retry_backoff_max_ms=200, auto_offset_reset="earliest",
        )
        base.update(settings)
        cluster = Cluster(b.bootstrap_servers)
        await Admin(cluster).create_topic("t", partitions)
        await cluster.refresh_metadata(["t"])
        fetcher = Fetcher(cluster, ConsumerConfig(**base), clock=clock)
        try:
            yield b, fetcher
        finally:
            await fetcher.close()
            await cluster.close()


def _produce(bootstrap: str, partition: int, start: int, count: int, size: int, batch_size: int) -> None:
    p = CkProducer({
        "bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5, "batch.size": batch_size,
    })
    for i in range(start, start + count):
        p.produce("t", value=f"{partition}:{i}:".encode().ljust(size, b"x"), partition=partition)
    assert p.flush(15) == 0


async def produce(b: Broker, partition: int, count: int, *, start: int = 0, size: int = 20,
                  batch_size: int = 1_000_000) -> None:
    await asyncio.to_thread(_produce, b.bootstrap_servers, partition, start, count, size, batch_size)


def index(r: Record) -> int:
    assert r.value is not None
    return int(r.value.split(b":")[1])


async def consume(fetcher: Fetcher, tp: TopicPartition, count: int) -> list[Record]:
    out: list[Record] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(out) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"got {len(out)} of {count} records from {tp}"
        out.extend(await fetcher.fetch_partition(tp, count - len(out), remaining))
    return out


async def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


# ---------------------------------------------------------------------------- basics


async def test_fetches_every_partition_in_order_and_tracks_positions() -> None:
    async with setup(partitions=3) as (b, fetcher):
        for p, n in ((0, 50), (1, 30), (2, 0)):
            await produce(b, p, n)
        fetcher.add({("t", 0): 0, ("t", 1): None, ("t", 2): None})
        got: dict[TopicPartition, list[int]] = {}
        while sum(len(v) for v in got.values()) < 80:
            assert await fetcher.wait_for_data(DEADLINE_S)
            for tp, records in fetcher.drain(7).items():
                assert len(records) <= 7
                got.setdefault(tp, []).extend(index(r) for r in records)
        assert got == {("t", 0): list(range(50)), ("t", 1): list(range(30))}
        await wait_until(lambda: fetcher.position(("t", 2)) == 0, "t-2 to reset to 0")
        assert fetcher.positions() == {("t", 0): 50, ("t", 1): 30, ("t", 2): 0}
        assert fetcher.highwater(("t", 0)) == 50 and fetcher.lag(("t", 0)) == 0
        assert fetcher.buffered_bytes() == 0
        # one loop for the one broker, serving all three partitions
        assert list(fetcher.fetch_requests) == [0]


async def test_fetch_partition_waits_for_records_produced_later() -> None:
    async with setup() as (b, fetcher):
        fetcher.add({T0: 0})
        assert await fetcher.fetch_partition(T0, 10, 0.2) == []
        waiter = asyncio.ensure_future(consume(fetcher, T0, 5))
        await produce(b, 0, 5)
        assert [index(r) for r in await waiter] == [0, 1, 2, 3, 4]


async def test_seek_replays_from_inside_a_batch() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 20)  # one produce call, linger: a few multi-record batches
        fetcher.add({T0: 0})
        assert [index(r) for r in await consume(fetcher, T0, 20)] == list(range(20))
        fetcher.seek(T0, 7)
        assert fetcher.position(T0) == 7
        replay = await consume(fetcher, T0, 13)
        # the broker returns whole batches from before offset 7: those records are skipped
        assert [r.offset for r in replay] == list(range(7, 20))
        assert fetcher.position(T0) == 20


async def test_seek_to_beginning_and_end() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 10)
        fetcher.add({T0: 5})
        assert [r.offset for r in await consume(fetcher, T0, 5)] == [5, 6, 7, 8, 9]
        fetcher.seek_to_beginning([T0])
        assert [r.offset for r in await consume(fetcher, T0, 10)] == list(range(10))
        fetcher.seek_to_end([T0])
        await wait_until(lambda: fetcher.position(T0) == 10, "the end offset")
        await produce(b, 0, 1, start=10)
        assert [r.offset for r in await consume(fetcher, T0, 1)] == [10]


async def test_pause_keeps_buffered_data_and_resume_returns_it() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 10)
        await produce(b, 1, 10)
        fetcher.add({T0: 0, T1: 0})
        await wait_until(lambda: fetcher.buffered_bytes(T0) > 0, "t-0 data to be buffered")
        fetcher.pause([T0])
        assert fetcher.paused() == {T0}
        buffered = fetcher.buffered_bytes(T0)
        fetches = fetcher.partition_fetches(T0)
        # only t-1 comes out while t-0 is paused
        got: list[TopicPartition] = []
        while len(got) < 10:
            assert await fetcher.wait_for_data(DEADLINE_S)
            for tp, records in fetcher.drain(100).items():
                got.extend(tp for _ in records)
        assert set(got) == {T1}
        assert fetcher.drain(100) == {}
        await produce(b, 1, 5, start=10)
        assert len(await consume(fetcher, T1, 5)) == 5  # t-1 keeps being fetched meanwhile
        assert fetcher.buffered_bytes(T0) == buffered
        assert fetcher.partition_fetches(T0) == fetches  # not fetched while paused
        assert fetcher.position(T0) == 0
        fetcher.resume([T0])
        out = fetcher.drain(100)  # straight from the buffer, no new fetch needed
        assert [index(r) for r in out[T0]] == list(range(10))


# ---------------------------------------------------------------------------- resets and errors


async def test_out_of_range_position_resets_to_earliest() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 5)
        fetcher.add({T0: 1000})
        assert [r.offset for r in await consume(fetcher, T0, 5)] == [0, 1, 2, 3, 4]


async def test_out_of_range_position_resets_to_latest() -> None:
    async with setup(auto_offset_reset="latest") as (b, fetcher):
        await produce(b, 0, 5)
        fetcher.add({T0: 1000})
        await wait_until(lambda: fetcher.position(T0) == 5, "the reset to the log end")
        await produce(b, 0, 2, start=5)
        assert [r.offset for r in await consume(fetcher, T0, 2)] == [5, 6]


async def test_out_of_range_with_policy_none_raises_until_seeked() -> None:
    async with setup(auto_offset_reset="none") as (b, fetcher):
        await produce(b, 0, 5)
        await produce(b, 1, 3)
        fetcher.add({T0: 1000, T1: 0})
        assert len(await consume(fetcher, T1, 3)) == 3
        with pytest.raises(OffsetOutOfRangeError, match="offset 1000 is out of range for t-0") as err:
            await consume(fetcher, T0, 1)
        assert err.value.partition == T0
        assert await fetcher.fetch_partition(T0, 1, 0.1) == []  # raised once; now waits for a seek
        fetcher.seek(T0, 3)
        assert [r.offset for r in await consume(fetcher, T0, 2)] == [3, 4]


async def test_no_position_with_policy_none_raises() -> None:
    async with setup(auto_offset_reset="none") as (_b, fetcher):
        fetcher.add({T0: None})
        with pytest.raises(NoOffsetForPartitionError, match="t-0"):
            fetcher.drain(10)


async def test_list_offsets_reports_earliest_and_latest() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 4)
        out = await list_offsets(fetcher.cluster, {T0: -2, T1: -1})
        assert out[T0][0] == 0 and out[T1][0] == 0
        assert (await list_offsets(fetcher.cluster, {T0: -1}))[T0][0] == 4


async def test_lost_connection_is_retried_without_losing_records() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 10)
        fetcher.add({T0: 0})
        assert len(await consume(fetcher, T0, 10)) == 10
        for conn in fetcher.connections.open_connections():
            conn._fail(ConnectionClosed("test drops the connection"))
        await produce(b, 0, 10, start=10)
        assert [index(r) for r in await consume(fetcher, T0, 10)] == list(range(10, 20))


async def test_partition_moves_off_an_unreachable_leader() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 5)
        # Metadata says a dead broker 99 leads t-0: its loop cannot connect, the fetcher
        # looks the leader up again and moves the partition to the real one.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead_port = s.getsockname()[1]
        fetcher.cluster.brokers[99] = BrokerNode(99, "127.0.0.1", dead_port)
        fetcher.cluster.topics["t"].leaders[0] = 99
        fetcher.add({T0: 0})
        assert [r.offset for r in await consume(fetcher, T0, 5)] == [0, 1, 2, 3, 4]
        assert fetcher.fetch_requests[0] >= 1


# ---------------------------------------------------------------------------- backpressure


async def test_full_partition_buffer_stops_fetching_it_without_stalling_the_others() -> None:
    limit, per_fetch = 32 * 1024, 16 * 1024
    async with setup(partition_buffer_bytes=limit, max_partition_fetch_bytes=per_fetch,
                     max_processing_time_ms=60_000) as (b, fetcher):
        await produce(b, 0, 300, size=1000, batch_size=8000)  # ~300 KB in ~8 KB batches
        fetcher.add({T0: 0, T1: 0})
        await wait_until(lambda: fetcher.buffered_bytes(T0) >= limit, "t-0's buffer to fill")
        # The consumer takes nothing from t-0 but keeps reading t-1.
        for round_ in range(3):
            await produce(b, 1, 5, start=5 * round_)
            assert len(await consume(fetcher, T1, 5)) == 5
            if round_ == 0:
                fetches = fetcher.partition_fetches(T0)
        assert fetcher.partition_fetches(T0) == fetches, "t-0 was fetched with a full buffer"
        # bounded: the limit plus at most one fetch's worth (batches are ~8 KB here)
        assert limit <= fetcher.buffered_bytes(T0) < limit + per_fetch + 8 * 1024
        assert fetcher.buffered_bytes() == fetcher.buffered_bytes(T0)
        # Draining t-0 lets it be fetched again, and everything arrives in order.
        records = await consume(fetcher, T0, 300)
        assert [index(r) for r in records] == list(range(300))
        assert fetcher.partition_fetches(T0) > fetches


async def test_partition_not_drained_for_max_processing_time_stops_being_fetched() -> None:
    clock = ManualClock()
    async with setup(clock=clock, max_processing_time_ms=100,
                     partition_buffer_bytes=50 * 1024 * 1024) as (b, fetcher):
        await produce(b, 0, 10)
        fetcher.add({T0: 0, T1: 0})
        await wait_until(lambda: fetcher.buffered_bytes(T0) > 0, "t-0 data to be buffered")
        clock.now += 0.5  # the consumer has not drained t-0 for 500 ms > max_processing_time
        await produce(b, 1, 3)
        assert len(await consume(fetcher, T1, 3)) == 3  # a full fetch round later
        fetches = fetcher.partition_fetches(T0)
        await produce(b, 0, 10, start=10)
        await produce(b, 1, 3, start=3)
        assert len(await consume(fetcher, T1, 3)) == 3
        assert fetcher.partition_fetches(T0) == fetches, "a stalled partition was fetched"
        # Catching up makes it fetchable again.
        records = await consume(fetcher, T0, 20)
        assert [index(r) for r in records] == list(range(20))
        assert fetcher.partition_fetches(T0) > fetches


async def test_remove_drops_buffers_and_stops_fetching() -> None:
    async with setup() as (b, fetcher):
        await produce(b, 0, 10)
        fetcher.add({T0: 0, T1: 0})
        await wait_until(lambda: fetcher.buffered_bytes(T0) > 0, "t-0 data")
        fetcher.remove([T0])
        assert fetcher.assigned() == {T1}
        assert fetcher.buffered_bytes() == 0
        assert await fetcher.fetch_partition(T0, 10, 0.05) == []
        with pytest.raises(KeyError, match="t-0 is not assigned"):
            fetcher.position(T0)


async def test_lag_under_read_committed_ends_at_the_lso() -> None:
    from slipstream.broker.txn_markers import TxnMarker, write_txn_markers
    from slipstream.protocol.records import ProducerRecord, build_batch

    async with setup(partitions=1, isolation_level="read_committed") as (b, fetcher):
        await produce(b, 0, 3)  # 0-2
        txn = build_batch([ProducerRecord(b"k", b"txn")] * 2, producer_id=5, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
        await append(b.state, "t", 0, memoryview(bytearray(txn)), acks=1, transactional=True)  # 3-4, open
        fetcher.add({("t", 0): 0})
        got: list[Record] = []
        while len(got) < 3:
            assert await fetcher.wait_for_data(DEADLINE_S)
            got.extend(fetcher.drain(10).get(("t", 0), []))
        await wait_until(lambda: fetcher.highwater(("t", 0)) == 5, "the high watermark")
        # the open transaction at 3 is as far as a read_committed reader gets
        assert fetcher.position(("t", 0)) == 3 and fetcher.lag(("t", 0)) == 0
        assert await write_txn_markers(b.state, TxnMarker(5, 0, True, 0, (("t", 0),))) == {("t", 0): 0}  # 5
        await wait_until(lambda: fetcher.highwater(("t", 0)) == 6, "the marker")
        assert fetcher.lag(("t", 0)) == 3  # the LSO moved to 6
