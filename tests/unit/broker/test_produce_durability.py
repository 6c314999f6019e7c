"""acks=all and the durability barrier: a failed barrier is a retriable storage error,
and an idempotent retry of the same batch is answered only once it is durable."""

from __future__ import annotations

from pathlib import Path

import pytest
from txn_helpers import txn_batch

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.log.disk.disk_log import DiskLog
from slipstream.protocol.errors import ErrorCode, KafkaError

PID = 7


async def test_failed_barrier_is_a_storage_error_and_the_retry_waits_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Broker(storage="disk", data_dir=str(tmp_path), durability="fsync", port=0) as b:
        b.state.topics.create("t", 1)
        real_flush = DiskLog.flush
        flushes: list[bool] = []

        def flaky_flush(self: DiskLog) -> None:
            flushes.append(True)
            if len(flushes) == 1:
                raise OSError("disk on fire")
            real_flush(self)

        monkeypatch.setattr(DiskLog, "flush", flaky_flush)
        with pytest.raises(KafkaError) as failed:
            await append(b.state, "t", 0, txn_batch(PID, 0, transactional=False), acks=-1, transactional=False)
        assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        # The producer retries the same batch: recognised as a duplicate, answered with
        # the original offsets, but only after a barrier that succeeded.
        info = await append(b.state, "t", 0, txn_batch(PID, 0, transactional=False), acks=-1, transactional=False)
        assert (info.base_offset, info.last_offset) == (0, 1)
        assert len(flushes) == 2
        plog = b.state.topics.partition("t", 0)
        assert plog is not None and plog.log_end_offset == 2  # written once


async def test_a_requests_partitions_share_one_barrier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """acks=all over several partitions: all are appended before the barrier, and one
    round of it covers them (not one fsync after another); a partition refused keeps
    its own error."""
    from slipstream.broker import durability
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.records import ProducerRecord, build_batch

    rounds: list[int] = []
    real_flush_all = durability._flush_all

    def counting_flush_all(waiters: list[durability._Waiter]) -> None:
        rounds.append(len(waiters))
        real_flush_all(waiters)

    monkeypatch.setattr(durability, "_flush_all", counting_flush_all)
    async with Broker(storage="disk", data_dir=str(tmp_path), durability="fsync", port=0) as b:
        b.state.topics.create("t", 4)
        b.state.topics.create("c", 1, {"cleanup.policy": "compact"})
        keyless = memoryview(build_batch([ProducerRecord(None, b"v")]))
        request = pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            pr.ProduceRequestTopicData(name="t", partition_data=[
                pr.ProduceRequestPartitionData(index=i, records=memoryview(build_batch([ProducerRecord(b"k", b"v")])))
                for i in range(4)
            ]),
            pr.ProduceRequestTopicData(name="c", partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=keyless),
            ]),
        ])  # fmt: skip
        conn = await BrokerConnection("127.0.0.1", b.port).connect()
        try:
            response = await conn.request(pr.SPEC, request, version=9)
        finally:
            await conn.close()
        answered = [(t.name, p.index, p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses]
        assert answered == [("t", i, 0, 0) for i in range(4)] + [("c", 0, ErrorCode.INVALID_RECORD, -1)]
        assert rounds == [4]


async def test_a_connections_produces_are_pipelined_and_share_barriers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Produce requests in flight on one connection are all appended, in order, while
    the first waits for its barrier (without pipelining the second would start only
    once the first is answered), and they share barrier rounds."""
    import asyncio
    import threading

    from slipstream.broker import durability
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.records import ProducerRecord, build_batch

    rounds: list[int] = []
    first_round_may_finish = threading.Event()
    real_flush_all = durability._flush_all

    def gated_flush_all(waiters: list[durability._Waiter]) -> None:
        rounds.append(len(waiters))
        assert first_round_may_finish.wait(10)
        real_flush_all(waiters)

    monkeypatch.setattr(durability, "_flush_all", gated_flush_all)
    async with Broker(storage="disk", data_dir=str(tmp_path), durability="fsync", port=0) as b:
        b.state.topics.create("t", 1)
        conn = await BrokerConnection("127.0.0.1", b.port).connect()
        try:
            requests = [
                pr.ProduceRequest(
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[
                        pr.ProduceRequestTopicData(
                            name="t",
                            partition_data=[
                                pr.ProduceRequestPartitionData(
                                    index=0, records=memoryview(build_batch([ProducerRecord(b"k", b"%d" % i)]))
                                )
                            ],
                        )
                    ],
                )
                for i in range(3)
            ]
            answers = [asyncio.ensure_future(conn.request(pr.SPEC, r, version=9)) for r in requests]
            plog = b.state.topics.partition("t", 0)
            assert plog is not None
            for _ in range(500):  # all three appended while the first barrier is held
                if plog.log_end_offset == 3:
                    break
                await asyncio.sleep(0.01)
            assert plog.log_end_offset == 3
            first_round_may_finish.set()
            responses = await asyncio.gather(*answers)
        finally:
            await conn.close()
        assert [r.responses[0].partition_responses[0].base_offset for r in responses] == [0, 1, 2]
        # Not one round per request: the requests that arrived together share the first,
        # the others arrived while it was held and share the next.
        assert sum(rounds) == 3 and len(rounds) <= 2
