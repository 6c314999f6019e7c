"""The classic group leader's work, without I/O: read the members' subscriptions, run the
assignor, encode each member's assignment in the version that member speaks.

Also the conversions between the consumer protocol's per-topic partition lists and
this client's (topic, partition) pairs, which every classic member needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from ..protocol.apis.join_group import JoinGroupResponseMember
from ..protocol.apis.sync_group import SyncGroupRequestAssignment
from ..protocol.consumer_protocol import (
    SUBSCRIPTION_MAX_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolTopicPartition,
    decode_subscription,
    encode_assignment,
)
from ..protocol.primitives import DecodeError
from .assignors import (
    COOPERATIVE,
    Assignor,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    cooperative_violations,
)

log = logging.getLogger(__name__)


def group_partitions(partitions: Iterable[TopicPartition]) -> list[ConsumerProtocolTopicPartition]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        by_topic.setdefault(topic, []).append(partition)
    return [ConsumerProtocolTopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()]


def flatten_partitions(groups: Iterable[ConsumerProtocolTopicPartition]) -> list[TopicPartition]:
    return sorted({(g.topic, p) for g in groups for p in g.partitions})


def decode_member_subscriptions(
    members: Iterable[JoinGroupResponseMember], group_id: str
) -> dict[str, Subscription]:
    """The members' subscriptions from the JoinGroup answer. Unreadable ones subscribe to nothing."""
    out: dict[str, Subscription] = {}
    for m in members:
        try:
            _version, sub = decode_subscription(m.metadata)
        except (DecodeError, ValueError) as exc:
            log.warning(
                "group %s: member %s sent an unreadable subscription: %s",
                group_id,
                m.member_id,
                exc,
            )
            out[m.member_id] = Subscription(topics=(), group_instance_id=m.group_instance_id)
            continue
        out[m.member_id] = Subscription(
            topics=tuple(sub.topics),
            user_data=sub.user_data,
            owned_partitions=flatten_partitions(sub.owned_partitions),
            generation_id=sub.generation_id,
            rack_id=sub.rack_id,
            group_instance_id=m.group_instance_id,
        )
    return out


def subscription_versions(members: Iterable[JoinGroupResponseMember]) -> dict[str, int]:
    """The consumer-protocol version each member's subscription was written in (0: unreadable)."""
    out: dict[str, int] = {}
    for m in members:
        try:
            out[m.member_id] = decode_subscription(m.metadata)[0]
        except (DecodeError, ValueError):
            out[m.member_id] = 0
    return out


def run_assignor(
    assignor: Assignor,
    protocol: RebalanceProtocol,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    group_id: str,
) -> dict[str, list[TopicPartition]]:
    """The assignor's answer for every member (maybe empty); under COOPERATIVE a partition
    another member still owns is withheld this round."""
    assignment = assignor.assign(partitions_per_topic, subscriptions)
    for member in subscriptions:
        assignment.setdefault(member, [])
    if protocol == COOPERATIVE:
        bad = cooperative_violations(subscriptions, assignment)
        if bad:
            log.error(
                "group %s: assignor %s broke the cooperative protocol for %s; withholding them",
                group_id,
                assignor.name,
                sorted(bad),
            )
            assignment = {m: [tp for tp in tps if tp not in bad] for m, tps in assignment.items()}
    return assignment


def encode_assignments(
    assignment: Mapping[str, Iterable[TopicPartition]], versions: Mapping[str, int]
) -> list[SyncGroupRequestAssignment]:
    """The SyncGroup assignments, each in the version its member's subscription used."""
    out: list[SyncGroupRequestAssignment] = []
    for member, tps in sorted(assignment.items()):
        version = min(versions.get(member, 0), SUBSCRIPTION_MAX_VERSION)
        data = encode_assignment(
            ConsumerProtocolAssignment(assigned_partitions=group_partitions(tps), user_data=None),
            version,
        )
        out.append(SyncGroupRequestAssignment(member_id=member, assignment=data))
    return out


def subscribed_topics(subscriptions: Iterable[Subscription]) -> tuple[str, ...]:
    """Every topic any member subscribes to, sorted."""
    return tuple(sorted({t for s in subscriptions for t in s.topics}))
