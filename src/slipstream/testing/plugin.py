"""pytest plugin: broker fixtures, so any project can test Kafka code in-process.

Installed with the package (entry point ``pytest11``). Brokers run on an ephemeral
port on their own thread; point any client at ``broker.bootstrap_servers``.

- ``slipstream_broker``: a fresh broker for each test;
- ``slipstream_session_broker``: one broker for the whole session (fast; give each
  test its own topic names);
- ``slipstream_disk_broker``: a fresh broker storing its logs under the test's
  ``tmp_path`` (for tests that read files or restart a broker on the same data).

Storage is in memory unless ``--slipstream-storage=disk`` (or the ini setting
``slipstream_storage = disk``) is given: then the first two keep their data on disk
too, in a temporary directory. Helpers: ``slipstream.testing.create_topic`` and
``slipstream.testing.read_to_end``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..broker.broker import Broker, load_all_modules

# All of the broker with the plugin (as before the coordinators and handlers loaded
# lazily), so a fixture's first start and requests do not wait for them.
load_all_modules()

_OPTION = "slipstream_storage"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("slipstream")
    group.addoption(
        "--slipstream-storage",
        dest=_OPTION,
        choices=("memory", "disk"),
        default=None,
        help="storage of the slipstream_broker fixtures' brokers (default: memory)",
    )
    parser.addini(_OPTION, "storage of the slipstream_broker fixtures' brokers: memory or disk", default="memory")


def _storage(config: pytest.Config) -> str:
    chosen = config.getoption(_OPTION) or config.getini(_OPTION) or "memory"
    if chosen not in ("memory", "disk"):
        raise pytest.UsageError(f"slipstream_storage must be memory or disk, not {chosen!r}")
    return str(chosen)


def _broker(storage: str, data_dir: Path | None) -> Broker:
    settings: dict[str, Any] = {"storage": storage, "port": 0, "group_initial_rebalance_delay_ms": 0}
    if storage == "disk":
        assert data_dir is not None
        settings["data_dir"] = str(data_dir)
    return Broker(**settings)


@pytest.fixture
def slipstream_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    storage = _storage(request.config)
    data_dir = tmp_path_factory.mktemp("slipstream-broker") if storage == "disk" else None
    with _broker(storage, data_dir) as broker:
        yield broker


@pytest.fixture(scope="session")
def slipstream_session_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    storage = _storage(request.config)
    data_dir = tmp_path_factory.mktemp("slipstream-session-broker") if storage == "disk" else None
    with _broker(storage, data_dir) as broker:
        yield broker


@pytest.fixture
def slipstream_disk_broker(tmp_path: Path) -> Iterator[Broker]:
    with _broker("disk", tmp_path / "slipstream-data") as broker:
        yield broker
