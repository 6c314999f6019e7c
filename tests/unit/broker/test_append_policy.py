"""The produce path's parsed topic configs follow every change to the topic."""

from __future__ import annotations

from slipstream import Broker
from slipstream.broker.append_policy import policy_from
from slipstream.broker.appends import append
from slipstream.broker.topic_config import defaults
from slipstream.protocol import compression
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.records import ProducerRecord, build_batch


def test_policy_from_the_defaults_and_from_overrides() -> None:
    from slipstream.broker.config import BrokerConfig

    base = defaults(BrokerConfig())
    plain = policy_from(base)
    assert plain.timestamp_bounds is None
    assert plain.topic_codec is None
    assert not plain.compacted and not plain.log_append_time
    assert plain.min_insync_replicas is None
    tuned = policy_from(
        base
        | {
            "cleanup.policy": "compact,delete",
            "compression.type": "zstd",
            "message.timestamp.type": "LogAppendTime",
            "message.timestamp.after.max.ms": "1000",
            "min.insync.replicas": "2",
            "max.message.bytes": "12345",
        }
    )
    assert tuned.compacted and tuned.log_append_time
    assert tuned.topic_codec == compression.ZSTD
    assert tuned.timestamp_bounds == ((1 << 63) - 1, 1000)
    assert tuned.min_insync_replicas == "2"
    assert tuned.max_batch_bytes == 12345


async def _error(b: Broker, topic: str, batch: bytes, acks: int = 1) -> int:
    assert b.state is not None
    try:
        await append(b.state, topic, 0, memoryview(bytearray(batch)), acks=acks)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.NONE


async def test_a_config_change_applies_to_the_next_produce() -> None:
    async with Broker(storage="memory", port=0) as b:
        assert b.state is not None
        topics = b.state.topics
        topics.create("t", 1, {})
        big = build_batch([ProducerRecord(b"k", b"v" * 2000)])
        assert await _error(b, "t", big) == ErrorCode.NONE
        topics.set_configs("t", {"max.message.bytes": "1000"})
        assert await _error(b, "t", big) == ErrorCode.MESSAGE_TOO_LARGE
        topics.set_configs("t", {"min.insync.replicas": "2"})
        assert await _error(b, "t", big) == ErrorCode.NONE
        assert await _error(b, "t", big, acks=-1) == ErrorCode.NOT_ENOUGH_REPLICAS
        topics.set_configs("t", {})
        assert await _error(b, "t", big, acks=-1) == ErrorCode.NONE


async def test_a_topic_made_again_under_its_name_gets_its_own_configs() -> None:
    async with Broker(storage="memory", port=0) as b:
        assert b.state is not None
        topics = b.state.topics
        keyless = build_batch([ProducerRecord(None, b"v")])
        topics.create("t", 1, {"cleanup.policy": "compact"})
        assert await _error(b, "t", keyless) == ErrorCode.INVALID_RECORD
        topics.delete("t")
        topics.create("t", 1, {})
        assert await _error(b, "t", keyless) == ErrorCode.NONE
