"""The ``consumer`` group type of KIP-848 (``group.protocol=consumer``): its model and
algorithms, independent of the wire format. See docs/architecture/kip848-coordinator.md."""

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
from .errors import FencedMemberEpochError, InvalidRegularExpressionError, PartitionAssignorError
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
