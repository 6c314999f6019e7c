from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from log_env import LogEnv


@pytest.fixture(params=["memory", "disk", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogEnv]:
    database_url = None
    if request.param == "postgres":
        database_url = request.getfixturevalue("postgres_url")
    log_env = LogEnv(request.param, tmp_path / "data", database_url)
    yield log_env
    log_env.store.close()
