"""A member of a ``consumer`` (KIP-848) group: an immutable value, changed by ``replace``."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import cast

from .partitions import PartitionMap, TopicId, normalize


class MemberState(enum.Enum):
    """Reconciliation state of a member; values are the ones stored in records."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        # A state written by a newer coordinator reads as UNKNOWN (the member gets fenced).
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


# Member epochs the client sends in ConsumerGroupHeartbeat with special meanings.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member speaking the classic protocol inside a consumer group joined with
    (Kafka's ``ClassicMemberMetadata`` of the member record): its session timeout and
    its JoinGroup protocols, (name, subscription metadata) in its order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol it is answered with: its first (Kafka answers the first one)."""
        return self.protocols[0][0]

    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.protocols)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: frozenset[str] = frozenset()
    # "" means no regex subscription (as in Kafka's records).
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    assigned_partitions: PartitionMap = field(default_factory=dict)
    partitions_pending_revocation: PartitionMap = field(default_factory=dict)
    # Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)
    # in a consumer group: a classic group's member converted by an online upgrade, or
    # a classic consumer that joined the consumer group.
    classic: ClassicMemberMetadata | None = None

    def __post_init__(self) -> None:
        # Normalize so equal members compare equal whatever the caller passed in.
        object.__setattr__(self, "subscribed_topic_names", frozenset(self.subscribed_topic_names))
        object.__setattr__(self, "assigned_partitions", normalize(self.assigned_partitions))
        object.__setattr__(
            self, "partitions_pending_revocation", normalize(self.partitions_pending_revocation)
        )

    def __hash__(self) -> int:
        return hash((self.member_id, self.member_epoch, self.state))

    def replace(self, **changes: object) -> ConsumerGroupMember:
        """A copy with ``changes`` applied (Kafka's ``new Builder(member).setX(..).build()``).

        ``self`` when nothing changes (most heartbeats): members are immutable values, and a
        copy costs a field-by-field rebuild with normalization."""
        for name, value in changes.items():
            if getattr(self, name) != value:
                return self._copy_with(changes)
        return self

    def _copy_with(self, changes: Mapping[str, object]) -> ConsumerGroupMember:
        """``dataclasses.replace`` at about half its cost (a join storm copies members some
        ten times per joining member): the fields kept are normalized already, so only the
        changed ones go through ``__post_init__``'s normalization."""
        new = object.__new__(ConsumerGroupMember)
        for name in _FIELD_NAMES:
            _set(new, name, getattr(self, name))
        for name, value in changes.items():
            if name not in _FIELD_NAMES:
                raise TypeError(f"ConsumerGroupMember has no field {name!r}")
            _set(new, name, _normalized(name, value))
        return new

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Move to ``epoch``; the current epoch becomes the previous one (``updateMemberEpoch``)."""
        return self._copy_with({"member_epoch": epoch, "previous_member_epoch": self.member_epoch})

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    @property
    def uses_regex(self) -> bool:
        return self.subscribed_topic_regex != ""

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def owned_partitions(self) -> PartitionMap:
        """Partitions this member may still be consuming: assigned plus pending revocation."""
        out = dict(self.assigned_partitions)
        for topic_id, parts in self.partitions_pending_revocation.items():
            out[topic_id] = out.get(topic_id, frozenset()) | parts
        return out

    def with_subscription(
        self,
        *,
        topic_names: Set[str] | None = None,
        topic_regex: str | None = None,
        server_assignor: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int | None = None,
        instance_id: str | None = None,
    ) -> ConsumerGroupMember:
        """Apply the optional fields of a heartbeat: ``None`` keeps the current value
        (Kafka's ``maybeUpdate*``)."""
        changes: dict[str, object] = {}
        if topic_names is not None:
            changes["subscribed_topic_names"] = frozenset(topic_names)
        if topic_regex is not None:
            changes["subscribed_topic_regex"] = topic_regex
        if server_assignor is not None:
            changes["server_assignor"] = server_assignor
        if rack_id is not None:
            changes["rack_id"] = rack_id
        if rebalance_timeout_ms is not None:
            changes["rebalance_timeout_ms"] = rebalance_timeout_ms
        if instance_id is not None:
            changes["instance_id"] = instance_id
        return self.replace(**changes) if changes else self

    def subscription_differs(self, other: ConsumerGroupMember) -> bool:
        """Whether a change from ``other`` to ``self`` must bump the group epoch."""
        return (
            self.subscribed_topic_names != other.subscribed_topic_names
            or self.subscribed_topic_regex != other.subscribed_topic_regex
        )


def replacement_for_static_member(old: ConsumerGroupMember, new_member_id: str) -> ConsumerGroupMember:
    """The member that takes over ``old``'s place when its instance id rejoins under
    ``new_member_id``: same subscription and assignment, epochs reset to 0 so it
    reconciles again from the join epoch."""
    return old._copy_with({"member_id": new_member_id, "member_epoch": 0, "previous_member_epoch": 0})


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ConsumerGroupMember))
_set = object.__setattr__  # frozen: a copy is built field by field, as __init__ does


def _normalized(name: str, value: object) -> object:
    """A changed field's value as ``__post_init__`` would store it."""
    if name == "subscribed_topic_names":
        return frozenset(cast(Iterable[str], value))
    if name in ("assigned_partitions", "partitions_pending_revocation"):
        return normalize(cast(PartitionMap, value))
    return value


def topic_partitions(assignment: Mapping[TopicId, frozenset[int]]) -> list[tuple[TopicId, list[int]]]:
    """An assignment as sorted ``(topic id, partitions)`` pairs, ready for a response."""
    return [(t, sorted(assignment[t])) for t in sorted(assignment)]
