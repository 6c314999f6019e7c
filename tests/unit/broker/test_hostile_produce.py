"""Produce requests a hostile client sends: internal topics, lying batches, compression bombs.

Each batch here has a correct length and CRC, so only a look at the records finds the
lie. Nothing of a refused batch may be stored; the next good batch lands where it
should and is read back.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import cramjam
import pytest
from broker_helpers import raw_request_async
from hostile_batches import good_batch, records_section, reframe

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.protocol import compression
from slipstream.protocol.apis import (
    alter_configs,
    delete_topics,
    incremental_alter_configs,
    produce,
)
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.group_records import offset_commit_key, offset_commit_value_bytes
from slipstream.protocol.records import ProducerRecord, build_batch, iter_records

OFFSETS = "__consumer_offsets"
BOMB_BYTES = 64 << 20  # 64 MiB of zeros: a few KiB compressed


def address(b: Broker) -> str:
    return f"{b.config.host}:{b.port}"


def log_end(b: Broker, topic: str, partition: int = 0) -> int:
    plog = b.state.topics.partition(topic, partition)
    assert plog is not None
    return plog.log_end_offset


def produce_request(topic: str, batch: memoryview | bytes, partition: int = 0) -> produce.ProduceRequest:
    return produce.ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            produce.ProduceRequestTopicData(
                name=topic,
                partition_data=[
                    produce.ProduceRequestPartitionData(index=partition, records=memoryview(bytes(batch)))
                ],
            )
        ],
    )


async def produce_error(b: Broker, topic: str, batch: memoryview | bytes) -> int:
    response = await raw_request_async(address(b), produce.SPEC, 9, produce_request(topic, batch))
    return int(response.responses[0].partition_responses[0].error_code)


async def append_error(b: Broker, topic: str, batch: memoryview) -> KafkaError:
    with pytest.raises(KafkaError) as refused:
        await append(b.state, topic, 0, batch, acks=1)
    return refused.value


# ------------------------------------------------------------------ internal topics


async def test_clients_cannot_produce_delete_or_reconfigure_the_offsets_topic() -> None:
    async with Broker(storage="memory", port=0) as b:
        before = [p.log_end_offset for p in b.state.topics.topics[OFFSETS].partitions]
        forged = build_batch([ProducerRecord(offset_commit_key("g", "t", 0), offset_commit_value_bytes(99, -1, "", 0))])
        for partition in range(len(before)):
            response = await raw_request_async(
                address(b), produce.SPEC, 9, produce_request(OFFSETS, forged, partition)
            )
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert [p.log_end_offset for p in b.state.topics.topics[OFFSETS].partitions] == before

        deleted = await raw_request_async(
            address(b), delete_topics.SPEC, 4, delete_topics.DeleteTopicsRequest(topic_names=[OFFSETS], timeout_ms=1000)
        )
        assert deleted.responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert b.state.topics.get(OFFSETS) is not None

        altered = await raw_request_async(
            address(b),
            alter_configs.SPEC,
            1,
            alter_configs.AlterConfigsRequest(
                resources=[
                    alter_configs.AlterConfigsRequestResource(
                        resource_type=2,
                        resource_name=OFFSETS,
                        configs=[alter_configs.AlterConfigsRequestConfig(name="retention.ms", value="1")],
                    )
                ],
                validate_only=False,
            ),
        )
        assert altered.responses[0].error_code == ErrorCode.POLICY_VIOLATION
        incremental = await raw_request_async(
            address(b),
            incremental_alter_configs.SPEC,
            0,
            incremental_alter_configs.IncrementalAlterConfigsRequest(
                resources=[
                    incremental_alter_configs.IncrementalAlterConfigsRequestResource(
                        resource_type=2,
                        resource_name=OFFSETS,
                        configs=[
                            incremental_alter_configs.IncrementalAlterConfigsRequestConfig(
                                name="cleanup.policy", config_operation=0, value="delete"
                            )
                        ],
                    )
                ],
                validate_only=False,
            ),
        )
        assert incremental.responses[0].error_code == ErrorCode.POLICY_VIOLATION
        assert "retention.ms" not in b.state.topics.topics[OFFSETS].configs
        assert b.state.topics.topics[OFFSETS].configs.get("cleanup.policy", "compact") == "compact"


async def test_replay_skips_what_it_cannot_parse(tmp_path: Path) -> None:
    """A damaged batch and a zstd bomb in __consumer_offsets are skipped at start; the
    good commit after them is replayed."""
    async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
        assert b.groups is not None
        partition = b.groups.coordinator.partition_for("g")
        plog = b.state.topics.partition(OFFSETS, partition)
        assert plog is not None
        commit = ProducerRecord(offset_commit_key("g", "t", 0), offset_commit_value_bytes(7, -1, "", 0))
        framed = build_batch([commit])
        broken = reframe(framed, records=b"\xff" * 40)  # a varint that never ends
        bomb = reframe(framed, codec=compression.ZSTD, compressed=bytes(cramjam.zstd.compress(bytes(BOMB_BYTES))))
        good = build_batch(
            [ProducerRecord(offset_commit_key("g", "t", 0), offset_commit_value_bytes(42, -1, "", 0))]
        )
        plog.append([bytearray(broken), bytearray(bomb), bytearray(good)], now_ms=0, log_append_time=False)
    tracemalloc.start()
    try:
        async with Broker(storage="disk", data_dir=str(tmp_path), port=0) as b:
            assert b.groups is not None
            committed = b.groups.coordinator.offset_manager.committed("g", "t", 0)
            assert committed is not None and committed.offset == 42
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BOMB_BYTES // 4, f"replay allocated {peak} bytes: the bomb was inflated"


# ------------------------------------------------------------------ batch framing


async def test_a_batch_claiming_two_billion_records_is_refused_on_the_wire() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        liar = reframe(good_batch(1), count=2**31 - 1, last_offset_delta=2**31 - 1)
        assert len(liar) < 80
        assert await produce_error(b, "t", liar) == ErrorCode.INVALID_RECORD
        assert log_end(b, "t") == 0
        assert await produce_error(b, "t", good_batch(2)) == ErrorCode.NONE
        assert log_end(b, "t") == 2


@pytest.mark.parametrize(
    ("why", "batch"),
    [
        ("count disagrees with the offset range", reframe(good_batch(1), count=1, last_offset_delta=5)),
        ("zero records", reframe(good_batch(1), count=0, last_offset_delta=-1)),
        ("fewer records than counted", reframe(good_batch(1), count=3, last_offset_delta=2)),
        ("more records than counted", reframe(good_batch(3), count=2, last_offset_delta=1)),
        ("a varint that never ends", reframe(good_batch(1), records=b"\xff" * 30)),
        ("a record longer than the batch", reframe(good_batch(1), records=b"\x7e" + b"\x00" * 8)),
        ("bytes after the last record", reframe(good_batch(1), records=records_section(good_batch(1)) + b"\x00")),
        (
            "a negative header count",
            # record: length 7, attributes, ts delta 0, offset delta 0, key null, value null,
            # header count -1 (zigzag 1) then one stray byte to fill the length
            reframe(good_batch(1), records=bytes([14, 0, 0, 0, 1, 1, 1, 0])),
        ),
        (
            "a header count past the record",
            reframe(good_batch(1), records=bytes([12, 0, 0, 0, 1, 1, 100])),
        ),
    ],
)
async def test_badly_framed_batches_are_refused_and_nothing_is_stored(why: str, batch: memoryview) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        refused = await append_error(b, "t", batch)
        assert refused.code == ErrorCode.INVALID_RECORD, why
        assert log_end(b, "t") == 0
        info = await append(b.state, "t", 0, memoryview(bytearray(good_batch(1))), acks=1)
        assert info.base_offset == 0


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
async def test_framing_is_checked_inside_compressed_batches(codec: int) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        broken = reframe(good_batch(1), records=b"\xff" * 30, codec=codec)
        assert (await append_error(b, "t", broken)).code == ErrorCode.INVALID_RECORD
        liar = reframe(good_batch(2), count=5, last_offset_delta=4, codec=codec)
        assert (await append_error(b, "t", liar)).code == ErrorCode.INVALID_RECORD
        garbage = reframe(good_batch(1), codec=codec, compressed=b"\x00not compressed at all\x00" * 4)
        assert (await append_error(b, "t", garbage)).code == ErrorCode.CORRUPT_MESSAGE
        assert log_end(b, "t") == 0
        # a good compressed batch with headers still goes in and reads back
        fine = build_batch(
            [ProducerRecord(b"k", b"v" * 100, headers=[("h", b"x"), ("n", None)]) for _ in range(3)],
            compression=codec,
        )
        await append(b.state, "t", 0, memoryview(bytearray(fine)), acks=1)
        plog = b.state.topics.partition("t", 0)
        assert plog is not None
        read = plog.read(0, 1 << 20)
        records = [r for chunk in read.chunks for r in iter_records(chunk)]
        assert [(r.offset, r.key, r.headers) for r in records] == [
            (i, b"k", [("h", b"x"), ("n", None)]) for i in range(3)
        ]


# ------------------------------------------------------------------ bounded decompression


@pytest.mark.parametrize(
    "configs",
    [{}, {"cleanup.policy": "compact"}, {"compression.type": "gzip"}],
    ids=["plain", "compacted", "recompressed"],
)
async def test_a_compression_bomb_is_refused_without_being_inflated(configs: dict[str, str]) -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, configs)
        payload = bytes(cramjam.zstd.compress(bytes(BOMB_BYTES)))
        bomb = reframe(good_batch(1), codec=compression.ZSTD, compressed=payload)
        assert len(bomb) < 64 * 1024
        tracemalloc.start()
        try:
            refused = await append_error(b, "t", bomb)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert refused.code == ErrorCode.MESSAGE_TOO_LARGE
        assert peak < 8 << 20, f"{peak} bytes allocated to refuse a bomb"
        assert log_end(b, "t") == 0


async def test_the_expansion_bound_is_the_topics_max_message_bytes() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("small", 1, {"max.message.bytes": "10000"})
        big = build_batch([ProducerRecord(b"k", b"\x00" * 20_000)], compression=compression.LZ4)
        assert len(big) < 10_000
        assert (await append_error(b, "small", memoryview(bytearray(big)))).code == ErrorCode.MESSAGE_TOO_LARGE
        fits = build_batch([ProducerRecord(b"k", b"\x00" * 5_000)], compression=compression.LZ4)
        assert (await append(b.state, "small", 0, memoryview(bytearray(fits)), acks=1)).base_offset == 0
