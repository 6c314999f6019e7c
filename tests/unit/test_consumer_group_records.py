"""KIP-848 consumer-group records of __consumer_offsets, in Kafka's byte format.

Each record type is checked against bytes written out by hand from Kafka's field
lists (keys: int16 record type, then classic strings; values: int16 version 0,
then flexible encoding: compact strings/arrays as length+1 varints, a tagged-field
section at the end of every struct), so a field in the wrong order or with the
wrong type fails.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from slipstream.protocol import group_records as gr

TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678")


def s16(text: str) -> bytes:  # classic string: int16 length
    return struct.pack(">h", len(text)) + text.encode()


def cstr(text: str | None) -> bytes:  # compact (nullable) string: uvarint length + 1
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def carr(items: list[bytes]) -> bytes:  # compact array of already-encoded items
    return bytes([len(items) + 1]) + b"".join(items)


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


NO_TAGS = b"\x00"
V0 = struct.pack(">h", 0)

KEYS = [
    (gr.ConsumerGroupMetadataKey(group="g"), struct.pack(">h", 3) + s16("g")),
    (gr.ConsumerGroupMemberMetadataKey(group="g", member_id="m1"), struct.pack(">h", 5) + s16("g") + s16("m1")),
    (gr.ConsumerGroupTargetAssignmentMetadataKey(group="g"), struct.pack(">h", 6) + s16("g")),
    (gr.ConsumerGroupTargetAssignmentMemberKey(group="g", member_id="m1"), struct.pack(">h", 7) + s16("g") + s16("m1")),
    (gr.ConsumerGroupCurrentMemberAssignmentKey(group="g", member_id="m1"), struct.pack(">h", 8) + s16("g") + s16("m1")),
    (
        gr.ConsumerGroupRegularExpressionKey(group="g", regular_expression="orders.*"),
        struct.pack(">h", 16) + s16("g") + s16("orders.*"),
    ),
]


@pytest.mark.parametrize(("key", "wire"), KEYS, ids=[type(k).__name__ for k, _ in KEYS])
def test_keys_match_kafkas_bytes(key: gr.ConsumerGroupKey, wire: bytes) -> None:
    assert gr.encode_consumer_group_key(key) == wire
    assert gr.decode_key(wire) == key


def topic_partitions(partitions: list[int], tags: bytes = NO_TAGS) -> bytes:
    return TOPIC.bytes + carr([i32(p) for p in partitions]) + tags


VALUES = [
    (
        gr.ConsumerGroupMetadataKey(group="g"),
        gr.ConsumerGroupMetadataValue(epoch=7),
        V0 + i32(7) + NO_TAGS,
    ),
    (
        gr.ConsumerGroupMetadataKey(group="g"),
        # Tagged: metadata hash (tag 0), creation time (tag 1), written when not default.
        gr.ConsumerGroupMetadataValue(epoch=7, metadata_hash=5, creation_time_ms=1000),
        V0 + i32(7) + b"\x02" + b"\x00\x08" + i64(5) + b"\x01\x08" + i64(1000),
    ),
    (
        gr.ConsumerGroupMemberMetadataKey(group="g", member_id="m1"),
        gr.ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id="r1",
            client_id="c",
            client_host="/1.2.3.4",
            subscribed_topic_names=["a", "b"],
            subscribed_topic_regex=None,
            rebalance_timeout_ms=300000,
            server_assignor="uniform",
        ),
        V0 + cstr(None) + cstr("r1") + cstr("c") + cstr("/1.2.3.4") + carr([cstr("a"), cstr("b")])
        + cstr(None) + i32(300000) + cstr("uniform") + NO_TAGS,
    ),
    (
        gr.ConsumerGroupMemberMetadataKey(group="g", member_id="m1"),
        gr.ConsumerGroupMemberMetadataValue(
            client_id="c",
            client_host="h",
            classic_member_metadata=gr.ClassicMemberMetadata(
                session_timeout_ms=45000,
                supported_protocols=[gr.ClassicProtocol(name="range", metadata=b"\x01")],
            ),
        ),
        # The classic member metadata travels as tagged field 0: a nullable struct whose
        # body is (session timeout, protocols, its own empty tag section).
        V0 + cstr(None) + cstr(None) + cstr("c") + cstr("h") + carr([]) + cstr(None) + i32(-1) + cstr(None)
        + b"\x01" + b"\x00" + bytes([1 + 4 + 1 + 6 + 1 + 1 + 1 + 1])
        + b"\x01" + i32(45000) + carr([cstr("range") + b"\x02\x01" + NO_TAGS]) + NO_TAGS,
    ),
    (
        gr.ConsumerGroupTargetAssignmentMetadataKey(group="g"),
        gr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=4),
        V0 + i32(4) + NO_TAGS,
    ),
    (
        gr.ConsumerGroupTargetAssignmentMemberKey(group="g", member_id="m1"),
        gr.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=[gr.TargetTopicPartitions(topic_id=TOPIC, partitions=[0, 2])]
        ),
        V0 + carr([topic_partitions([0, 2])]) + NO_TAGS,
    ),
    (
        gr.ConsumerGroupCurrentMemberAssignmentKey(group="g", member_id="m1"),
        gr.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=5,
            previous_member_epoch=4,
            state=1,
            assigned_partitions=[gr.CurrentTopicPartitions(topic_id=TOPIC, partitions=[1])],
            partitions_pending_revocation=[gr.CurrentTopicPartitions(topic_id=TOPIC, partitions=[3])],
        ),
        V0 + i32(5) + i32(4) + i8(1) + carr([topic_partitions([1])]) + carr([topic_partitions([3])]) + NO_TAGS,
    ),
    (
        gr.ConsumerGroupRegularExpressionKey(group="g", regular_expression="orders.*"),
        gr.ConsumerGroupRegularExpressionValue(topics=["orders-1"], version=3, timestamp=99),
        V0 + carr([cstr("orders-1")]) + i64(3) + i64(99) + NO_TAGS,
    ),
]


@pytest.mark.parametrize(
    ("key", "value", "wire"), VALUES, ids=[f"{type(v).__name__}-{i}" for i, (_, v, _) in enumerate(VALUES)]
)
def test_values_match_kafkas_bytes(key: gr.ConsumerGroupKey, value: gr.ConsumerGroupValue, wire: bytes) -> None:
    assert gr.encode_consumer_group_value(value) == wire
    assert gr.decode_consumer_group_value(key, wire) == value


def test_unknown_tagged_fields_from_newer_brokers_are_skipped() -> None:
    # An assignment epoch record with tag 0 (assignment timestamp) and an unknown tag 9.
    wire = V0 + i32(4) + b"\x02" + b"\x00\x08" + i64(123) + b"\x09\x02\xaa\xbb"
    value = gr.decode_consumer_group_value(gr.ConsumerGroupTargetAssignmentMetadataKey(group="g"), wire)
    assert value == gr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=4, assignment_timestamp=123)


def test_other_record_types_stay_unknown_and_bad_bytes_are_refused() -> None:
    # Key 4 (partition metadata) is no longer written by Kafka 4.1+; share/streams types too.
    assert gr.decode_key(struct.pack(">h", 4) + s16("g")) == gr.UnknownKey(4)
    assert gr.decode_key(struct.pack(">h", 9) + s16("g")) == gr.UnknownKey(9)
    with pytest.raises(gr.RecordFormatError):
        gr.decode_key(struct.pack(">h", 5) + s16("g"))  # member id missing
    with pytest.raises(gr.RecordFormatError):
        gr.decode_consumer_group_value(gr.ConsumerGroupMetadataKey(group="g"), struct.pack(">h", 1) + i32(1))
    with pytest.raises(gr.RecordFormatError):
        gr.decode_consumer_group_value(gr.ConsumerGroupMetadataKey(group="g"), V0 + b"\x00")


def test_the_coordinator_replays_consumer_group_records_into_consumer_groups() -> None:
    from slipstream.coordinator import GroupCoordinator, ManualTimer

    coordinator = GroupCoordinator(timer=ManualTimer(clock=lambda: 0))
    coordinator.begin_loading()
    for key, value, _ in VALUES:
        coordinator.replay(gr.encode_consumer_group_key(key), gr.encode_consumer_group_value(value), 0)
    coordinator.finish_loading(0)
    groups = {key.group for key, _, _ in VALUES}
    assert sorted(coordinator.group_ids()) == sorted(groups)
    for group_id in groups:
        assert coordinator.group(group_id) is None  # not mistaken for a classic group
        assert coordinator.consumer_group(group_id) is not None
