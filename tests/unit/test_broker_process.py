"""slipstream.testing.broker_process: the command it runs (tests' defaults or exactly the
caller's flags, as the Spark tests and bench/ use it) and a real start and stop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from slipstream.testing.broker_process import BrokerProcess


@pytest.fixture(autouse=True)
def _no_command_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLIPSTREAM_CONFORMANCE_BROKER_CMD", raising=False)


def test_tests_get_auto_created_topics_with_three_partitions(tmp_path: Path) -> None:
    command = BrokerProcess(tmp_path / "data", tmp_path / "log", port=1234).command()
    assert command[-4:] == ["--auto-create-topics", "true", "--default-partitions", "3"]
    assert command[command.index("--port"):command.index("--port") + 2] == ["--port", "1234"]


def test_without_test_defaults_the_broker_runs_with_exactly_the_given_flags(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "log", port=1234, extra_args=("--storage", "memory"), test_defaults=False
    )
    command = broker.command()
    assert "--auto-create-topics" not in command and "--default-partitions" not in command
    assert command[-2:] == ["--storage", "memory"]
    assert command[command.index("--data-dir") + 1] == str(tmp_path / "data")


def test_start_and_stop(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", tmp_path / "broker.log", extra_args=("--storage", "memory"), test_defaults=False
    )
    broker.start(timeout=30)
    try:
        assert broker.alive()
        with socket.create_connection((broker.host, broker.port), timeout=5):
            pass
    finally:
        broker.stop()
    assert not broker.alive()
    assert "--storage memory" in broker.log_text()  # the start line names the command
