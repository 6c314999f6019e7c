"""``__consumer_offsets`` records of consumer (KIP-848) groups: building them, and replaying them.

A consumer group is stored as Kafka stores it, one record per fact so a change
writes only what changed:

| record (key type) | holds |
|---|---|
| ConsumerGroupMetadata (3) | group epoch, metadata hash |
| ConsumerGroupMemberMetadata (5) | one member's subscription, client and timeouts |
| ConsumerGroupTargetAssignmentMetadata (6) | the epoch of the target assignment |
| ConsumerGroupTargetAssignmentMember (7) | one member's target partitions |
| ConsumerGroupCurrentMemberAssignment (8) | one member's epoch, state and partitions |
| ConsumerGroupRegularExpression (16) | the topics a regex resolved to |

A tombstone deletes the fact. Replay (``replay_consumer_record``) is the only way
the in-memory ``ConsumerGroup`` changes; it follows Kafka's rules: a member
record for an unknown member creates it, a current-assignment tombstone moves
the member to epoch -1 with nothing assigned, and the member disappears with
its metadata tombstone.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping

from ..protocol import group_records as gr
from .consumer import ConsumerGroup, ConsumerGroupMember, MemberState, PartitionMap
from .consumer.member import LEAVE_GROUP_MEMBER_EPOCH, ClassicMemberMetadata
from .result import Record

log = logging.getLogger("slipstream.coordinator")


def _record(partition: int, key: gr.ConsumerGroupKey, value: gr.ConsumerGroupValue | None) -> Record:
    encoded = None if value is None else gr.encode_consumer_group_value(value)
    # Decoding these bytes gives back ``key`` and ``value``: replaying our own record skips it.
    return Record(partition, gr.encode_consumer_group_key(key), encoded, consumer=(key, value))


def _target_partitions(partitions: PartitionMap) -> list[gr.TargetTopicPartitions]:
    return [gr.TargetTopicPartitions(topic_id=t, partitions=sorted(partitions[t])) for t in sorted(partitions)]


def _current_partitions(partitions: PartitionMap) -> list[gr.CurrentTopicPartitions]:
    return [gr.CurrentTopicPartitions(topic_id=t, partitions=sorted(partitions[t])) for t in sorted(partitions)]


def _partition_map(topics: list[gr.TargetTopicPartitions] | list[gr.CurrentTopicPartitions]) -> PartitionMap:
    out: dict = {}
    for t in topics:
        out[t.topic_id] = out.get(t.topic_id, frozenset()) | frozenset(t.partitions)
    return out


# ------------------------------------------------------------------ builders


def group_epoch_record(partition: int, group_id: str, epoch: int, metadata_hash: int) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupMetadataKey(group=group_id),
        gr.ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def group_epoch_tombstone(partition: int, group_id: str) -> Record:
    return _record(partition, gr.ConsumerGroupMetadataKey(group=group_id), None)


def member_subscription_record(partition: int, group_id: str, member: ConsumerGroupMember) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupMemberMetadataKey(group=group_id, member_id=member.member_id),
        gr.ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=sorted(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex or None,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
            classic_member_metadata=None
            if member.classic is None
            else gr.ClassicMemberMetadata(
                session_timeout_ms=member.classic.session_timeout_ms,
                supported_protocols=[gr.ClassicProtocol(name=n, metadata=m) for n, m in member.classic.protocols],
            ),
        ),
    )


def member_subscription_tombstone(partition: int, group_id: str, member_id: str) -> Record:
    return _record(partition, gr.ConsumerGroupMemberMetadataKey(group=group_id, member_id=member_id), None)


def target_assignment_record(partition: int, group_id: str, member_id: str, target: PartitionMap) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupTargetAssignmentMemberKey(group=group_id, member_id=member_id),
        gr.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=_target_partitions(target)),
    )


def target_assignment_tombstone(partition: int, group_id: str, member_id: str) -> Record:
    return _record(partition, gr.ConsumerGroupTargetAssignmentMemberKey(group=group_id, member_id=member_id), None)


def target_epoch_record(partition: int, group_id: str, epoch: int, now_ms: int) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupTargetAssignmentMetadataKey(group=group_id),
        gr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=now_ms),
    )


def target_epoch_tombstone(partition: int, group_id: str) -> Record:
    return _record(partition, gr.ConsumerGroupTargetAssignmentMetadataKey(group=group_id), None)


def current_assignment_record(partition: int, group_id: str, member: ConsumerGroupMember) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupCurrentMemberAssignmentKey(group=group_id, member_id=member.member_id),
        gr.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=member.state.value,
            assigned_partitions=_current_partitions(member.assigned_partitions),
            partitions_pending_revocation=_current_partitions(member.partitions_pending_revocation),
        ),
    )


def current_assignment_tombstone(partition: int, group_id: str, member_id: str) -> Record:
    return _record(partition, gr.ConsumerGroupCurrentMemberAssignmentKey(group=group_id, member_id=member_id), None)


def regex_record(partition: int, group_id: str, regex: str, topics: frozenset[str], version: int, now_ms: int) -> Record:
    return _record(
        partition,
        gr.ConsumerGroupRegularExpressionKey(group=group_id, regular_expression=regex),
        gr.ConsumerGroupRegularExpressionValue(topics=sorted(topics), version=version, timestamp=now_ms),
    )


def regex_tombstone(partition: int, group_id: str, regex: str) -> Record:
    return _record(partition, gr.ConsumerGroupRegularExpressionKey(group=group_id, regular_expression=regex), None)


def member_tombstones(partition: int, group_id: str, member_id: str) -> list[Record]:
    """A member leaving: Kafka's order (current assignment, target, then subscription)."""
    return [
        current_assignment_tombstone(partition, group_id, member_id),
        target_assignment_tombstone(partition, group_id, member_id),
        member_subscription_tombstone(partition, group_id, member_id),
    ]


