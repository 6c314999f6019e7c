"""The README's Spark section runs as written (only the broker address swapped in).

The Python example runs in a fresh interpreter whose PATH has no Python with
pyarrow and with no PYSPARK_PYTHON set, as a user's script would; the shell quick
start runs the pipeline commands it shows and must print window counts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, produce, simple_rows

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"
README_ADDRESS = "127.0.0.1:9092"


def spark_section() -> str:
    text = README.read_text()
    start = text.index("## Spark pipelines")
    return text[start : text.index("\n## ", start + 1)]


def user_env() -> dict[str, str]:
    """A user's shell: system PATH (whose python3 lacks pyarrow), no PYSPARK_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["PATH"] = "/usr/bin:/bin"
    return env


def test_system_python_lacks_pyarrow() -> None:
    # The premise of the next test: Spark's default worker python cannot run the source.
    found = subprocess.run(["/usr/bin/python3", "-c", "import pyarrow"], capture_output=True)
    assert found.returncode != 0


def test_readme_python_example_runs_as_written(spark: Any, broker: Any, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", spark_section(), re.S)
    # The quick start is the one complete script; the section's other Python blocks are
    # fragments of it (e.g. the exactly-once sink's options) and must at least compile.
    quick_starts = [b for b in blocks if "get_session(" in b]
    assert len(quick_starts) == 1
    for fragment in blocks:
        if fragment is not quick_starts[0]:
            compile(fragment, "README fragment", "exec")
    code = quick_starts[0]
    assert README_ADDRESS in code
    # The example reads "events" and copies it to "copy"; the broker is the test's.
    create_topic(broker.bootstrap, "events", 2)
    create_topic(broker.bootstrap, "copy", 2)
    placed = produce(broker.bootstrap, "events", simple_rows(2, 25))
    script = tmp_path / "example.py"
    script.write_text(code.replace(README_ADDRESS, broker.bootstrap))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ModuleNotFoundError" not in done.stderr
    copied = (
        spark.read.format("slipstream")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "copy")
        .load()
        .collect()
    )
    assert sorted((r.key, r.value) for r in copied) == sorted(
        (key, value) for (_, key, value, _) in simple_rows(2, 25)
    )
    assert len(placed) == 50


def test_readme_pipeline_quick_start_prints_window_counts(broker: Any, tmp_path: Path) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", spark_section(), re.S)
    commands = [
        line.split("#", 1)[0].strip()
        for line in blocks[0].splitlines()
        if line.startswith("slipstream pipeline")
    ]
    assert [c.split()[2] for c in commands] == ["demo-data", "run"]
    outputs = []
    for command in commands:
        args = [*command.split()[1:], "-b", broker.bootstrap]
        done = subprocess.run(
            [sys.executable, "-m", "slipstream", *args],
            cwd=tmp_path,
            env=user_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        outputs.append(done.stdout + done.stderr)
    summary = re.search(r"(\d+) batches, (\d+) page views in, (\d+) window counts out", outputs[1])
    assert summary is not None, outputs[1][-3000:]
    views_in, counts_out = int(summary.group(2)), int(summary.group(3))
    count = int(re.search(r"--count (\d+)", commands[0]).group(1))  # type: ignore[union-attr]
    assert views_in == count
    # The demo events are 100 ms apart and end now: all but the last couple of
    # one-minute windows close under the one-minute watermark, eight pages each.
    minutes = count * 100 // 60_000
    assert counts_out >= 8 * (minutes - 3), outputs[1][-3000:]
    # The first batch has no earlier trigger to measure an arrival rate against.
    first = next(line for line in outputs[1].splitlines() if "batch 0:" in line)
    assert "rows/s arriving" not in first
