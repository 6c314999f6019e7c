"""A ``consumer`` (KIP-848) group: members, epochs, target assignment and partition owners.

The mutators here are what replaying the group's records does; handlers decide
what to write, and only replay calls them. Every mutator keeps the derived
indexes (subscriber counts, static members, partition owner epochs) and the
derived group state in step.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping

from .member import ConsumerGroupMember, MemberState
from .partitions import PartitionMap, TopicId, normalize
from .regex import matching_topics


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class SubscriptionType(enum.Enum):
    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


class PartitionOwnershipError(AssertionError):
    """A partition would get two owners at once, or an owner that does not hold it.

    Raised only on a bug or corrupt records: reconciliation never produces it.
    """


NO_OWNER_EPOCH = -1
# The protocol type of classic members a consumer group can hold (ConsumerProtocol's).
CONSUMER_PROTOCOL_TYPE = "consumer"


def _subscribes_to(member: ConsumerGroupMember, name: str) -> bool:
    """By name, or by a regex that matches it (whatever the regex last resolved to)."""
    return name in member.subscribed_topic_names or (
        member.uses_regex and bool(matching_topics(member.subscribed_topic_regex, (name,)))
    )


def _holds_deleted_partition(
    member: ConsumerGroupMember, name: str, partition: int, name_of: Callable[[TopicId], str | None]
) -> bool:
    """Whether ``member`` holds partition ``partition`` of a deleted topic that may have had
    ``name``. The deleted topic's name is not known any more: a partition the member has
    assigned counts when it subscribes to ``name`` (its assigned topics are ones it
    subscribes to); one it is revoking counts whatever the name (it may have left that
    subscription), which at worst delays a partition by its acknowledgement."""
    for held_id, numbers in member.assigned_partitions.items():
        if partition in numbers and name_of(held_id) is None and _subscribes_to(member, name):
            return True
    return any(
        partition in numbers and name_of(held_id) is None
        for held_id, numbers in member.partitions_pending_revocation.items()
    )


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.target_assignment_epoch = 0
        self._members: dict[str, ConsumerGroupMember] = {}
        self._target_assignment: dict[str, PartitionMap] = {}
        # topic id -> partition -> epoch of the member that currently owns it (assigned
        # or pending revocation). A partition absent here is free to hand out.
        self._partition_epochs: dict[TopicId, dict[int, int]] = {}
        # topic id -> the members owning any of its partitions (at most one per partition,
        # so a deleted topic's holders are found without walking every member).
        self._topic_holders: dict[TopicId, set[str]] = {}
        self._subscribed_topic_names: Counter[str] = Counter()
        self._subscribed_regexes: Counter[str] = Counter()
        self._server_assignors: Counter[str] = Counter()
        self._static_members: dict[str, str] = {}
        # Members speaking the classic protocol, and how many of them list each protocol
        # name (Kafka's numClassicProtocolMembers / classicProtocolMembersSupportedProtocols).
        self._classic_members = 0
        self._classic_protocols: Counter[str] = Counter()
        # regex -> topic names it matched at its last resolution.
        self._resolved_regexes: dict[str, frozenset[str]] = {}
        self._state = ConsumerGroupState.EMPTY
        # Digest of the subscribed topics' metadata at the last group epoch bump
        # (stored in the group's metadata record).
        self.metadata_hash = 0
        # In memory only: the topics image version the metadata hash and regexes were
        # last checked against (-1: never, e.g. after a restart).
        self.checked_topics_version = -1
        # In memory only: when the group epoch last changed (replay time).
        self.epoch_changed_ms = 0

    # ----- reads -----

    @property
    def state(self) -> ConsumerGroupState:
        return self._state

    @property
    def members(self) -> Mapping[str, ConsumerGroupMember]:
        return self._members

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self._members.get(member_id)

    def has_member(self, member_id: str) -> bool:
        return member_id in self._members

    @property
    def target_assignment(self) -> Mapping[str, PartitionMap]:
        return self._target_assignment

    def target_assignment_of(self, member_id: str) -> PartitionMap:
        return self._target_assignment.get(member_id, {})

    @property
    def static_members(self) -> Mapping[str, str]:
        return self._static_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self._static_members.get(instance_id)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_member_id(instance_id)
        return None if member_id is None else self._members.get(member_id)

    @property
    def subscribed_topic_names(self) -> Mapping[str, int]:
        """Topic name -> number of members subscribed to it by name."""
        return self._subscribed_topic_names

    @property
    def subscribed_regexes(self) -> Mapping[str, int]:
        """Regex -> number of members subscribed with it."""
        return self._subscribed_regexes

    @property
    def resolved_regexes(self) -> Mapping[str, frozenset[str]]:
        return self._resolved_regexes

    @property
    def num_classic_members(self) -> int:
        return self._classic_members

    def supports_classic_protocols(self, protocol_type: str, names: frozenset[str]) -> bool:
        """Whether a classic JoinGroup with these protocols fits (Kafka's supportsClassicProtocols):
        the consumer protocol type, and a protocol every classic member lists too."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        if not self._members:
            return bool(names)
        return any(self._classic_protocols.get(name, 0) == self._classic_members for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Whether every member but ``member_id`` speaks the classic protocol and it does not."""
        member = self._members.get(member_id)
        return (
            member is not None
            and not member.uses_classic_protocol
            and self._classic_members == len(self._members) - 1
        )

    def current_partition_epoch(self, topic_id: TopicId, partition: int) -> int:
        """Epoch of the partition's current owner, or -1 when nobody owns it."""
        return self._partition_epochs.get(topic_id, {}).get(partition, NO_OWNER_EPOCH)

    def owner_epoch_lookup(
        self, name_of: Callable[[TopicId], str | None], member_id: str
    ) -> Callable[[TopicId, int], int]:
        """``current_partition_epoch`` for reconciling ``member_id``, which also counts a
        partition as owned while another member still holds that partition number of a
        deleted topic that may have had this topic's name (``_holds_deleted_partition``).

        A topic deleted and created again under its name gets a new id, so by id its
        partitions are free at once; but clients fetch and commit by name, and a member
        that has not heard of the deletion (paused, or between heartbeats) still consumes
        "the same" partition. Kafka hands it out at once; here it waits, as for any
        unreleased partition, until the holder revokes it or leaves the group.
        ``name_of`` gives a live topic's name (None once it is deleted)."""
        holders = self._deleted_topic_holders(name_of, member_id)
        if not holders:
            return self.current_partition_epoch

        def lookup(topic_id: TopicId, partition: int) -> int:
            epoch = self.current_partition_epoch(topic_id, partition)
            if epoch != NO_OWNER_EPOCH:
                return epoch
            name = name_of(topic_id)
            if name is None:
                return NO_OWNER_EPOCH
            for holder in holders.get(partition, ()):
                if _holds_deleted_partition(holder, name, partition, name_of):
                    return holder.member_epoch
            return NO_OWNER_EPOCH

        return lookup

    @staticmethod
    def holds_only_a_deleted_incarnation(
        member: ConsumerGroupMember,
        name: str,
        topic_id: TopicId,
        partition: int,
        name_of: Callable[[TopicId], str | None],
    ) -> bool:
        """Whether ``member`` holds partition ``partition`` of a deleted topic that may have
        had ``name`` and not of ``topic_id``, the live topic of that name: a commit of it
        by name is the deleted topic's offset."""
        return partition not in member.assigned_partitions.get(topic_id, ()) and _holds_deleted_partition(
            member, name, partition, name_of
        )

    def _deleted_topic_holders(
        self, name_of: Callable[[TopicId], str | None], except_member: str
    ) -> dict[int, list[ConsumerGroupMember]]:
        """Partition number -> the members other than ``except_member`` that hold that
        partition of a deleted topic (assigned or being revoked)."""
        deleted = [topic_id for topic_id in self._topic_holders if name_of(topic_id) is None]
        if not deleted:
            return {}  # the usual case: every owned partition's topic exists
        holders: dict[int, list[ConsumerGroupMember]] = {}
        for topic_id in deleted:
            for member_id in self._topic_holders[topic_id]:
                if member_id == except_member:
                    continue
                member = self._members[member_id]
                for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
                    for number in partitions.get(topic_id, ()):
                        holders.setdefault(number, []).append(member)
        return holders

    def member_subscribed_topics(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The topic names a member consumes: its names plus what its regex resolved to."""
        if not member.uses_regex:
            return member.subscribed_topic_names
        regex_topics = self._resolved_regexes.get(member.subscribed_topic_regex, frozenset())
        return member.subscribed_topic_names | regex_topics

    def all_subscribed_topics(self) -> frozenset[str]:
        topics = set(self._subscribed_topic_names)
        for regex in self._subscribed_regexes:
            topics |= self._resolved_regexes.get(regex, frozenset())
        return frozenset(topics)

    def subscription_type(self) -> SubscriptionType:
        """HOMOGENEOUS when every member consumes the same topics (Kafka counts names)."""
        subscriptions = {self.member_subscribed_topics(m) for m in self._members.values()}
        return SubscriptionType.HOMOGENEOUS if len(subscriptions) <= 1 else SubscriptionType.HETEROGENEOUS

    @property
    def server_assignor_counts(self) -> Mapping[str, int]:
        """Assignor name -> number of members that asked for it."""
        return self._server_assignors

    def preferred_server_assignor(self) -> str | None:
        """The assignor named by most members (ties: the smallest name), or None."""
        if not self._server_assignors:
            return None
        return min(self._server_assignors.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def waiting_on_unreleased_partition(
        self, member: ConsumerGroupMember, name_of: Callable[[TopicId], str | None]
    ) -> bool:
        """Whether ``member`` waits for a partition of its target that another member still
        owns (see ``owner_epoch_lookup``)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        owner_epoch = self.owner_epoch_lookup(name_of, member.member_id)
        for topic_id, target in self.target_assignment_of(member.member_id).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            for partition in target - assigned:
                if owner_epoch(topic_id, partition) != NO_OWNER_EPOCH:
                    return True
        return False

    # ----- replay -----

    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self._update_state()

    def set_target_assignment_epoch(self, epoch: int) -> None:
        self.target_assignment_epoch = epoch
        self._update_state()

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member (subscription or current-assignment record)."""
        old = self._members.get(member.member_id)
        self._check_ownership(old, member)
        if old is not None:
            self._remove_indexes(old)
        self._members[member.member_id] = member
        self._add_indexes(member)
        self._update_state()

    def remove_member(self, member_id: str) -> None:
        old = self._members.pop(member_id, None)
        if old is not None:
            self._remove_indexes(old)
        self._update_state()

    def update_target_assignment(self, member_id: str, partitions: PartitionMap) -> None:
        self._target_assignment[member_id] = normalize(partitions)

    def remove_target_assignment(self, member_id: str) -> None:
        self._target_assignment.pop(member_id, None)

    def set_resolved_regex(self, regex: str, topics: frozenset[str] | None) -> None:
        """Record what ``regex`` matched (``None`` forgets it)."""
        if topics is None:
            self._resolved_regexes.pop(regex, None)
        else:
            self._resolved_regexes[regex] = frozenset(topics)

    def mark_dead(self) -> None:
        self._state = ConsumerGroupState.DEAD

    # ----- internals -----

    def _add_indexes(self, member: ConsumerGroupMember) -> None:
        self._subscribed_topic_names.update(member.subscribed_topic_names)
        if member.uses_regex:
            self._subscribed_regexes[member.subscribed_topic_regex] += 1
        if member.server_assignor is not None:
            self._server_assignors[member.server_assignor] += 1
        if member.instance_id is not None:
            self._static_members[member.instance_id] = member.member_id
        if member.classic is not None:
            self._classic_members += 1
            self._classic_protocols.update(member.classic.protocol_names())
        self._add_partition_epochs(member.assigned_partitions, member.member_epoch)
        self._add_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
        for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id in partitions:
                self._topic_holders.setdefault(topic_id, set()).add(member.member_id)

    def _remove_indexes(self, member: ConsumerGroupMember) -> None:
        self._subscribed_topic_names.subtract(member.subscribed_topic_names)
        self._subscribed_topic_names = +self._subscribed_topic_names  # drop zero counts
        if member.uses_regex:
            self._subscribed_regexes[member.subscribed_topic_regex] -= 1
            self._subscribed_regexes = +self._subscribed_regexes
        if member.server_assignor is not None:
            self._server_assignors[member.server_assignor] -= 1
            self._server_assignors = +self._server_assignors
        # A replacement static member may already have taken the instance id over.
        if member.instance_id is not None and self._static_members.get(member.instance_id) == member.member_id:
            del self._static_members[member.instance_id]
        if member.classic is not None:
            self._classic_members -= 1
            self._classic_protocols.subtract(member.classic.protocol_names())
            self._classic_protocols = +self._classic_protocols
        self._remove_partition_epochs(member.assigned_partitions, member.member_epoch)
        self._remove_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
        for partitions in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id in partitions:
                holders = self._topic_holders.get(topic_id)
                if holders is not None:
                    holders.discard(member.member_id)
                    if not holders:
                        del self._topic_holders[topic_id]

    def _check_ownership(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        """Refuse, before changing anything, a member that takes a partition someone else owns."""
        previously_owned = old.owned_partitions() if old is not None else {}
        for topic_id, parts in new.owned_partitions().items():
            epochs = self._partition_epochs.get(topic_id, {})
            mine = previously_owned.get(topic_id, frozenset())
            for partition in parts:
                if partition in epochs and partition not in mine:
                    raise PartitionOwnershipError(
                        f"member {new.member_id} cannot own {topic_id}-{partition}: "
                        f"another member owns it at epoch {epochs[partition]}"
                    )

    def _add_partition_epochs(self, partitions: PartitionMap, epoch: int) -> None:
        for topic_id, parts in partitions.items():
            epochs = self._partition_epochs.setdefault(topic_id, {})
            for partition in parts:
                if partition in epochs:
                    raise PartitionOwnershipError(
                        f"cannot give {topic_id}-{partition} an owner at epoch {epoch}: "
                        f"it is still owned at epoch {epochs[partition]}"
                    )
                epochs[partition] = epoch

    def _remove_partition_epochs(self, partitions: PartitionMap, epoch: int) -> None:
        for topic_id, parts in partitions.items():
            epochs = self._partition_epochs.get(topic_id, {})
            for partition in parts:
                owner_epoch = epochs.pop(partition, None)
                if owner_epoch != epoch:
                    raise PartitionOwnershipError(
                        f"cannot release {topic_id}-{partition} at epoch {epoch}: "
                        f"its owner epoch is {owner_epoch}"
                    )
            if not epochs:
                self._partition_epochs.pop(topic_id, None)

    def _update_state(self) -> None:
        if self._state is ConsumerGroupState.DEAD:
            return
        if not self._members:
            self._state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.target_assignment_epoch:
            self._state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.target_assignment_epoch) for m in self._members.values()):
            self._state = ConsumerGroupState.RECONCILING
        else:
            self._state = ConsumerGroupState.STABLE
