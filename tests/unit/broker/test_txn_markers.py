"""Transaction markers on the data path: write_txn_markers and the WriteTxnMarkers API.

Transactional batches go through ``appends.append`` (the produce path) with a
producer id of our choosing; markers end the transactions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_helpers import raw_request_async
from txn_helpers import txn_batch

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.broker.txn_markers import TxnMarker, write_txn_markers
from slipstream.log.api import AbortedTxn
from slipstream.protocol.apis import write_txn_markers as wtm
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.record_batch import split_batches
from slipstream.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, decode_batch

PID = 11


def marker(commit: bool, *parts: tuple[str, int], epoch: int = 0, coordinator_epoch: int = 0) -> TxnMarker:
    return TxnMarker(PID, epoch, commit, coordinator_epoch, tuple(parts))


def stored(b: Broker, topic: str = "t", partition: int = 0) -> list[bytes]:
    plog = b.state.topics.partition(topic, partition)
    assert plog is not None
    data = b"".join(bytes(c) for c in plog.read(plog.log_start_offset, 1 << 30).chunks)
    return [bytes(x) for x in split_batches(memoryview(data))]


async def test_commit_marker_is_a_control_batch_and_moves_the_lso() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 2, {})
        await append(b.state, "t", 0, txn_batch(PID, 0), acks=-1, transactional=True)
        await append(b.state, "t", 1, txn_batch(PID, 0), acks=-1, transactional=True)
        producers = b.state.producer_state("t", 0)
        assert producers.open_transaction(PID) == 0
        assert producers.last_stable_offset(2) == 0
        codes = await write_txn_markers(b.state, marker(True, ("t", 0), ("t", 1)))
        assert codes == {("t", 0): 0, ("t", 1): 0}
        assert producers.open_transaction(PID) is None
        assert producers.last_stable_offset(3) == 3
        header, records = decode_batch(stored(b)[-1])
        assert header.is_control and header.is_transactional
        assert (header.base_offset, header.producer_id, header.producer_epoch) == (2, PID, 0)
        assert records[0].control_type == CONTROL_COMMIT
        assert records[0].value == b"\x00\x00\x00\x00\x00\x00"  # version 0, coordinator epoch 0
        plog = b.state.topics.partition("t", 0)
        assert plog is not None and plog.aborted_txns(0, 3) == []


async def test_abort_marker_is_indexed() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(PID, 0), acks=1, transactional=True)
        await append(b.state, "t", 0, txn_batch(PID, 2), acks=1, transactional=True)
        codes = await write_txn_markers(b.state, marker(False, ("t", 0), coordinator_epoch=3))
        assert codes == {("t", 0): 0}
        _, records = decode_batch(stored(b)[-1])
        assert records[0].control_type == CONTROL_ABORT
        assert records[0].value == b"\x00\x00\x00\x00\x00\x03"
        plog = b.state.topics.partition("t", 0)
        assert plog is not None
        assert plog.aborted_txns(0, 5) == [AbortedTxn(PID, 0, 4, 5)]
        assert plog.aborted_txns(5, 6) == []  # ends before the range


async def test_marker_errors() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(PID, 0, epoch=2), acks=1, transactional=True)
        codes = await write_txn_markers(
            b.state, marker(True, ("t", 0), ("t", 5), ("nope", 0), epoch=1)
        )
        assert codes == {
            ("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH,
            ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert b.state.producer_state("t", 0).open_transaction(PID) == 0  # still open
        assert (await write_txn_markers(b.state, marker(True, ("t", 0), epoch=2, coordinator_epoch=5))) == {
            ("t", 0): 0
        }
        # a marker from an older coordinator epoch is fenced
        await append(b.state, "t", 0, txn_batch(PID, 2, epoch=2), acks=1, transactional=True)
        fenced = await write_txn_markers(b.state, marker(False, ("t", 0), epoch=2, coordinator_epoch=4))
        assert fenced == {("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}


async def test_produce_rules_for_transactional_batches() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        # a transactional batch needs a transactional produce request
        with pytest.raises(KafkaError) as no_id:
            await append(b.state, "t", 0, txn_batch(PID, 0), acks=1)
        assert no_id.value.code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        await append(b.state, "t", 0, txn_batch(PID, 0, epoch=1), acks=1, transactional=True)
        # non-transactional data from a producer with an open transaction is refused
        with pytest.raises(KafkaError) as mixed:
            await append(b.state, "t", 0, txn_batch(PID, 2, epoch=1, transactional=False), acks=1)
        assert mixed.value.code == ErrorCode.INVALID_TXN_STATE
        # an older epoch is fenced
        with pytest.raises(KafkaError) as old:
            await append(b.state, "t", 0, txn_batch(PID, 2, epoch=0), acks=1, transactional=True)
        assert old.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        # clients never write control batches
        from slipstream.protocol.records import build_control_batch

        control = memoryview(bytearray(build_control_batch(CONTROL_COMMIT, producer_id=PID, producer_epoch=1,
                                                           timestamp_ms=0)))
        with pytest.raises(KafkaError) as ctl:
            await append(b.state, "t", 0, control, acks=1, transactional=True)
        assert ctl.value.code == ErrorCode.INVALID_RECORD
        # a second transactional batch joins the open transaction; after the marker,
        # the producer may write non-transactional data again
        await append(b.state, "t", 0, txn_batch(PID, 2, epoch=1), acks=1, transactional=True)
        assert b.state.producer_state("t", 0).open_transaction(PID) == 0
        await write_txn_markers(b.state, marker(True, ("t", 0), epoch=1))
        info = await append(b.state, "t", 0, txn_batch(PID, 4, epoch=1, transactional=False), acks=1)
        assert info.base_offset == 5


@pytest.mark.parametrize("version", [0, 1])
async def test_write_txn_markers_api(version: int) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 2, {})
        await append(b.state, "t", 0, txn_batch(PID, 0), acks=1, transactional=True)
        await append(b.state, "t", 1, txn_batch(PID, 0), acks=1, transactional=True)
        request = wtm.WriteTxnMarkersRequest(markers=[
            wtm.WritableTxnMarker(
                producer_id=PID, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
                topics=[wtm.WritableTxnMarkerTopic(name="t", partition_indexes=[0, 1, 7]),
                        wtm.WritableTxnMarkerTopic(name="missing", partition_indexes=[0])],
            )
        ])
        response = await raw_request_async(f"127.0.0.1:{b.port}", wtm.SPEC, version, request)
        [result] = response.markers
        assert result.producer_id == PID
        codes = {(t.name, p.partition_index): p.error_code for t in result.topics for p in t.partitions}
        assert codes == {
            ("t", 0): 0, ("t", 1): 0, ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        for p in (0, 1):
            plog = b.state.topics.partition("t", p)
            assert plog is not None and plog.aborted_txns(0, 3) == [AbortedTxn(PID, 0, 2, 3)]


async def test_markers_and_open_transactions_survive_a_restart(tmp_path: Path) -> None:
    def disk() -> Broker:
        return Broker(storage="disk", data_dir=str(tmp_path), port=0, durability="fsync")

    async with disk() as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(PID, 0), acks=-1, transactional=True)
        await write_txn_markers(b.state, marker(False, ("t", 0)))
        await append(b.state, "t", 0, txn_batch(PID + 1, 0), acks=-1, transactional=True)
    async with disk() as b:
        producers = b.state.producer_state("t", 0)
        assert producers.open_transaction(PID) is None
        assert producers.open_transaction(PID + 1) == 3  # no marker: still open
        assert producers.last_stable_offset(5) == 3
        plog = b.state.topics.partition("t", 0)
        assert plog is not None and plog.aborted_txns(0, 5) == [AbortedTxn(PID, 0, 2, 3)]
        assert (await write_txn_markers(b.state, TxnMarker(PID + 1, 0, True, 0, (("t", 0),)))) == {("t", 0): 0}
        assert producers.last_stable_offset(6) == 6


async def test_describe_producers_shows_open_transactions() -> None:
    from slipstream.protocol.apis import describe_producers as dp

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        await append(b.state, "t", 0, txn_batch(PID, 0), acks=1, transactional=True)
        await write_txn_markers(b.state, marker(True, ("t", 0), coordinator_epoch=4))
        await append(b.state, "t", 0, txn_batch(PID, 2), acks=1, transactional=True)
        request = dp.DescribeProducersRequest(topics=[dp.DescribeProducersRequestTopic(name="t", partition_indexes=[0])])
        response = await raw_request_async(f"127.0.0.1:{b.port}", dp.SPEC, 0, request)
        [producer] = response.topics[0].partitions[0].active_producers
        assert (producer.producer_id, producer.coordinator_epoch, producer.current_txn_start_offset) == (PID, 4, 3)


async def test_broker_cleaner_drops_aborted_data_and_stops_at_the_lso() -> None:
    import asyncio

    from slipstream.protocol.records import ProducerRecord, build_batch

    def record(pid: int, key: bytes, value: bytes) -> memoryview:
        batch = build_batch([ProducerRecord(key, value, timestamp_ms=1000)], producer_id=pid,
                            producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                            is_transactional=pid >= 0)
        return memoryview(bytearray(batch))

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("c", 1, {"cleanup.policy": "compact", "segment.ms": "1"})
        await append(b.state, "c", 0, record(-1, b"a", b"old"), acks=1)  # 0
        await asyncio.sleep(0.005)  # segment.ms=1: the next append rolls
        await append(b.state, "c", 0, record(31, b"a", b"aborted"), acks=1, transactional=True)  # 1
        await write_txn_markers(b.state, TxnMarker(31, 0, False, 0, (("c", 0),)))  # 2
        await asyncio.sleep(0.005)
        await append(b.state, "c", 0, record(32, b"a", b"open"), acks=1, transactional=True)  # 3: the LSO
        await asyncio.sleep(0.005)
        await append(b.state, "c", 0, record(-1, b"z", b"1"), acks=1)  # 4
        assert b.cleaner is not None
        done = await b.cleaner.clean_all(force=True)
        assert [d.stats.aborted_batches_removed for d in done if d.topic == "c"] == [1]
        values = [
            (r.offset, r.value) for raw in stored(b, "c") for r in decode_batch(raw)[1]
            if not decode_batch(raw)[0].is_control
        ]
        assert values == [(0, b"old"), (3, b"open"), (4, b"1")]


async def test_a_failed_fsync_is_a_storage_error(tmp_path: Path) -> None:
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0, durability="fsync") as b:
        b.state.topics.create("t", 2, {})
        broken = b.state.topics.partition("t", 1)
        assert broken is not None

        def fail() -> None:
            raise OSError("disk on fire")

        real_flush = broken.flush
        broken.flush = fail  # type: ignore[method-assign]
        codes = await write_txn_markers(b.state, marker(True, ("t", 0), ("t", 1)))
        # one group-commit fsync covers both partitions: both are answered with the failure
        assert codes == {("t", 0): ErrorCode.KAFKA_STORAGE_ERROR, ("t", 1): ErrorCode.KAFKA_STORAGE_ERROR}
        broken.flush = real_flush  # type: ignore[method-assign]
        assert await write_txn_markers(b.state, marker(True, ("t", 1))) == {("t", 1): 0}
