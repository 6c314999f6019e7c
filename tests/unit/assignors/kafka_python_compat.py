"""kafka-python's assignors, imported without the DeprecationWarnings its schema
loader emits on this Python version."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    from kafka.structs import TopicPartition as KTP

__all__ = [
    "KTP",
    "RangePartitionAssignor",
    "RoundRobinPartitionAssignor",
    "StickyAssignorUserData",
    "StickyPartitionAssignor",
]
