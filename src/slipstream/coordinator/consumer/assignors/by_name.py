"""The server-side assignors by the name a member asks for, and the default one."""

from __future__ import annotations

from .base import PartitionAssignor
from .range import RANGE_ASSIGNOR_NAME, RangeAssignor
from .uniform import UNIFORM_ASSIGNOR_NAME, UniformAssignor

DEFAULT_ASSIGNOR_NAME = UNIFORM_ASSIGNOR_NAME

ASSIGNORS: dict[str, PartitionAssignor] = {
    UNIFORM_ASSIGNOR_NAME: UniformAssignor(),
    RANGE_ASSIGNOR_NAME: RangeAssignor(),
}
