"""Record formats of the ``__consumer_offsets`` topic, byte-compatible with Kafka.

Every key and value starts with an int16 version; the key version says what
the record is:

- key v0/v1 ``OffsetCommitKey`` (group, topic, partition) -> a committed
  offset; value ``OffsetCommitValue`` v0-v4 (offset, leader_epoch v3+,
  metadata, commit_timestamp, expire_timestamp v1 only). Kafka writes v1 when
  the commit carried a retention time and v3 otherwise; v4 is the first
  flexible version.
- key v2 ``GroupMetadataKey`` (group) -> a classic group's metadata after a
  rebalance; value ``GroupMetadataValue`` v0-v4 (protocol_type, generation,
  protocol, leader, current_state_timestamp v2+, members with
  group_instance_id v3+ and rebalance_timeout v1+). Kafka 2.3+ writes v3; v4
  is the first flexible version.
- keys 3, 5, 6, 7, 8 and 16 are a KIP-848 consumer group's records (the key
  version is the record type; every value is v0 and flexible): the group's epoch
  (3), a member's metadata (5), the target assignment epoch (6) and each member's
  target assignment (7), a member's current assignment and epochs (8), and a
  regular expression's resolved topics (16). Key 4 (partition metadata, no longer
  written since Kafka 4.1) and other types (share/streams groups) decode as
  ``UnknownKey``.

A tombstone (null value) deletes the key: an offset, or a whole group.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import ClassVar

from .schema import BYTES, INT8, INT32, INT64, STRING, UUID, Array, Struct, field
from .versioned_records import (
    check_write_version,
    decode_body,
    decode_versioned_value,
    encode_versioned,
    version_of,
)

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_MAX_VERSION = 4
GROUP_METADATA_VALUE_MAX_VERSION = 4
# Versions Kafka 3.x writes (and so do we): v4 bodies need brokers that know KIP-915.
GROUP_METADATA_VALUE_WRITE_VERSION = 3
OFFSET_COMMIT_VALUE_WRITE_VERSION = 3
_FLEXIBLE_FROM = 4


class OffsetCommitKey(Struct):
    group: str = field(STRING, v="0-1")
    topic: str = field(STRING, v="0-1")
    partition: int = field(INT32, v="0-1")


class OffsetCommitValue(Struct):
    offset: int = field(INT64)
    leader_epoch: int = field(INT32, v="3+", default=-1)
    metadata: str = field(STRING)
    commit_timestamp: int = field(INT64)
    expire_timestamp: int = field(INT64, v="1", default=-1)


class GroupMetadataKey(Struct):
    group: str = field(STRING, v="2")


class GroupMetadataValueMemberMetadata(Struct):
    member_id: str = field(STRING)
    group_instance_id: str | None = field(STRING, v="3+", nullable="3+", default=None)
    client_id: str = field(STRING)
    client_host: str = field(STRING)
    rebalance_timeout: int = field(INT32, v="1+", default=-1)
    session_timeout: int = field(INT32)
    subscription: bytes = field(BYTES)
    assignment: bytes = field(BYTES)


class GroupMetadataValue(Struct):
    protocol_type: str = field(STRING)
    generation: int = field(INT32)
    protocol: str | None = field(STRING, nullable="0+")
    leader: str | None = field(STRING, nullable="0+")
    current_state_timestamp: int = field(INT64, v="2+", default=-1)
    members: list[GroupMetadataValueMemberMetadata] = field(Array(GroupMetadataValueMemberMetadata))


# ------------------------------------------------------------------ KIP-848 consumer groups

CONSUMER_GROUP_VALUE_VERSION = 0


class ConsumerGroupMetadataKey(Struct):
    version: ClassVar[int] = 3
    group: str = field(STRING)


class ConsumerGroupMetadataValue(Struct):
    epoch: int = field(INT32)
    metadata_hash: int = field(INT64, tag=0, default=0)
    creation_time_ms: int = field(INT64, tag=1, default=-1)


class ConsumerGroupMemberMetadataKey(Struct):
    version: ClassVar[int] = 5
    group: str = field(STRING)
    member_id: str = field(STRING)


class ClassicProtocol(Struct):
    name: str = field(STRING)
    metadata: bytes = field(BYTES)


class ClassicMemberMetadata(Struct):
    """Set for a member that speaks the classic protocol in a consumer group (migration)."""

    session_timeout_ms: int = field(INT32)
    supported_protocols: list[ClassicProtocol] = field(Array(ClassicProtocol))


class ConsumerGroupMemberMetadataValue(Struct):
    instance_id: str | None = field(STRING, nullable="0+", default=None)
    rack_id: str | None = field(STRING, nullable="0+", default=None)
    client_id: str = field(STRING)
    client_host: str = field(STRING)
    subscribed_topic_names: list[str] = field(Array(STRING))
    subscribed_topic_regex: str | None = field(STRING, nullable="0+", default=None)
    rebalance_timeout_ms: int = field(INT32, default=-1)
    server_assignor: str | None = field(STRING, nullable="0+", default=None)
    classic_member_metadata: ClassicMemberMetadata | None = field(
        ClassicMemberMetadata, nullable="0+", tag=0, default=None
    )


class ConsumerGroupTargetAssignmentMetadataKey(Struct):
    version: ClassVar[int] = 6
    group: str = field(STRING)


class ConsumerGroupTargetAssignmentMetadataValue(Struct):
    assignment_epoch: int = field(INT32)
    assignment_timestamp: int = field(INT64, tag=0, default=0)


class ConsumerGroupTargetAssignmentMemberKey(Struct):
    version: ClassVar[int] = 7
    group: str = field(STRING)
    member_id: str = field(STRING)


class TargetTopicPartitions(Struct):
    topic_id: uuid.UUID = field(UUID)
    partitions: list[int] = field(Array(INT32))


class ConsumerGroupTargetAssignmentMemberValue(Struct):
    topic_partitions: list[TargetTopicPartitions] = field(Array(TargetTopicPartitions))


class ConsumerGroupCurrentMemberAssignmentKey(Struct):
    version: ClassVar[int] = 8
    group: str = field(STRING)
    member_id: str = field(STRING)


class CurrentTopicPartitions(Struct):
    topic_id: uuid.UUID = field(UUID)
    partitions: list[int] = field(Array(INT32))
    # The epoch at which each partition was assigned (KIP-1251), aligned with partitions.
    assignment_epochs: list[int] | None = field(Array(INT32), nullable="0+", tag=0, default=None)


class ConsumerGroupCurrentMemberAssignmentValue(Struct):
    member_epoch: int = field(INT32)
    previous_member_epoch: int = field(INT32)
    state: int = field(INT8)
    assigned_partitions: list[CurrentTopicPartitions] = field(Array(CurrentTopicPartitions))
    partitions_pending_revocation: list[CurrentTopicPartitions] = field(Array(CurrentTopicPartitions))


class ConsumerGroupRegularExpressionKey(Struct):
    version: ClassVar[int] = 16
    group: str = field(STRING)
    regular_expression: str = field(STRING)


class ConsumerGroupRegularExpressionValue(Struct):
    topics: list[str] = field(Array(STRING))
    version: int = field(INT64)
    timestamp: int = field(INT64)


ConsumerGroupKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)

# Record type (the key version) -> (key class, value class).
CONSUMER_GROUP_RECORDS: dict[int, tuple[type[Struct], type[Struct]]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    16: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
}


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a record type we do not interpret (e.g. KIP-848 consumer-group records)."""

    version: int


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` key or value that does not parse."""


# Hand-written layouts of the records written on every OffsetCommit (the hot
# path); byte-for-byte what the declarations above encode, checked in the tests.
_H = struct.Struct(">h")
_HH = struct.Struct(">hh")
_I = struct.Struct(">i")
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader_epoch, metadata length
_V1_HEAD = struct.Struct(">hqh")  # version, offset, metadata length
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")

# ------------------------------------------------------------------ keys


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    g = group.encode()
    t = topic.encode()
    return b"".join(
        (_HH.pack(OFFSET_COMMIT_KEY_VERSION, len(g)), g, _H.pack(len(t)), t, _I.pack(partition))
    )


def group_metadata_key(group: str) -> bytes:
    return encode_versioned(GROUP_METADATA_KEY_VERSION, GroupMetadataKey(group=group), False)


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    """A consumer-group record key: the record type as version, then the fields (not flexible)."""
    return encode_versioned(key.version, key, False)


def decode_key(data: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | UnknownKey:
    version = version_of(data, "record key", RecordFormatError)
    if version in (0, 1):
        return decode_body(
            OffsetCommitKey, data, version, False, RecordFormatError, versions_named=True
        )
    if version == 2:
        return decode_body(
            GroupMetadataKey, data, version, False, RecordFormatError, versions_named=True
        )
    if version < 0:
        raise RecordFormatError(f"record key has negative version {version}")
    types = CONSUMER_GROUP_RECORDS.get(version)
    if types is not None:
        return decode_body(types[0], data, version, False, RecordFormatError)  # type: ignore[return-value]
    return UnknownKey(version)


# ------------------------------------------------------------------ values


def offset_commit_value_bytes(
    offset: int, leader_epoch: int, metadata: str, commit_timestamp: int, expire_timestamp: int = -1
) -> bytes:
    """``encode_offset_commit_value`` of these fields, version chosen the same way, without a Struct."""
    m = metadata.encode()
    if expire_timestamp == -1:
        return b"".join(
            (_V3_HEAD.pack(OFFSET_COMMIT_VALUE_WRITE_VERSION, offset, leader_epoch, len(m)), m, _Q.pack(commit_timestamp))
        )
    return b"".join((_V1_HEAD.pack(1, offset, len(m)), m, _QQ.pack(commit_timestamp, expire_timestamp)))


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Kafka's choice when ``version`` is None: v1 if the commit expires explicitly, else v3."""
    if version is None:
        version = 1 if value.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_WRITE_VERSION
    check_write_version(OffsetCommitValue, version, OFFSET_COMMIT_VALUE_MAX_VERSION)
    return encode_versioned(version, value, version >= _FLEXIBLE_FROM)


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    return decode_versioned_value(
        OffsetCommitValue, data, OFFSET_COMMIT_VALUE_MAX_VERSION, _FLEXIBLE_FROM, RecordFormatError
    )


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_WRITE_VERSION) -> bytes:
    check_write_version(GroupMetadataValue, version, GROUP_METADATA_VALUE_MAX_VERSION)
    return encode_versioned(version, value, version >= _FLEXIBLE_FROM)


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    return decode_versioned_value(
        GroupMetadataValue, data, GROUP_METADATA_VALUE_MAX_VERSION, _FLEXIBLE_FROM, RecordFormatError
    )


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    """A consumer-group record value: version 0, flexible (unknown tags are kept out)."""
    return encode_versioned(CONSUMER_GROUP_VALUE_VERSION, value, flexible=True)


def decode_consumer_group_value(key: ConsumerGroupKey, data: bytes | memoryview) -> ConsumerGroupValue:
    """The value of a consumer-group record whose key is ``key`` (tagged fields we do not
    know, written by newer brokers, are skipped)."""
    value_type = CONSUMER_GROUP_RECORDS[key.version][1]
    version = version_of(data, value_type.__name__, RecordFormatError)
    if version != CONSUMER_GROUP_VALUE_VERSION:
        raise RecordFormatError(f"unknown {value_type.__name__} version {version}")
    return decode_body(value_type, data, version, True, RecordFormatError)  # type: ignore[return-value]
