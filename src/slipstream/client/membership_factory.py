"""Which group member a consumer facade drives: the classic one or the consumer-protocol
one, chosen by ``config.group_protocol``, and the offsets client wired to it."""

from __future__ import annotations

from .classic_membership import GroupMembership
from .cluster import Cluster
from .consumer_config import ConsumerConfig
from .consumer_membership import ConsumerGroupMembership
from .coordinator_locator import CoordinatorLocator
from .offsets import GroupOffsets
from .rebalance_listener import RebalanceListener

AnyMembership = GroupMembership | ConsumerGroupMembership
"""What the facades drive: the classic member or the consumer-protocol one."""


def new_membership(
    cluster: Cluster,
    config: ConsumerConfig,
    *,
    listener: RebalanceListener,
    locator: CoordinatorLocator,
) -> AnyMembership:
    """The member for ``config.group_protocol``."""
    if config.group_protocol == "consumer":
        return ConsumerGroupMembership(cluster, config, listener=listener, locator=locator)
    return GroupMembership(cluster, config, listener=listener, locator=locator)


def new_group_offsets(
    locator: CoordinatorLocator, config: ConsumerConfig, membership: AnyMembership
) -> GroupOffsets:
    """The offsets client wired to ``membership`` (member epochs with the consumer protocol)."""
    if isinstance(membership, ConsumerGroupMembership):
        m = membership

        def identity() -> tuple[str, int] | None:
            gen = m.generation
            return None if gen is None else (gen.member_id, gen.generation_id)

        return GroupOffsets(
            locator,
            config,
            on_membership_error=m.on_commit_error,
            next_generation=m.next_generation,
            member_identity=identity,
        )
    return GroupOffsets(locator, config, on_membership_error=membership.on_commit_error)
