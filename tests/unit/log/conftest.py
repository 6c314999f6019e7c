from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from log_env import LogEnv


@pytest.fixture(params=["memory", "disk"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogEnv]:
    log_env = LogEnv(request.param, tmp_path / "data")
    yield log_env
    log_env.store.close()
