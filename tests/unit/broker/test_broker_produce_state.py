"""Produce-path state that must survive restarts, and what compacted topics refuse.

Drives ``appends.append`` (the one write path) on the async embedded broker,
with disk storage so a second broker on the same directory sees the first one's log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer as CkProducer

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.records import ProducerRecord, build_batch

PID = 7


def batch(seq: int, n: int = 2, *, epoch: int = 0, keyed: bool = True) -> memoryview:
    records = [
        ProducerRecord(f"k{seq + i}".encode() if keyed else None, f"v{seq + i}".encode())
        for i in range(n)
    ]
    raw = build_batch(records, producer_id=PID, producer_epoch=epoch, base_sequence=seq)
    return memoryview(bytearray(raw))  # the broker stamps offsets in place


def disk_broker(data_dir: Path) -> Broker:
    return Broker(storage="disk", data_dir=str(data_dir), port=0, durability="fsync")


async def test_retry_after_restart_is_deduplicated(tmp_path: Path) -> None:
    async with disk_broker(tmp_path) as b:
        b.state.topics.create("t", 1, {})
        first = await append(b.state, "t", 0, batch(0), acks=-1)
        second = await append(b.state, "t", 0, batch(2), acks=-1)
        assert (first.base_offset, second.base_offset) == (0, 2)
    async with disk_broker(tmp_path) as b:
        # the retry of the last batch written before the restart gets its original offsets
        again = await append(b.state, "t", 0, batch(2), acks=-1)
        assert (again.base_offset, again.last_offset) == (2, 3)
        plog = b.state.topics.partition("t", 0)
        assert plog is not None and plog.log_end_offset == 4
        # a gap in the sequence is still an error, as before the restart
        with pytest.raises(KafkaError) as gap:
            await append(b.state, "t", 0, batch(9), acks=-1)
        assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # the next sequence goes on
        nxt = await append(b.state, "t", 0, batch(4), acks=-1)
        assert nxt.base_offset == 4


async def test_bumped_epoch_in_the_log_fences_the_old_one_after_restart(tmp_path: Path) -> None:
    async with disk_broker(tmp_path) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, batch(0, epoch=0), acks=-1)
        await append(b.state, "t", 0, batch(0, epoch=1), acks=-1)
    async with disk_broker(tmp_path) as b:
        with pytest.raises(KafkaError) as fenced:
            await append(b.state, "t", 0, batch(2, epoch=0), acks=-1)
        assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        ok = await append(b.state, "t", 0, batch(2, epoch=1), acks=-1)
        assert ok.base_offset == 4


async def test_compacted_topic_refuses_keyless_records() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("c", 1, {"cleanup.policy": "compact"})
        b.state.topics.create("d", 1, {"cleanup.policy": "compact,delete"})
        b.state.topics.create("plain", 1, {})
        for topic in ("c", "d"):
            with pytest.raises(KafkaError) as refused:
                await append(b.state, topic, 0, batch(0, keyed=False), acks=1)
            assert refused.value.code == ErrorCode.INVALID_RECORD
            assert "without a key" in str(refused.value)
            plog = b.state.topics.partition(topic, 0)
            assert plog is not None and plog.log_end_offset == 0  # nothing of the batch written
            assert (await append(b.state, topic, 0, batch(0), acks=1)).base_offset == 0
        assert (await append(b.state, "plain", 0, batch(0, keyed=False), acks=1)).last_offset == 1


def test_compacted_topic_keyless_produce_fails_for_a_real_client() -> None:
    with Broker(storage="memory", port=0) as b:
        b.state.topics.create("compacted", 1, {"cleanup.policy": "compact"})
        errors: list[object] = []
        p = CkProducer({"bootstrap.servers": b.bootstrap_servers, "log_level": 0, "retries": 0})
        # flushed one at a time: one batch each, so the keyed one is not refused with it
        p.produce("compacted", value=b"no key", on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(10) == 0
        p.produce("compacted", value=b"keyed", key=b"k", on_delivery=lambda e, m: errors.append(e))
        assert p.flush(10) == 0
        assert errors[0] is not None and errors[0].name() == "INVALID_RECORD"  # type: ignore[attr-defined]
        assert errors[1] is None


@pytest.mark.parametrize("version", [7, 8, 11])
async def test_keyless_records_are_named_in_record_errors(version: int) -> None:
    """KIP-467: Produce v8+ names each refused record by its index in the batch."""
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import produce as pr

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("c", 1, {"cleanup.policy": "compact"})
        records = [ProducerRecord(b"k0", b"v0"), ProducerRecord(None, b"v1"), ProducerRecord(b"k2", b"v2"),
                   ProducerRecord(None, b"v3")]
        request = pr.ProduceRequest(
            acks=-1, timeout_ms=5000,
            topic_data=[pr.ProduceRequestTopicData(name="c", partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=memoryview(build_batch(records)))
            ])],
        )
        conn = await BrokerConnection("127.0.0.1", b.port).connect()
        try:
            response = await conn.request(pr.SPEC, request, version=version)
        finally:
            await conn.close()
        part = response.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.INVALID_RECORD and part.base_offset == -1
        if version >= 8:
            assert [e.batch_index for e in part.record_errors] == [1, 3]
            assert all("without a key" in (e.batch_index_error_message or "") for e in part.record_errors)
            assert "2 of the batch's 4 records" in (part.error_message or "")
        plog = b.state.topics.partition("c", 0)
        assert plog is not None and plog.log_end_offset == 0  # nothing of the batch written


async def test_a_batch_of_one_keyless_shape_names_every_record() -> None:
    """Records of one shape are checked by the one-shape shortcut, which reports them all
    keyless at once: a compacted topic refuses each of them by index, as the walk does."""
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("c", 1, {"cleanup.policy": "compact"})
        keyed = build_batch([ProducerRecord(b"k", b"v" * 10) for _ in range(3)])
        await append(b.state, "c", 0, memoryview(bytearray(keyed)), acks=-1)
        keyless = build_batch([ProducerRecord(None, b"v" * 10) for _ in range(3)])
        with pytest.raises(KafkaError) as refused:
            await append(b.state, "c", 0, memoryview(bytearray(keyless)), acks=-1)
        assert refused.value.code == ErrorCode.INVALID_RECORD
        assert [index for index, _ in refused.value.record_errors] == [0, 1, 2]  # type: ignore[attr-defined]
        assert "3 of the batch's 3 records" in refused.value.message
