"""The pytest plugin's fixtures and options, run by pytest in a subprocess as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slipstream.broker.broker import Broker
from slipstream.client import Producer
from slipstream.testing import create_topic, read_to_end

pytestmark = pytest.mark.timeout(120)

STORAGE_CHECK = '''
def test_function_broker(slipstream_broker):
    print("function", slipstream_broker.config.storage)

def test_session_broker_is_shared(slipstream_session_broker, request):
    print("session", slipstream_session_broker.config.storage, id(slipstream_session_broker))

def test_session_broker_again(slipstream_session_broker):
    print("session", slipstream_session_broker.config.storage, id(slipstream_session_broker))

def test_disk_broker(slipstream_disk_broker, tmp_path):
    print("disk", slipstream_disk_broker.config.storage, slipstream_disk_broker.config.data_dir.startswith(str(tmp_path)))
'''


def run_pytest(tmp_path: Path, *args: str, ini: str | None = None) -> list[str]:
    (tmp_path / "test_storage.py").write_text(STORAGE_CHECK)
    if ini is not None:
        (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_storage.py", *args],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return [line for line in result.stdout.splitlines() if line.split(" ")[0].lstrip(".") in ("function", "session", "disk")]


def storages(lines: list[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in lines:
        kind, storage, *rest = line.lstrip(".").split()
        out.setdefault(kind, set()).add(" ".join([storage, *rest]))
    return out


def test_fixtures_default_to_memory_and_the_session_broker_is_shared(tmp_path: Path) -> None:
    found = storages(run_pytest(tmp_path))
    assert found["function"] == {"memory"}
    assert len(found["session"]) == 1 and next(iter(found["session"])).startswith("memory ")
    assert found["disk"] == {"disk True"}


def test_storage_option_and_ini_setting_choose_disk(tmp_path: Path) -> None:
    found = storages(run_pytest(tmp_path, "--slipstream-storage=disk"))
    assert found["function"] == {"disk"} and next(iter(found["session"])).startswith("disk ")
    ini_dir = tmp_path / "ini"
    ini_dir.mkdir()
    found = storages(run_pytest(ini_dir, ini="slipstream_storage = disk"))
    assert found["function"] == {"disk"}


def test_read_to_end_reads_every_partition_in_order_and_stops_at_the_end() -> None:
    with Broker(storage="memory", port=0) as broker:
        create_topic(broker.bootstrap_servers, "many", 3)
        create_topic(broker, "many", 3, exist_ok=True)
        with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
            create_topic(broker, "many", 3)
        with Producer(broker.bootstrap_servers, linger_ms=0) as producer:
            for i in range(30):
                producer.produce("many", b"%d" % i, partition=i % 3)
            assert producer.flush(10) == 0
        records = read_to_end(broker, "many")
        assert [(m.partition, m.offset) for m in records] == [(p, o) for p in range(3) for o in range(10)]
        assert [m.value for m in records[:3]] == [b"0", b"3", b"6"]
        assert read_to_end(broker, "many", value_deserializer=lambda v: int(v or b"0"))[-1].value == 29
