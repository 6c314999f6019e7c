"""Client-side partition assignors, compatible with the Java client and librdkafka.

Pure functions of plain data, run by the group leader::

    assignor = get_assignor("cooperative-sticky")
    subs = {member_id: Subscription(topics=[...], owned_partitions=[...], generation_id=g)}
    assignment = assignor.assign({"orders": 12}, subs)   # member_id -> [(topic, partition)]

Each assignor's ``name`` is its JoinGroup protocol name, so a group mixing
Slipstream, Java and librdkafka members that all offer the same assignor
agrees on it whoever leads. The consumer encodes/decodes the
consumer-protocol bytes itself; ``subscription_user_data`` gives the
assignor-private ``user_data`` to put in them.

Rebalance rules for the consumer (KIP-429): :func:`select_rebalance_protocol`
picks EAGER or COOPERATIVE from the configured assignors; EAGER members
revoke everything before joining (:func:`partitions_to_revoke_before_join`);
COOPERATIVE members revoke only :func:`revoked_partitions` after the
assignment and then rejoin at once (:func:`rejoin_after_assignment`).
"""

from __future__ import annotations

from .cooperative_sticky import (
    CooperativePlan,
    CooperativeStickyAssignor,
    decode_cooperative_user_data,
    encode_cooperative_user_data,
)
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import MemberData, StickyAssignor, decode_sticky_user_data, encode_sticky_user_data
from .types import (
    COOPERATIVE,
    DEFAULT_GENERATION,
    EAGER,
    Assignment,
    Assignor,
    RebalanceProtocol,
    Subscription,
    TopicPartition,
    added_partitions,
    check_assignment,
    cooperative_violations,
    partitions_to_revoke_before_join,
    rejoin_after_assignment,
    revoked_partitions,
    select_rebalance_protocol,
)

ASSIGNORS: dict[str, type[Assignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


DEFAULT_ASSIGNORS: tuple[str, ...] = ("range", "cooperative-sticky")
"""The Java client's default ``partition.assignment.strategy`` (Kafka 3.0+): range
is every member's first choice, so the group uses it (and, since range is eager,
EAGER rebalancing); a rolling bounce that drops range then moves the group to
cooperative-sticky and COOPERATIVE rebalancing."""


def get_assignor(name: str) -> Assignor:
    """An assignor by its protocol name (also accepts Kafka's Java class names)."""
    key = _JAVA_CLASS_NAMES.get(name, name)
    try:
        return ASSIGNORS[key]()
    except KeyError:
        known = ", ".join(sorted(ASSIGNORS))
        raise ValueError(f"unknown partition assignor {name!r} (known: {known})") from None


_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

__all__ = [
    "ASSIGNORS",
    "COOPERATIVE",
    "DEFAULT_ASSIGNORS",
    "DEFAULT_GENERATION",
    "EAGER",
    "Assignment",
    "Assignor",
    "CooperativePlan",
    "CooperativeStickyAssignor",
    "MemberData",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "TopicPartition",
    "added_partitions",
    "check_assignment",
    "cooperative_violations",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "get_assignor",
    "partitions_to_revoke_before_join",
    "rejoin_after_assignment",
    "revoked_partitions",
    "select_rebalance_protocol",
]
