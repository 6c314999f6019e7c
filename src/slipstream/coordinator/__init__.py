"""The group coordinator as a pure state machine (see ``coordinator.py`` and ``result.py``).

The names below are imported from their modules on first use (``lazy_exports``), so
importing one module of this package does not load all of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slipstream.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from .config import DEFAULT_INITIAL_REBALANCE_DELAY_MS, CoordinatorConfig
    from .coordinator import GroupCoordinator
    from .group import ClassicGroup
    from .member import Member
    from .offset_and_metadata import OffsetAndMetadata
    from .offset_retention import GROUP_EXPIRATION_KEY
    from .records import OFFSETS_TOPIC, java_string_hash, partition_for
    from .result import (
        Completion,
        CoordinatorResult,
        Pending,
        Record,
        RequestContext,
        TimerCallback,
    )
    from .state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition
    from .timer import ExpiredTimer, FiredTimer, GuardedTimer, ManualTimer, Timer

# Exported name -> the module of this package that defines it.
_EXPORTS = {
    "ClassicGroup": "group",
    "Completion": "result",
    "CoordinatorConfig": "config",
    "CoordinatorResult": "result",
    "DEFAULT_INITIAL_REBALANCE_DELAY_MS": "config",
    "ExpiredTimer": "timer",
    "FiredTimer": "timer",
    "GROUP_EXPIRATION_KEY": "offset_retention",
    "GroupCoordinator": "coordinator",
    "GroupState": "state",
    "GuardedTimer": "timer",
    "IllegalStateTransition": "state",
    "ManualTimer": "timer",
    "Member": "member",
    "OFFSETS_TOPIC": "records",
    "OffsetAndMetadata": "offset_and_metadata",
    "Pending": "result",
    "Record": "result",
    "RequestContext": "result",
    "Timer": "timer",
    "TimerCallback": "result",
    "VALID_PREVIOUS_STATES": "state",
    "java_string_hash": "records",
    "partition_for": "records",
}

__all__ = [
    "DEFAULT_INITIAL_REBALANCE_DELAY_MS",
    "GROUP_EXPIRATION_KEY",
    "OFFSETS_TOPIC",
    "VALID_PREVIOUS_STATES",
    "ClassicGroup",
    "Completion",
    "CoordinatorConfig",
    "CoordinatorResult",
    "ExpiredTimer",
    "FiredTimer",
    "GroupCoordinator",
    "GroupState",
    "GuardedTimer",
    "IllegalStateTransition",
    "ManualTimer",
    "Member",
    "OffsetAndMetadata",
    "Pending",
    "Record",
    "RequestContext",
    "Timer",
    "TimerCallback",
    "java_string_hash",
    "partition_for",
]


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
