"""Server-side assignors of ``consumer`` groups, by the name a member asks for."""

from __future__ import annotations

from .base import GroupAssignment, GroupSpec, MemberSubscription, PartitionAssignor, TopicMetadata
from .range import RANGE_ASSIGNOR_NAME, RangeAssignor
from .uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor

DEFAULT_ASSIGNOR_NAME = UNIFORM_ASSIGNOR_NAME

ASSIGNORS: dict[str, PartitionAssignor] = {
    UNIFORM_ASSIGNOR_NAME: UniformAssignor(),
    RANGE_ASSIGNOR_NAME: RangeAssignor(),
}

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR_NAME",
    "RANGE_ASSIGNOR_NAME",
    "UNIFORM_ASSIGNOR_NAME",
    "GroupAssignment",
    "GroupSpec",
    "MemberSubscription",
    "PartitionAssignor",
    "RangeAssignor",
    "TopicMetadata",
    "UniformAssignor",
]
