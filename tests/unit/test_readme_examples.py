"""The README's Python client examples run as written against a broker (address swapped in).

Each ```python block of the "The Python client" section is run in its own
interpreter, in order: the producer example writes to ``orders``, the consumer
examples must print what it wrote. The consumer-group and asyncio examples loop
for ever by design; they are stopped once their output shows both records.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slipstream.broker.broker import Broker

pytestmark = pytest.mark.timeout(120)

README = Path(__file__).resolve().parents[2] / "README.md"
README_ADDRESS = "127.0.0.1:9092"
DEADLINE_S = 30.0


def client_examples() -> list[str]:
    text = README.read_text()
    start = text.index("## The Python client")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as b:
        yield b.bootstrap_servers


def start(code: str, bootstrap: str, tmp_path: Path, name: str) -> subprocess.Popen[str]:
    assert README_ADDRESS in code, "README examples use the default address"
    script = tmp_path / f"{name}.py"
    script.write_text(code.replace(README_ADDRESS, bootstrap))
    return subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def read_until(proc: subprocess.Popen[str], wanted: list[str]) -> str:
    """Collect the example's output until every ``wanted`` text was printed (or it exits)."""
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stdout.readline, "")) if proc.stdout else None,
        daemon=True,
    )
    reader.start()
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and reader.is_alive():
        if all(w in "".join(lines) for w in wanted):
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.terminate()
    proc.wait(10)
    reader.join(5)
    return "".join(lines)


def run_to_end(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, out
    return out


def test_readme_has_the_four_client_examples() -> None:
    blocks = client_examples()
    assert len(blocks) == 4
    assert "AIOProducer" in blocks[0] and "ConsumerGroup(" in blocks[1]
    assert "Consumer(" in blocks[2] and "AIOConsumer(" in blocks[3]


def test_readme_examples_run(bootstrap: str, tmp_path: Path) -> None:
    produce, group, poll, aio = client_examples()

    out = run_to_end(start(produce, bootstrap, tmp_path, "produce"))
    # the async example prints "partition offset"; the sync callback "None RecordMetadata(...)"
    assert re.search(r"^0 0$", out, re.M), out
    assert re.search(r"^None RecordMetadata\(", out, re.M), out

    out = read_until(start(group, bootstrap, tmp_path, "group"), ["b'hello'", "b'world'"])
    assert "orders 0 0 b'hello'" in out and "orders 0 1 b'world'" in out, out

    out = run_to_end(start(poll, bootstrap, tmp_path, "poll"))
    assert "assigned [('orders', 0)]" in out, out
    assert "orders 0 0 b'hello'" in out and "orders 0 1 b'world'" in out, out

    out = read_until(start(aio, bootstrap, tmp_path, "aio"), ["b'hello'", "b'world'"])
    assert "orders 0 b'hello'" in out and "orders 1 b'world'" in out, out


def section_examples(title: str) -> list[str]:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.index("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def test_readme_client_extras_example_runs(bootstrap: str, tmp_path: Path) -> None:
    [example] = section_examples("More of the client")
    out = run_to_end(start(example, bootstrap, tmp_path, "extras"))
    assert "from 1500 ms: [(1, {'amount': 30})]" in out, out
    assert "lag 0 rebalances 0" in out, out
    assert "woken up" in out, out


def test_readme_pytest_plugin_examples_run(tmp_path: Path) -> None:
    """The plugin examples are a test module: pytest runs them (the plugin loads by its
    entry point), in memory and with --slipstream-storage=disk."""
    tests = [block for block in section_examples("Embedded use and the pytest fixture") if "def test_" in block]
    assert len(tests) == 1
    module = tmp_path / "test_plugin_examples.py"
    module.write_text(tests[0])
    for extra in ([], ["--slipstream-storage=disk"]):
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module), *extra],
            capture_output=True, text=True, timeout=DEADLINE_S * 2, cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "3 passed" in result.stdout, result.stdout
