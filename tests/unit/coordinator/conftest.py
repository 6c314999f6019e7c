from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from coord_context import GroupContext


@pytest.fixture
def ctx() -> GroupContext:
    return GroupContext()
