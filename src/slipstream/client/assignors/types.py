"""Plain data shared by the partition assignors, and the rebalance rules around them.

The assignors are pure functions of typed data: the consumer decodes the
consumer-protocol subscription bytes of every member into a
:class:`Subscription`, hands them with the partition counts to
``assignor.assign(...)``, and encodes the result. Nothing here touches the wire
format of the subscription itself; only the assignor-private ``user_data``
blobs (sticky, cooperative-sticky) are encoded by the assignor modules.

Ordering follows the Java client: member ids and ``group.instance.id`` are
compared as Java ``String.compareTo`` does (UTF-16 code units), static members
(with a ``group.instance.id``) sort before dynamic ones (Kafka's
``MemberInfo``), topics compare as plain strings (Kafka topic names are ASCII).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

TopicPartition = tuple[str, int]
"""``(topic, partition)``."""

Assignment = dict[str, list[TopicPartition]]
"""member id -> assigned partitions, each list sorted by (topic, partition)."""

RebalanceProtocol = Literal["EAGER", "COOPERATIVE"]
EAGER: Final = "EAGER"
COOPERATIVE: Final = "COOPERATIVE"

DEFAULT_GENERATION: Final = -1
"""Kafka's "no generation": a member that has not been assigned yet, or a v0/v1 subscription."""


@dataclass(frozen=True)
class Subscription:
    """One member's decoded subscription (ConsumerProtocolSubscription v0-v3).

    ``owned_partitions`` exists from v1, ``generation_id`` from v2 (``-1`` means
    absent, as in Kafka), ``rack_id`` from v3. ``group_instance_id`` is not part
    of the subscription bytes: it comes from the JoinGroup response member (v5+)
    and only affects member ordering (static members first).
    Sequences are normalised to tuples so a Subscription is immutable.
    """

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = DEFAULT_GENERATION
    rack_id: str | None = None
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            raise TypeError("Subscription.topics must be a sequence of topic names, not a str")
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(
            self, "owned_partitions", tuple((str(t), int(p)) for t, p in self.owned_partitions)
        )
        if self.user_data is not None:
            object.__setattr__(self, "user_data", bytes(self.user_data))


@runtime_checkable
class Assignor(Protocol):
    """A client-side partition assignor (Kafka's ``ConsumerPartitionAssignor``)."""

    name: str
    """The JoinGroup protocol name: "range", "roundrobin", "sticky", "cooperative-sticky"."""
    rebalance_protocol: RebalanceProtocol
    """The preferred protocol (the last entry of ``supported_protocols``)."""
    supported_protocols: tuple[RebalanceProtocol, ...]

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        """The ``user_data`` this member puts in its subscription.

        ``owned`` is the member's latest assignment and ``generation`` the
        generation it was received in (-1 before the first assignment).
        """
        ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignment:
        """Assign the partitions of the subscribed topics.

        ``partitions_per_topic`` maps topic -> partition count; subscribed
        topics missing from it (or with no partitions) are skipped, topics
        nobody subscribes to are ignored. Every member gets an entry, possibly
        empty; each list is sorted by (topic, partition).
        """
        ...


class EagerAssignor:
    """Base of the eager assignors that carry no ``user_data`` (range, roundrobin)."""

    rebalance_protocol: RebalanceProtocol = EAGER
    supported_protocols: tuple[RebalanceProtocol, ...] = (EAGER,)

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        return None


# ---- ordering ---------------------------------------------------------------------


def java_string_key(s: str) -> bytes:
    """A sort key that orders strings like Java's ``String.compareTo`` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes]:
    """Kafka's ``MemberInfo`` order: static members by instance id, then dynamic by member id."""
    if group_instance_id is not None:
        return (0, java_string_key(group_instance_id))
    return (1, java_string_key(member_id))


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(
        subscriptions,
        key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id),
    )


