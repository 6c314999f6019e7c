"""__consumer_offsets record formats: byte layouts (Kafka's), every version, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slipstream.protocol import group_records as gr


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _b(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_layout() -> None:
    key = gr.offset_commit_key("grp", "topic", 7)
    assert key == b"\x00\x01" + _s("grp") + _s("topic") + struct.pack(">i", 7)
    assert gr.decode_key(key) == gr.OffsetCommitKey(group="grp", topic="topic", partition=7)
    # Key version 0 has the same body.
    assert gr.decode_key(b"\x00\x00" + key[2:]) == gr.OffsetCommitKey(group="grp", topic="topic", partition=7)


def test_group_metadata_key_layout() -> None:
    key = gr.group_metadata_key("grp")
    assert key == b"\x00\x02" + _s("grp")
    assert gr.decode_key(key) == gr.GroupMetadataKey(group="grp")


def test_other_key_versions_are_unknown_not_errors() -> None:
    # Key 4 (consumer-group partition metadata, unused since Kafka 4.1) and share-group keys.
    assert gr.decode_key(b"\x00\x04" + _s("grp")) == gr.UnknownKey(4)
    assert gr.decode_key(b"\x00\x0b" + _s("grp")) == gr.UnknownKey(11)
    with pytest.raises(gr.RecordFormatError):
        gr.decode_key(b"\x00")
    with pytest.raises(gr.RecordFormatError):
        gr.decode_key(b"\x00\x01\x00\x09abc")
    with pytest.raises(gr.RecordFormatError):
        gr.decode_key(b"\xff\xff")


def test_offset_commit_value_layouts() -> None:
    value = gr.OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000, expire_timestamp=-1)
    v3 = gr.encode_offset_commit_value(value)
    assert v3 == b"\x00\x03" + struct.pack(">qi", 42, 5) + _s("m") + struct.pack(">q", 1000)
    # With an explicit expiry Kafka writes v1, which has no leader epoch.
    expiring = gr.OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, expire_timestamp=2000)
    v1 = gr.encode_offset_commit_value(expiring)
    assert v1 == b"\x00\x01" + struct.pack(">q", 42) + _s("m") + struct.pack(">qq", 1000, 2000)
    v0 = gr.encode_offset_commit_value(value, 0)
    assert v0 == b"\x00\x00" + struct.pack(">q", 42) + _s("m") + struct.pack(">q", 1000)
    assert gr.decode_offset_commit_value(v3) == value
    assert gr.decode_offset_commit_value(v1) == expiring
    assert gr.decode_offset_commit_value(v0) == gr.OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000)
    v4 = gr.encode_offset_commit_value(value, 4)  # flexible: compact strings + tagged fields
    assert v4 == b"\x00\x04" + struct.pack(">qi", 42, 5) + b"\x02m" + struct.pack(">q", 1000) + b"\x00"
    assert gr.decode_offset_commit_value(v4) == value
    # A v4 value with an unknown tagged field still reads.
    assert gr.decode_offset_commit_value(v4[:-1] + b"\x01\x07\x02hi") == value


def test_unknown_value_versions_are_format_errors() -> None:
    with pytest.raises(gr.RecordFormatError):
        gr.decode_offset_commit_value(b"\x00\x05" + b"\x00" * 30)
    with pytest.raises(gr.RecordFormatError):
        gr.decode_group_metadata_value(b"\x00\x09")
    with pytest.raises(ValueError):
        gr.encode_group_metadata_value(gr.GroupMetadataValue(protocol_type="consumer", generation=1), 5)


def _member(i: int, instance: str | None = None) -> gr.GroupMetadataValueMemberMetadata:
    return gr.GroupMetadataValueMemberMetadata(
        member_id=f"m{i}",
        group_instance_id=instance,
        client_id=f"c{i}",
        client_host=f"/10.0.0.{i}",
        rebalance_timeout=30000,
        session_timeout=10000,
        subscription=b"sub%d" % i,
        assignment=b"asg%d" % i,
    )


def test_group_metadata_value_v3_layout() -> None:
    value = gr.GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=555,
        members=[_member(1, "inst"), _member(2)],
    )
    data = gr.encode_group_metadata_value(value)
    expected = b"\x00\x03" + _s("consumer") + struct.pack(">i", 3) + _s("range") + _s("m1") + struct.pack(">q", 555)
    expected += struct.pack(">i", 2)
    for m, inst in ((1, _s("inst")), (2, b"\xff\xff")):
        expected += _s(f"m{m}") + inst + _s(f"c{m}") + _s(f"/10.0.0.{m}") + struct.pack(">ii", 30000, 10000)
        expected += _b(b"sub%d" % m) + _b(b"asg%d" % m)
    assert data == expected
    assert gr.decode_group_metadata_value(data) == value


def test_empty_group_metadata_value() -> None:
    value = gr.GroupMetadataValue(protocol_type="consumer", generation=4, protocol=None, leader=None, current_state_timestamp=9)
    data = gr.encode_group_metadata_value(value)
    assert data == b"\x00\x03" + _s("consumer") + struct.pack(">i", 4) + b"\xff\xff\xff\xff" + struct.pack(">qi", 9, 0)
    assert gr.decode_group_metadata_value(data) == value


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_every_version_round_trips(version: int) -> None:
    value = gr.GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=555 if version >= 2 else -1,
        members=[_member(1, "inst" if version >= 3 else None)],
    )
    if version == 0:
        value.members[0].rebalance_timeout = -1
    data = gr.encode_group_metadata_value(value, version)
    assert data[:2] == struct.pack(">h", version)
    assert gr.decode_group_metadata_value(data) == value


names = st.text(max_size=20)


@given(
    group=names,
    topic=names,
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=names,
    ts=st.integers(0, 2**62),
    expire=st.one_of(st.just(-1), st.integers(0, 2**62)),
)
def test_offset_records_round_trip(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int, expire: int
) -> None:
    key = gr.offset_commit_key(group, topic, partition)
    assert gr.decode_key(key) == gr.OffsetCommitKey(group=group, topic=topic, partition=partition)
    value = gr.OffsetCommitValue(
        offset=offset, leader_epoch=epoch if expire == -1 else -1, metadata=metadata, commit_timestamp=ts, expire_timestamp=expire
    )
    assert gr.decode_offset_commit_value(gr.encode_offset_commit_value(value)) == value
