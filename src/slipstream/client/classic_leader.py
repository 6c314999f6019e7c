"""The classic group leader's work, without I/O: read the members' subscriptions, run the
assignor, encode each member's assignment in the version that member speaks, and watch
the partition counts it assigned with (:class:`GenerationLeader`).

A static leader back in a Stable group is told to skip the assignment (JoinGroup v9,
KIP-814): the group keeps the assignment made while it was away. It reads that
assignment back from DescribeGroups (:func:`read_described_group`) and rebalances
when it does not cover the subscribed partitions as they are now
(:func:`assignment_gaps`): partitions or topics added while it was away would
otherwise stay unowned, since its metadata watch starts from today's counts.

Also the conversions between the consumer protocol's per-topic partition lists and
this client's (topic, partition) pairs, which every classic member needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..protocol.apis.describe_groups import DescribeGroupsResponse
from ..protocol.apis.join_group import JoinGroupResponseMember
from ..protocol.apis.sync_group import SyncGroupRequestAssignment
from ..protocol.consumer_protocol import (
    SUBSCRIPTION_MAX_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolTopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from ..protocol.errors import name as error_name
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


GROUP_STATE_STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class DescribedAssignment:
    """A Stable group's assignment as DescribeGroups tells it: what each member subscribes
    to and owns."""

    subscriptions: dict[str, tuple[str, ...]]
    """Member id -> subscribed topics."""
    assignment: dict[str, list[TopicPartition]]
    """Member id -> assigned partitions."""

    @property
    def topics(self) -> list[str]:
        """Every topic subscribed to or assigned: the counts a check needs."""
        subscribed = {t for topics in self.subscriptions.values() for t in topics}
        assigned = {tp[0] for tps in self.assignment.values() for tp in tps}
        return sorted(subscribed | assigned)


def read_described_group(
    response: DescribeGroupsResponse, group_id: str, protocol_type: str, member_id: str
) -> DescribedAssignment | str:
    """The group's current assignment, or why it cannot be trusted (a string): the group is
    not Stable (only then does the coordinator send subscriptions, and a rebalance is under
    way anyway), speaks another protocol, no longer lists ``member_id``, or a member's data
    is unreadable."""
    group = next((g for g in response.groups if g.group_id == group_id), None)
    if group is None:
        return "DescribeGroups did not describe the group"
    if group.error_code:
        return f"DescribeGroups: {error_name(group.error_code)}"
    if group.group_state != GROUP_STATE_STABLE:
        return f"the group is {group.group_state}"
    if group.protocol_type != protocol_type:
        return f"the group's protocol type is {group.protocol_type!r}"
    if all(m.member_id != member_id for m in group.members):
        return f"the group no longer lists member {member_id}"
    subscriptions: dict[str, tuple[str, ...]] = {}
    assignment: dict[str, list[TopicPartition]] = {}
    for m in group.members:
        try:
            subscriptions[m.member_id] = tuple(decode_subscription(m.member_metadata)[1].topics)
            assigned = decode_assignment(m.member_assignment)[1] if m.member_assignment else None
        except (DecodeError, ValueError) as exc:
            return f"member {m.member_id}'s subscription or assignment is unreadable: {exc}"
        assignment[m.member_id] = flatten_partitions(assigned.assigned_partitions) if assigned else []
    return DescribedAssignment(subscriptions, assignment)


def assignment_gaps(described: DescribedAssignment, partitions_per_topic: Mapping[str, int]) -> list[str]:
    """Topics the assignment does not cover exactly with today's counts (missing topics
    count 0): a subscribed partition no one owns, a partition owned twice, or one that no
    longer exists or that no member subscribes to."""
    wanted = {
        (t, p)
        for topics in described.subscriptions.values()
        for t in topics
        for p in range(int(partitions_per_topic.get(t, 0)))
    }
    owned: set[TopicPartition] = set()
    twice: set[TopicPartition] = set()
    for tps in described.assignment.values():
        for tp in tps:
            (twice if tp in owned else owned).add(tp)
    return sorted({tp[0] for tp in (wanted ^ owned) | twice})


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