def group_tombstones(partition: int, group: ConsumerGroup) -> list[Record]:
    """Everything a deleted group wrote: members, regexes, target epoch, then the group epoch."""
    records: list[Record] = []
    for member_id in sorted(group.members):
        records.extend(member_tombstones(partition, group.group_id, member_id))
    for regex in sorted(group.resolved_regexes):
        records.append(regex_tombstone(partition, group.group_id, regex))
    records.append(target_epoch_tombstone(partition, group.group_id))
    records.append(group_epoch_tombstone(partition, group.group_id))
    return records


# ------------------------------------------------------------------ replay


def replay_consumer_record(
    groups: MutableMapping[str, ConsumerGroup],
    key: gr.ConsumerGroupKey,
    value: gr.ConsumerGroupValue | None,
    now_ms: int = 0,
) -> None:
    """Apply one consumer-group record to ``groups`` (created on its first record)."""
    group_id = key.group
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return
        group = groups[group_id] = ConsumerGroup(group_id)

    if isinstance(key, gr.ConsumerGroupMetadataKey):
        if value is None:
            if group.members:
                log.warning("group %s: epoch tombstone for a group with members; removing it anyway", group_id)
            group.mark_dead()
            del groups[group_id]
            return
        assert isinstance(value, gr.ConsumerGroupMetadataValue)
        group.metadata_hash = value.metadata_hash
        if value.epoch != group.group_epoch:
            group.epoch_changed_ms = now_ms
        group.set_group_epoch(value.epoch)
    elif isinstance(key, gr.ConsumerGroupMemberMetadataKey):
        _replay_member(group, key.member_id, value)
    elif isinstance(key, gr.ConsumerGroupTargetAssignmentMetadataKey):
        if value is None:
            group.set_target_assignment_epoch(0)
        else:
            assert isinstance(value, gr.ConsumerGroupTargetAssignmentMetadataValue)
            group.set_target_assignment_epoch(value.assignment_epoch)
    elif isinstance(key, gr.ConsumerGroupTargetAssignmentMemberKey):
        if value is None:
            group.remove_target_assignment(key.member_id)
        else:
            assert isinstance(value, gr.ConsumerGroupTargetAssignmentMemberValue)
            group.update_target_assignment(key.member_id, _partition_map(value.topic_partitions))
    elif isinstance(key, gr.ConsumerGroupCurrentMemberAssignmentKey):
        _replay_current_assignment(group, key.member_id, value)
    elif isinstance(key, gr.ConsumerGroupRegularExpressionKey):
        if value is None:
            group.set_resolved_regex(key.regular_expression, None)
        else:
            assert isinstance(value, gr.ConsumerGroupRegularExpressionValue)
            group.set_resolved_regex(key.regular_expression, frozenset(value.topics))


def _replay_member(group: ConsumerGroup, member_id: str, value: gr.ConsumerGroupValue | None) -> None:
    old = group.member(member_id)
    if value is None:
        if old is None:
            return
        if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH and (old.assigned_partitions or old.partitions_pending_revocation):
            log.warning("group %s: member %s removed while still holding partitions", group.group_id, member_id)
            group.update_member(old.replace(assigned_partitions={}, partitions_pending_revocation={}))
        group.remove_member(member_id)
        return
    assert isinstance(value, gr.ConsumerGroupMemberMetadataValue)
    base = old if old is not None else ConsumerGroupMember(member_id=member_id)
    group.update_member(
        base.replace(
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or "",
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic=None
            if value.classic_member_metadata is None
            else ClassicMemberMetadata(
                value.classic_member_metadata.session_timeout_ms,
                tuple((p.name, bytes(p.metadata)) for p in value.classic_member_metadata.supported_protocols),
            ),
        )
    )


def _replay_current_assignment(group: ConsumerGroup, member_id: str, value: gr.ConsumerGroupValue | None) -> None:
    old = group.member(member_id)
    if value is None:
        if old is not None:
            group.update_member(
                old.replace(
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    state=MemberState.STABLE,
                    assigned_partitions={},
                    partitions_pending_revocation={},
                )
            )
        return
    assert isinstance(value, gr.ConsumerGroupCurrentMemberAssignmentValue)
    base = old if old is not None else ConsumerGroupMember(member_id=member_id)
    group.update_member(
        base.replace(
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned_partitions=_partition_map(value.assigned_partitions),
            partitions_pending_revocation=_partition_map(value.partitions_pending_revocation),
        )
    )
