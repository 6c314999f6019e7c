#!/usr/bin/env python3
"""Slipstream's in-process start, ``await Broker(storage="memory", port=0).start()``, timed
in a fresh interpreter: the parent (``measure_embedded``) runs this file as a script,
which starts and stops the broker N times and prints the times as JSON.

Used by broker_throughput.py and startup.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import HOST, child_env, metadata_request


async def _embedded_runs(runs: int) -> dict[str, Any]:
    from slipstream import Broker

    _ = Broker  # the warm-up import: module loading is not part of start
    times: list[float] = []
    for run in range(runs):
        start = time.perf_counter()
        broker = Broker(storage="memory", port=0)
        await broker.start()
        elapsed = time.perf_counter() - start
        try:
            if run == 0:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(HOST, broker.port), 5
                )
                writer.write(metadata_request(1))
                size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
                await asyncio.wait_for(reader.readexactly(size), 5)
                writer.close()
        finally:
            await broker.stop()
        times.append(elapsed)
    return {"times": times}


@dataclass
class EmbeddedResult:
    first: float | None = None
    median: float | None = None
    runs: int = 0
    error: str | None = None


def measure_embedded(runs: int, workdir: Path, timeout: float) -> EmbeddedResult:
    """``runs`` starts after a first one (reported apart), in a child interpreter whose
    bytecode cache is under ``workdir``."""
    cmd = [sys.executable, os.path.abspath(__file__), str(runs + 1)]
    env = child_env(workdir)
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return EmbeddedResult(error=f"embedded start probe timed out after {timeout:.0f}s")
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-8:])
        return EmbeddedResult(error=f"embedded start probe failed:\n{tail}")
    times = json.loads(out.stdout.strip().splitlines()[-1])["times"]
    rest = times[1:] or times
    return EmbeddedResult(first=times[0], median=statistics.median(rest), runs=len(rest))


def main(argv: list[str]) -> int:
    """The child: ``python bench/embedded_start.py RUNS`` prints {"times": [...]}."""
    print(json.dumps(asyncio.run(_embedded_runs(int(argv[0])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
