"""Consumer protocol subscription/assignment: our encoding vs kafka-python's, every version."""

from __future__ import annotations

import kafka.protocol.consumer.metadata as kp  # kafka-python, a test dependency: the oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol.primitives import DecodeError

topics_st = st.lists(st.text(max_size=12), max_size=4)
tps_st = st.lists(
    st.builds(
        cp.ConsumerProtocolTopicPartition,
        topic=st.text(max_size=12),
        partitions=st.lists(st.integers(0, 2**31 - 1), max_size=4),
    ),
    max_size=3,
)
user_data_st = st.one_of(st.none(), st.binary(max_size=16))


def _subscription(version: int, topics: list[str], user_data: bytes | None, owned: list, generation: int, rack: str | None):  # type: ignore[no-untyped-def]
    return cp.ConsumerProtocolSubscription(
        topics=topics,
        user_data=user_data,
        owned_partitions=owned if version >= 1 else [],
        generation_id=generation if version >= 2 else -1,
        rack_id=rack if version >= 3 else None,
    )


@settings(max_examples=60)
@given(
    version=st.integers(0, 3),
    topics=topics_st,
    user_data=user_data_st,
    owned=tps_st,
    generation=st.integers(-1, 2**31 - 1),
    rack=st.one_of(st.none(), st.text(max_size=8)),
)
def test_subscription_matches_kafka_python(version, topics, user_data, owned, generation, rack) -> None:  # type: ignore[no-untyped-def]
    ours = _subscription(version, topics, user_data, owned, generation, rack)
    data = cp.encode_subscription(ours, version)
    theirs = kp.ConsumerProtocolSubscription(
        topics=topics,
        user_data=user_data,
        owned_partitions=[
            kp.ConsumerProtocolSubscription.TopicPartition(topic=tp.topic, partitions=tp.partitions)
            for tp in ours.owned_partitions
        ],
        generation_id=ours.generation_id,
        rack_id=ours.rack_id,
        version=version,
    )
    assert theirs.encode() == data
    back = kp.ConsumerProtocolSubscription.decode(data)
    assert list(back.topics) == topics and back.user_data == user_data
    assert cp.decode_subscription(data) == (version, ours)


@settings(max_examples=60)
@given(version=st.integers(0, 3), assigned=tps_st, user_data=user_data_st)
def test_assignment_matches_kafka_python(version: int, assigned: list, user_data: bytes | None) -> None:
    ours = cp.ConsumerProtocolAssignment(assigned_partitions=assigned, user_data=user_data)
    data = cp.encode_assignment(ours, version)
    theirs = kp.ConsumerProtocolAssignment(
        assigned_partitions=[
            kp.ConsumerProtocolAssignment.TopicPartition(topic=tp.topic, partitions=tp.partitions) for tp in assigned
        ],
        user_data=user_data,
        version=version,
    )
    assert theirs.encode() == data
    assert cp.decode_assignment(data) == (version, ours)


def test_known_bytes() -> None:
    sub = cp.ConsumerProtocolSubscription(topics=["a"], user_data=None)
    assert cp.encode_subscription(sub, 0) == b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01a" + b"\xff\xff\xff\xff"
    asg = cp.ConsumerProtocolAssignment(
        assigned_partitions=[cp.ConsumerProtocolTopicPartition(topic="a", partitions=[0])]
    )
    assert cp.encode_assignment(asg, 0).hex() == "0000000000010001610000000100000000ffffffff"


def test_newer_versions_read_with_the_newest_layout_and_trailing_bytes_ignored() -> None:
    sub = cp.ConsumerProtocolSubscription(topics=["t"], generation_id=4, rack_id="r1")
    v3 = cp.encode_subscription(sub, 3)
    v9 = b"\x00\x09" + v3[2:] + b"future-fields"
    assert cp.decode_subscription(v9) == (9, sub)
    assert cp.subscribed_topics(v9) == ["t"]
    asg = cp.ConsumerProtocolAssignment(assigned_partitions=[], user_data=b"u")
    assert cp.decode_assignment(b"\x00\x07" + cp.encode_assignment(asg, 3)[2:] + b"\x01")[1] == asg


def test_bad_input() -> None:
    with pytest.raises(DecodeError):
        cp.decode_subscription(b"\x00")
    with pytest.raises(DecodeError):
        cp.decode_subscription(b"\xff\xff\x00\x00\x00\x00")
    with pytest.raises(DecodeError):
        cp.subscribed_topics(b"\x00\x00\x00\x00\x00\x05")
    with pytest.raises(ValueError):
        cp.encode_subscription(cp.ConsumerProtocolSubscription(), 4)