def subscribed_partition_counts(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """topic -> partition count for every subscribed topic that has partitions."""
    out: dict[str, int] = {}
    for sub in subscriptions.values():
        for topic in sub.topics:
            n = partitions_per_topic.get(topic)
            if n is not None and n > 0:
                out[topic] = int(n)
    return out


def sort_assignment(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    return {m: sorted(tps) for m, tps in assignment.items()}


# ---- rebalance rules for the consumer ----------------------------------------------


def revoked_partitions(
    owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> list[TopicPartition]:
    """Partitions this member owned but was not assigned (sorted)."""
    return sorted(set(owned) - set(assigned))


def added_partitions(
    owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> list[TopicPartition]:
    """Partitions newly assigned to this member (sorted)."""
    return sorted(set(assigned) - set(owned))


def partitions_to_revoke_before_join(
    protocol: RebalanceProtocol, owned: Iterable[TopicPartition]
) -> list[TopicPartition]:
    """EAGER members give up everything before JoinGroup; COOPERATIVE members keep it all."""
    return sorted(set(owned)) if protocol == EAGER else []


def rejoin_after_assignment(
    protocol: RebalanceProtocol, owned: Iterable[TopicPartition], assigned: Iterable[TopicPartition]
) -> bool:
    """KIP-429: a COOPERATIVE member that had to revoke anything rejoins at once.

    The revoked partitions are being moved to another member which did not get
    them in this round; the follow-up rebalance hands them over. EAGER members
    revoked everything before joining, so there is never a follow-up.
    """
    return protocol == COOPERATIVE and bool(revoked_partitions(owned, assigned))


def select_rebalance_protocol(assignors: Sequence[Assignor]) -> RebalanceProtocol:
    """The protocol a consumer with these assignors runs (the Java client's rule).

    The highest protocol supported by every configured assignor; COOPERATIVE
    only if all of them support it.
    """
    if not assignors:
        raise ValueError("at least one partition assignor is required")
    common = set(assignors[0].supported_protocols)
    for a in assignors[1:]:
        common &= set(a.supported_protocols)
    if COOPERATIVE in common:
        return COOPERATIVE
    if EAGER in common:
        return EAGER
    names = ", ".join(a.name for a in assignors)
    raise ValueError(f"assignors {names} have no rebalance protocol in common")


def cooperative_violations(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, Iterable[TopicPartition]]
) -> dict[TopicPartition, tuple[str, list[str]]]:
    """Partitions a COOPERATIVE leader must not hand out yet.

    partition -> (member it was assigned to, the other members still claiming
    it in ``owned_partitions``). An empty result means the assignment is safe
    (the Java leader's ``validateCooperativeAssignment`` fails otherwise).
    """
    claimants: dict[TopicPartition, list[str]] = {}
    for member, sub in subscriptions.items():
        for tp in set(sub.owned_partitions):
            claimants.setdefault(tp, []).append(member)
    out: dict[TopicPartition, tuple[str, list[str]]] = {}
    for member, tps in assignment.items():
        for tp in tps:
            others = sorted(c for c in claimants.get(tp, ()) if c != member)
            if others and member not in claimants.get(tp, ()):
                out[tp] = (member, others)
    return out


def check_assignment(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    assignment: Mapping[str, Iterable[TopicPartition]],
) -> list[str]:
    """Problems with an assignment (for tests and for a leader's sanity check).

    Every member present, no unknown members, no partition twice, every
    assigned partition exists and belongs to a topic its member subscribes to.
    It does not require every partition to be assigned (cooperative rounds
    leave some out).
    """
    problems: list[str] = []
    missing = set(subscriptions) - set(assignment)
    extra = set(assignment) - set(subscriptions)
    if missing:
        problems.append(f"members without an entry: {sorted(missing)}")
    if extra:
        problems.append(f"unknown members: {sorted(extra)}")
    seen: dict[TopicPartition, str] = {}
    for member, tps in assignment.items():
        sub = subscriptions.get(member)
        for tp in tps:
            topic, partition = tp
            if tp in seen:
                problems.append(f"{topic}-{partition} assigned to both {seen[tp]} and {member}")
            seen[tp] = member
            n = partitions_per_topic.get(topic, 0)
            if not 0 <= partition < n:
                problems.append(f"{topic}-{partition} does not exist (assigned to {member})")
            if sub is not None and topic not in sub.topics:
                problems.append(f"{topic}-{partition} assigned to {member}, not subscribed to {topic}")
    return problems
