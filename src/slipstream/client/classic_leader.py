"""The classic group leader's work, without I/O: read the members' subscriptions, run the
assignor, encode each member's assignment in the version that member speaks, and watch
the partition counts it assigned with (:class:`GenerationLeader`).

Also the conversions between the consumer protocol's per-topic partition lists and
this client's (topic, partition) pairs, which every classic member needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

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


class GenerationLeader:
    """What a member knows as leader of its generation: the members' JoinGroup metadata
    and the partition counts it assigned with.

    The metadata watch re-reads those counts every ``metadata_max_age_s``; a change (or
    a topic appearing) is the member's cue to rejoin, which rebalances the group. Whether
    this member leads, and whether a rejoin is already due, is the member core's to say.
    """

    def __init__(self, group_id: str, metadata_max_age_s: float) -> None:
        self.group_id = group_id
        self.metadata_max_age_s = metadata_max_age_s
        self.members: list[JoinGroupResponseMember] = []
        """The JoinGroup answer's members (empty for a follower)."""
        self.skip_assignment = False
        """JoinGroup v9: a static leader back in a Stable group must not reassign."""
        self.partition_counts: dict[str, int] = {}
        """Topic -> the partition count assigned with (0: the topic was missing)."""
        self.topics: tuple[str, ...] = ()
        """Every topic the group subscribes to, as of the last assignment."""
        self.next_check: float | None = None
        """When the watch next re-reads the counts (None: not armed)."""

    def joined(self, members: Sequence[JoinGroupResponseMember], skip_assignment: bool) -> None:
        self.members = list(members)
        self.skip_assignment = skip_assignment

    def subscriptions(self) -> dict[str, Subscription]:
        """The members' subscriptions. Unreadable ones subscribe to nothing."""
        return decode_member_subscriptions(self.members, self.group_id)

    def assign(
        self,
        assignor: Assignor,
        protocol: RebalanceProtocol,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, list[TopicPartition]]:
        """Run ``assignor``; remembers the counts for the metadata watch."""
        self.remember_counts(partitions_per_topic, subscriptions)
        counts = {t: n for t, n in self.partition_counts.items() if n > 0}
        return run_assignor(assignor, protocol, counts, subscriptions, self.group_id)

    def remember_counts(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> None:
        self.topics = subscribed_topics(subscriptions.values())
        self.partition_counts = {t: int(partitions_per_topic.get(t, 0)) for t in self.topics}

    def encode(
        self, assignment: Mapping[str, Iterable[TopicPartition]]
    ) -> list[SyncGroupRequestAssignment]:
        """The SyncGroup assignments, each in its member's subscription version."""
        return encode_assignments(assignment, subscription_versions(self.members))

    def time_to_check(self, now: float) -> float:
        """Seconds until the watch is due; arms it on the first ask."""
        if self.next_check is None:
            self.next_check = now + self.metadata_max_age_s
        return max(0.0, self.next_check - now)

    def check_due(self, now: float) -> bool:
        """True (once, when armed and due) when the counts should be re-read now."""
        due = self.next_check
        if due is None or now < due:
            return False
        self.next_check = None
        return bool(self.topics)

    def changed_topics(self, partitions_per_topic: Mapping[str, int]) -> list[str]:
        """Topics whose partition count differs from the one assigned with."""
        return sorted(
            t
            for t in self.topics
            if int(partitions_per_topic.get(t, 0)) != self.partition_counts.get(t, 0)
        )
