"""The "cooperative-sticky" assignor (KIP-429, Kafka's ``CooperativeStickyAssignor``).

The placement is the sticky one (see :mod:`.sticky`), computed from each
member's ``owned_partitions`` (subscription v1+) and generation. Members keep
their partitions across the rebalance, so a partition that moves must first
be released: the leader withholds it from its new owner in this round. The
old owner sees it missing from its assignment, revokes it and rejoins at
once; in that follow-up round nobody owns it and the new owner gets it.

A partition is withheld whenever some member of the group still claims it in
``owned_partitions`` and it is assigned to a member that does not claim it
(a superset of Kafka's ``adjustAssignment``, which also covers stale claims),
so a member is never given a partition another live member still holds.

The generation comes from the subscription (v2+); older subscriptions carry
it as the assignor's user data, a single INT32 (the Java client's
``CooperativeStickyAssignor`` user data). librdkafka sends the sticky
assignor's user data here instead, which is recognised too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .sticky import MemberData, decode_sticky_user_data, sticky_assignment
from .types import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    EAGER,
    Assignment,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
)

_I32 = struct.Struct(">i")


def encode_cooperative_user_data(generation: int) -> bytes:
    """The Java client's CooperativeStickyAssignor user data: the generation as INT32."""
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation carried in user data; None when there is none.

    Exactly four bytes are the Java layout. Longer data is tried as
    StickyAssignorUserData (what librdkafka sends), otherwise its first INT32
    is read as the Java client would. Anything shorter is the default
    generation, as the Java client treats unreadable user data.
    """
    if data is None:
        return None
    if len(data) == 4:
        return int(_I32.unpack(data)[0])
    if len(data) > 4:
        sticky = decode_sticky_user_data(data)
        if sticky is not None:
            return sticky.generation
        return int(_I32.unpack_from(data, 0)[0])
    return DEFAULT_GENERATION


def cooperative_member_data(subscription: Subscription) -> MemberData:
    generation = subscription.generation_id
    if generation < 0:
        decoded = decode_cooperative_user_data(subscription.user_data)
        generation = DEFAULT_GENERATION if decoded is None else decoded
    return MemberData(tuple(subscription.owned_partitions), generation)


@dataclass(frozen=True)
class CooperativePlan:
    """One cooperative round: what each member gets now, and what waits for a revocation."""

    assignment: Assignment
    """member -> partitions for this round (what goes into SyncGroup)."""
    pending: dict[TopicPartition, str]
    """partition -> member it is headed for once its current owner has revoked it."""
    target: Assignment
    """The full sticky assignment, ``assignment`` plus ``pending``."""


def withhold_owned_elsewhere(
    target: Mapping[str, Iterable[TopicPartition]], subscriptions: Mapping[str, Subscription]
) -> tuple[Assignment, dict[TopicPartition, str]]:
    """Drop from each member's assignment the partitions another member still owns."""
    claimed_by: dict[TopicPartition, set[str]] = {}
    for member, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            claimed_by.setdefault(tp, set()).add(member)
    assignment: Assignment = {}
    pending: dict[TopicPartition, str] = {}
    for member, tps in target.items():
        keep: list[TopicPartition] = []
        for tp in tps:
            claimants = claimed_by.get(tp)
            if claimants and member not in claimants:
                pending[tp] = member
            else:
                keep.append(tp)
        assignment[member] = sorted(keep)
    return assignment, pending


class CooperativeStickyAssignor:
    """Kafka's "cooperative-sticky" assignor (incremental cooperative rebalancing)."""

    name = "cooperative-sticky"
    rebalance_protocol: RebalanceProtocol = COOPERATIVE
    # like the Java client: usable in an EAGER group too (the upgrade path)
    supported_protocols: tuple[RebalanceProtocol, ...] = (EAGER, COOPERATIVE)

    def subscription_user_data(
        self, topics: Iterable[str], owned: Iterable[TopicPartition], generation: int
    ) -> bytes | None:
        return encode_cooperative_user_data(generation)

    def plan(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> CooperativePlan:
        data = {m: cooperative_member_data(s) for m, s in subscriptions.items()}
        target = sticky_assignment(partitions_per_topic, subscriptions, data)
        assignment, pending = withhold_owned_elsewhere(target, subscriptions)
        return CooperativePlan(assignment=assignment, pending=pending, target=target)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> Assignment:
        return self.plan(partitions_per_topic, subscriptions).assignment
