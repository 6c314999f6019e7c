"""Online migration of a group between the classic and the consumer (KIP-848) protocols.

Kafka 3.8+ (and 4.0 by default, ``group.consumer.migration.policy=bidirectional``)
moves a group with members from one protocol to the other while it runs:

- upgrade: the first ConsumerGroupHeartbeat to a classic group of consumers
  (protocol type "consumer") turns it into a consumer group. Each classic member
  becomes a member of the consumer group that still speaks the classic protocol
  (its JoinGroup protocols and session timeout kept as ``ClassicMemberMetadata``),
  at the classic generation as its epoch, with what it may hold as both its
  current and its target assignment: its last assignment and the partitions its
  last JoinGroup said it owns (Kafka takes only the former; see
  ``consumer_group_from_classic``). Written as Kafka writes it: the classic
  group's tombstone, then every member's subscription, the group epoch, every
  target assignment, the target epoch and every current assignment.
- downgrade: when the last member speaking the consumer protocol leaves (or is
  fenced) and classic members remain, the group becomes a classic group again:
  the consumer group's tombstones, then a classic group record (Stable, the
  group epoch as its generation, each member's partitions as its assignment:
  assigned and pending revocation, where Kafka writes the target), and a
  rebalance starts so the members rejoin it.

This module builds the converted groups and their records; protocol_migration.py
decides when, and replaying the records is what switches the group's type.
"""

from __future__ import annotations

from ..protocol import consumer_protocol as cp
from . import consumer_records as crec
from . import records as rec
from .consumer import ConsumerGroup, ConsumerGroupMember, MemberState, PartitionMap
from .consumer.member import ClassicMemberMetadata
from .consumer.partitions import union
from .group import ClassicGroup
from .member import Member
from .result import Record
from .state import GroupState
from .topics_image import TopicsImage


class ConversionError(ValueError):
    """The group's embedded consumer protocol cannot be read: it is not converted."""


# ------------------------------------------------------------------ upgrade


def to_partition_map(image: TopicsImage, topics: list[cp.ConsumerProtocolTopicPartition]) -> PartitionMap:
    """Named partitions as topic ids; topics the broker does not know are dropped (as Kafka)."""
    out: dict = {}
    for tp in topics:
        meta = image.by_name.get(tp.topic)
        if meta is not None:
            out[meta.topic_id] = out.get(meta.topic_id, frozenset()) | frozenset(tp.partitions)
    return {t: ps for t, ps in out.items() if ps}


def consumer_group_from_classic(classic: ClassicGroup, image: TopicsImage) -> ConsumerGroup:
    """The consumer group an online upgrade makes of ``classic`` (Kafka's ``fromClassicGroup``)."""
    protocol = classic.protocol_name
    group = ConsumerGroup(classic.group_id)
    generation = classic.generation_id
    group.set_group_epoch(generation)
    group.set_target_assignment_epoch(generation)
    for m in classic.members.values():
        try:
            metadata = m.metadata(protocol) if protocol is not None else m.protocols[0][1]
            _version, subscription = cp.decode_subscription(metadata)
            assigned_topics = cp.decode_assignment(m.assignment)[1].assigned_partitions if m.assignment else []
        except (ValueError, KeyError, IndexError) as exc:
            raise ConversionError(f"member {m.member_id}: {exc}") from exc
        # What the member may hold, not only its recorded assignment (all Kafka copies):
        # a group sent back from CompletingRebalance to PreparingRebalance has emptied
        # the recorded assignments, and in Stable a member may not have read its SyncGroup
        # answer yet, while a cooperative member keeps until then what its JoinGroup
        # listed as owned. Taking both, a partition stays with its holder until it
        # revokes it, whatever state the group was in; an eager member listed nothing.
        assigned = union(
            to_partition_map(image, assigned_topics), to_partition_map(image, subscription.owned_partitions)
        )
        member = ConsumerGroupMember(
            member_id=m.member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics),
            assigned_partitions=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple((n, bytes(d)) for n, d in m.protocols)),
        )
        group.update_target_assignment(m.member_id, assigned)
        group.update_member(member)
    return group


def consumer_group_records(partition: int, group: ConsumerGroup, metadata_hash: int, now_ms: int) -> list[Record]:
    """The records that create ``group`` (Kafka's ``createConsumerGroupRecords`` order)."""
    group_id = group.group_id
    members = [group.members[m] for m in sorted(group.members)]
    records = [crec.member_subscription_record(partition, group_id, m) for m in members]
    records.append(crec.group_epoch_record(partition, group_id, group.group_epoch, metadata_hash))
    records += [
        crec.target_assignment_record(partition, group_id, m.member_id, group.target_assignment_of(m.member_id))
        for m in members
    ]
    records.append(crec.target_epoch_record(partition, group_id, group.group_epoch, now_ms))
    records += [crec.current_assignment_record(partition, group_id, m) for m in members]
    return records


# ------------------------------------------------------------------ downgrade


def to_assignment_bytes(image: TopicsImage, partitions: PartitionMap, subscription: bytes) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions``, in the version of the member's subscription."""
    try:
        version = cp.decode_subscription(subscription)[0]
    except ValueError:
        version = 0
    topics = [
        cp.ConsumerProtocolTopicPartition(topic=name, partitions=sorted(partitions[t]))
        for t in sorted(partitions, key=lambda t: image.name_of(t) or "")
        if (name := image.name_of(t)) is not None
    ]
    version = min(version, cp.ASSIGNMENT_MAX_VERSION)
    return cp.encode_assignment(cp.ConsumerProtocolAssignment(assigned_partitions=topics), version)


def classic_group_from_consumer(
    group: ConsumerGroup, leaving_member_id: str, image: TopicsImage, now_ms: int
) -> ClassicGroup:
    """The classic group a downgrade makes of ``group`` without ``leaving_member_id``
    (Kafka's ``ClassicGroup.fromConsumerGroup``): Stable at the group epoch, each member
    with what it may hold as its assignment.

    Kafka records the target assignment. But a member may not have revoked what the target
    moved away from it yet, and a partition in its target may still be held by another
    member; an upgrade before the rebalance settles converts the recorded assignments,
    and a SyncGroup in the Stable group (after a restart between the records and the
    rebalance) answers them. What each member holds (assigned and pending revocation;
    disjoint across members) is right in both."""
    classic = ClassicGroup(
        group.group_id, now_ms, GroupState.STABLE, generation_id=group.group_epoch, protocol_type=cp.PROTOCOL_TYPE
    )
    for member_id in sorted(group.members):
        m = group.members[member_id]
        if member_id == leaving_member_id or m.classic is None:
            continue
        classic.add(
            Member(
                member_id=member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=cp.PROTOCOL_TYPE,
                protocols=list(m.classic.protocols),
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    for member in classic.members.values():
        member.assignment = to_assignment_bytes(
            image, group.members[member.member_id].owned_partitions(), member.metadata(classic.protocol_name)
        )
    return classic


def classic_group_record(partition: int, classic: ClassicGroup) -> Record:
    return rec.group_metadata_record(partition, classic, classic.assignment_map())
