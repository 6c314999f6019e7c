"""The group coordinator as a pure state machine (see ``coordinator.py`` and ``result.py``)."""

from .config import DEFAULT_INITIAL_REBALANCE_DELAY_MS, CoordinatorConfig
from .coordinator import GroupCoordinator
from .group import ClassicGroup
from .member import Member
from .offset_and_metadata import OffsetAndMetadata
from .offset_retention import GROUP_EXPIRATION_KEY
from .records import OFFSETS_TOPIC, java_string_hash, partition_for
from .result import Completion, CoordinatorResult, Pending, Record, RequestContext, TimerCallback
from .state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition
from .timer import ExpiredTimer, FiredTimer, GuardedTimer, ManualTimer, Timer

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
