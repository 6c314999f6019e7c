"""Server-side assignors of ``consumer`` groups, by the name a member asks for.

The names below are imported from their modules on first use (``lazy_exports``), so
importing one module of this package does not load all of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slipstream.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .base import (
        GroupAssignment,
        GroupSpec,
        MemberSubscription,
        PartitionAssignor,
        TopicMetadata,
    )
    from .by_name import ASSIGNORS, DEFAULT_ASSIGNOR_NAME
    from .range import RANGE_ASSIGNOR_NAME, RangeAssignor
    from .uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor

# Exported name -> the module of this package that defines it.
_EXPORTS = {
    "ASSIGNORS": "by_name",
    "DEFAULT_ASSIGNOR_NAME": "by_name",
    "GroupAssignment": "base",
    "GroupSpec": "base",
    "MemberSubscription": "base",
    "PartitionAssignor": "base",
    "RANGE_ASSIGNOR_NAME": "range",
    "RangeAssignor": "range",
    "TopicMetadata": "base",
    "UNIFORM_ASSIGNOR_NAME": "uniform",
    "UniformAssignor": "uniform",
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


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
