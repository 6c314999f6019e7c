"""The ``consumer`` group type of KIP-848 (``group.protocol=consumer``): its model and
algorithms, independent of the wire format. See docs/architecture/kip848-coordinator.md.

The names below are imported from their modules on first use (``lazy_exports``), so
importing one module of this package does not load all of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slipstream.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .assignors import (
        ASSIGNORS,
        DEFAULT_ASSIGNOR_NAME,
        GroupSpec,
        MemberSubscription,
        PartitionAssignor,
        RangeAssignor,
        TopicMetadata,
        UniformAssignor,
    )
    from .errors import (
        FencedMemberEpochError,
        InvalidRegularExpressionError,
        PartitionAssignorError,
    )
    from .group import (
        NO_OWNER_EPOCH,
        ConsumerGroup,
        ConsumerGroupState,
        PartitionOwnershipError,
        SubscriptionType,
    )
    from .member import (
        JOIN_GROUP_MEMBER_EPOCH,
        LEAVE_GROUP_MEMBER_EPOCH,
        LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        ConsumerGroupMember,
        MemberState,
        replacement_for_static_member,
        topic_partitions,
    )
    from .partitions import PartitionMap, TopicId
    from .reconciliation import reconcile, validate_member_epoch
    from .regex import matching_topics, validate_subscription_regex
    from .target_assignment import TargetAssignmentBuilder, TargetAssignmentResult

# Exported name -> the module of this package that defines it.
_EXPORTS = {
    "ASSIGNORS": "assignors",
    "ConsumerGroup": "group",
    "ConsumerGroupMember": "member",
    "ConsumerGroupState": "group",
    "DEFAULT_ASSIGNOR_NAME": "assignors",
    "FencedMemberEpochError": "errors",
    "GroupSpec": "assignors",
    "InvalidRegularExpressionError": "errors",
    "JOIN_GROUP_MEMBER_EPOCH": "member",
    "LEAVE_GROUP_MEMBER_EPOCH": "member",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH": "member",
    "MemberState": "member",
    "MemberSubscription": "assignors",
    "NO_OWNER_EPOCH": "group",
    "PartitionAssignor": "assignors",
    "PartitionAssignorError": "errors",
    "PartitionMap": "partitions",
    "PartitionOwnershipError": "group",
    "RangeAssignor": "assignors",
    "SubscriptionType": "group",
    "TargetAssignmentBuilder": "target_assignment",
    "TargetAssignmentResult": "target_assignment",
    "TopicId": "partitions",
    "TopicMetadata": "assignors",
    "UniformAssignor": "assignors",
    "matching_topics": "regex",
    "reconcile": "reconciliation",
    "replacement_for_static_member": "member",
    "topic_partitions": "member",
    "validate_member_epoch": "reconciliation",
    "validate_subscription_regex": "regex",
}

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR_NAME",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "NO_OWNER_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "FencedMemberEpochError",
    "GroupSpec",
    "InvalidRegularExpressionError",
    "MemberState",
    "MemberSubscription",
    "PartitionAssignor",
    "PartitionAssignorError",
    "PartitionMap",
    "PartitionOwnershipError",
    "RangeAssignor",
    "SubscriptionType",
    "TargetAssignmentBuilder",
    "TargetAssignmentResult",
    "TopicId",
    "TopicMetadata",
    "UniformAssignor",
    "matching_topics",
    "reconcile",
    "replacement_for_static_member",
    "topic_partitions",
    "validate_member_epoch",
    "validate_subscription_regex",
]


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
