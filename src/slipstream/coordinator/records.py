"""Building ``__consumer_offsets`` records, and which partition a group lives in."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ..protocol import group_records as gr
from .offset_and_metadata import OffsetAndMetadata
from .result import Record

if TYPE_CHECKING:
    from .group import ClassicGroup

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# Called for every group request; the hash walks the id in Python, so remember it.
@functools.lru_cache(maxsize=1 << 16)
def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % groupMetadataTopicPartitionCount``."""
    h = java_string_hash(group_id)
    # Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    positive = 0 if h == -(1 << 31) else abs(h)
    return positive % num_partitions


def offset_commit_record(partition: int, group_id: str, topic: str, index: int, om: OffsetAndMetadata) -> Record:
    expire = om.expire_timestamp_ms
    value = gr.offset_commit_value_bytes(om.offset, om.leader_epoch, om.metadata, om.commit_timestamp_ms, expire)
    # The value version written with an explicit expiry (v1) has no leader epoch:
    # replaying the record must give what decoding its bytes would.
    replayed = om if expire == -1 or om.leader_epoch == -1 else replace(om, leader_epoch=-1)
    return Record(partition, gr.offset_commit_key(group_id, topic, index), value, (group_id, topic, index, replayed))


def txn_offset_commit_record(
    partition: int, group_id: str, topic: str, index: int, om: OffsetAndMetadata, producer: tuple[int, int]
) -> Record:
    """An offset committed inside ``producer``'s (id, epoch) transaction: written in its
    transactional batch, pending until the transaction's marker."""
    record = offset_commit_record(partition, group_id, topic, index, om)
    return replace(record, producer=producer)


def offset_tombstone(partition: int, group_id: str, topic: str, index: int) -> Record:
    return Record(partition, gr.offset_commit_key(group_id, topic, index), None)


def group_metadata_value(group: ClassicGroup, assignment: Mapping[str, bytes]) -> gr.GroupMetadataValue:
    """Kafka's GroupMetadataValue for ``group`` with the given member assignments."""
    members: list[gr.GroupMetadataValueMemberMetadata] = []
    protocol = group.protocol_name
    for member in group.members.values():
        if protocol is None:
            raise RuntimeError(f"group {group.group_id!r} has members but no protocol")
        members.append(
            gr.GroupMetadataValueMemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=member.session_timeout_ms,
                subscription=member.metadata(protocol),
                assignment=assignment.get(member.member_id, b""),
            )
        )
    return gr.GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=group.current_state_timestamp_ms
        if group.current_state_timestamp_ms is not None
        else -1,
        members=members,
    )


def group_metadata_record(partition: int, group: ClassicGroup, assignment: Mapping[str, bytes]) -> Record:
    value = group_metadata_value(group, assignment)
    return Record(partition, gr.group_metadata_key(group.group_id), gr.encode_group_metadata_value(value))


def group_tombstone(partition: int, group_id: str) -> Record:
    return Record(partition, gr.group_metadata_key(group_id), None)
