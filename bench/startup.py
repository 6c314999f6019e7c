#!/usr/bin/env python3
"""Process start-up: spawn -> first answer to a raw Metadata request, Slipstream against the peers.

    python bench/startup.py                # 15 starts of each broker, in one run
    python bench/startup.py --runs 5 --brokers slipstream
    python bench/startup.py --quick         # smoke run, 3 starts of each
    python bench/startup.py --instructions  # also a start's instruction count (valgrind)

Every broker ``discover_brokers`` finds (Slipstream's ``python -m slipstream serve``, Tansu,
noida-db) is started ``--runs`` times, the brokers taking turns start by start so a burst of
load on this shared machine hits all of them alike; one uncounted start of each warms the page
cache and Slipstream's .pyc files (written under the work directory, PYTHONDONTWRITEBYTECODE
unset, as in a normal install). Reported per broker: the median and p90 wall time from spawn to
the first Metadata answer, the CPU seconds the process had used by then (steadier than wall time
when the cores are shared), and how many times each broker's median Slipstream's is. A "floor"
row starts a bare asyncio process that answers the probe and nothing else: what any Python
broker pays before its first line of broker code. Slipstream's in-process start
(``Broker(storage="memory", port=0)``) is reported too, as the number that must not regress.

The process, probe and report helpers are bench/harness.py's; the embedded-start
measurement is bench/broker_throughput.py's.
Progress goes to stderr; the Markdown report (paste into the README) to stdout.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_runs import Options
from embedded_start import EmbeddedResult, measure_embedded
from harness import (
    HOST,
    BenchError,
    BrokerSpec,
    child_env,
    discover_brokers,
    dying_with_bench,
    free_port,
    load_average,
    log,
    metadata_probe,
    on_signal,
    spec_broker,
    work_directory,
)
from harness import ms as fmt_ms

TARGET_MS = 100.0

# The floor: a Python process that only imports asyncio (and uvloop, as `slipstream serve`
# does when it is installed), listens, and answers every frame with its correlation id,
# which is all the probe checks. No broker starts faster than this in this interpreter.
FLOOR_SCRIPT = """
import asyncio, struct, sys
try:
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
except ImportError:
    pass

async def answer(reader, writer):
    try:
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            body = await reader.readexactly(size)
            writer.write(struct.pack(">i", 4) + body[4:8])
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(answer, sys.argv[1], int(sys.argv[2]))
    await server.serve_forever()

asyncio.run(main())
"""


# `slipstream serve` in this interpreter up to a started broker (listener open,
# __consumer_offsets made), then a clean stop: what --instructions counts.
SERVE_UNTIL_STARTED = """
import sys
import slipstream.cli as cli

real_serve = cli._serve

def _serve(args):
    from slipstream.broker import broker

    async def start_then_stop(self):
        await self.start()
        await self.stop()

    broker.Broker.serve_forever = start_then_stop
    return real_serve(args)

cli._serve = _serve
sys.exit(cli.main(sys.argv[1:]))
"""

# `slipstream serve` in this interpreter up to its first Metadata answer (the bench polls
# it), then an immediate exit: what a client waits for, without the rest of the start
# (the coordinators load in a worker thread after the listener opens).
SERVE_UNTIL_FIRST_ANSWER = """
import os, sys
import slipstream.cli as cli

real_serve = cli._serve

def _serve(args):
    from slipstream.broker import dispatch

    real_frame = dispatch._frame

    def frame_then_exit(spec, version, correlation_id, body):
        out = real_frame(spec, version, correlation_id, body)
        if spec.key == 3:  # Metadata
            os._exit(0)
        return out

    dispatch._frame = frame_then_exit
    return real_serve(args)

cli._serve = _serve
sys.exit(cli.main(sys.argv[1:]))
"""


def count_instructions_to_first_answer(data: Path, env: dict[str, str], timeout: float) -> int | None:
    """Instructions of `slipstream serve` from its start to its first Metadata answer
    (callgrind; None without valgrind). The bench polls the broker meanwhile."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    port = free_port()
    args = [sys.executable, "-c", SERVE_UNTIL_FIRST_ANSWER, "serve", "--port", str(port), "--host", HOST,
            "--data-dir", str(data), "--log-level", "WARNING"]
    for tool in ([], [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"]):  # warm-up, count
        shutil.rmtree(data, ignore_errors=True)
        proc = subprocess.Popen(
            dying_with_bench([*tool, *args]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.perf_counter() + timeout
        while proc.poll() is None and time.perf_counter() < deadline:
            if metadata_probe(port, timeout=5.0):
                break
            time.sleep(0.01)
        try:
            stderr = proc.communicate(timeout=max(1.0, deadline - time.perf_counter()))[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            raise BenchError("the broker under callgrind did not answer Metadata in time") from None
    for line in stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise BenchError(f"callgrind reported no count; stderr tail:\n{stderr[-2000:]}")


def count_instructions(args: list[str], env: dict[str, str], timeout: float) -> int | None:
    """Instructions one Python run executes (valgrind's callgrind; None without valgrind)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=timeout, check=False)
    out = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *args],
        env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise BenchError(f"callgrind reported no count; stderr tail:\n{out.stderr[-2000:]}")


def instructions_report(opts: Options) -> str:
    """The start in instructions: the same on a busy machine as on a quiet one."""
    env = child_env(opts.workdir)
    data = opts.workdir / "instructions-data"
    runs = [
        ("the interpreter alone (`python -c pass`)", ["-c", "pass"]),
        ("importing asyncio and uvloop (the floor)", ["-c", "import asyncio, uvloop"]),
        (
            "`slipstream serve` up to a started broker (fresh data dir)",
            ["-c", SERVE_UNTIL_STARTED, "serve", "--port", "0", "--host", HOST,
             "--data-dir", str(data), "--log-level", "WARNING"],
        ),
    ]
    lines = ["| Run (valgrind --tool=callgrind, .pyc cached) | instructions |", "|---|---:|"]
    for label, args in runs:
        shutil.rmtree(data, ignore_errors=True)
        log(f"instructions: {label}")
        count = count_instructions(args, env, 600.0)
        if count is None:
            return "Instructions: not measured (valgrind not found)."
        lines.append(f"| {label} | {count / 1e6:,.0f} M |")
    log("instructions: `slipstream serve` up to its first Metadata answer")
    count = count_instructions_to_first_answer(data, env, 600.0)
    if count is not None:
        lines.append(f"| `slipstream serve` up to its first Metadata answer (fresh data dir) | {count / 1e6:,.0f} M |")
    return "\n".join(lines)


def floor_spec() -> BrokerSpec:
    return BrokerSpec(
        key="floor",
        label="Python + asyncio floor (stub, not a broker)",
        version=platform.python_version(),
        describe="imports asyncio/uvloop, listens, echoes the correlation id",
        command=lambda port, _work: [sys.executable, "-c", FLOOR_SCRIPT, HOST, str(port)],
    )


@dataclass
class StartupResult:
    spec: BrokerSpec
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    error: str | None = None


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (p90 of 10 values is the 9th smallest)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * fraction))
    return ordered[rank - 1]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def one_start(spec: BrokerSpec, opts: Options, tag: str) -> tuple[float, float | None]:
    """Start the broker once: (seconds to the first Metadata answer, CPU seconds by then)."""
    with spec_broker(spec, opts.workdir, f"{spec.key}-{tag}", timeout=30.0) as proc:
        assert proc.ready_after is not None
        try:
            times = psutil.Process(proc.pid).cpu_times()
            cpu: float | None = times.user + times.system
        except psutil.Error:
            cpu = None
        return proc.ready_after, cpu


def measure(specs: list[BrokerSpec], opts: Options) -> list[StartupResult]:
    results = [StartupResult(spec) for spec in specs]
    for run in range(opts.startup_runs + 1):  # run 0 warms the page cache and .pyc files
        for result in results:
            if result.error is not None:
                continue
            try:
                wall, cpu = one_start(result.spec, opts, f"start{run}")
            except BenchError as exc:
                result.error = str(exc)
                log(f"{result.spec.label}: start-up FAILED: {exc}")
                continue
            if run:
                result.wall.append(wall)
                if cpu is not None:
                    result.cpu.append(cpu)
        if run:
            log(f"start {run}/{opts.startup_runs} done")
    return results


def _times(ours: float | None, theirs: float | None) -> str:
    """How many times this broker's median Slipstream's is (above 1: Slipstream is slower)."""
    if theirs is None or ours is None or theirs <= 0:
        return "-"
    return f"{ours / theirs:.1f}x"


def fmt_cpu(seconds: float | None) -> str:
    # psutil reads clock ticks: 10 ms resolution.
    if seconds is None:
        return "-"
    return "< 10 ms" if seconds < 0.01 else fmt_ms(seconds)


def report(
    results: list[StartupResult],
    embedded: EmbeddedResult | None,
    opts: Options,
    missing: list[str],
    elapsed: float,
    load_start: str,
    command: str,
) -> str:
    ours = next((r for r in results if r.spec.key == "slipstream"), None)
    ours_wall = median(ours.wall) if ours else None
    ours_cpu = median(ours.cpu) if ours else None
    lines = [
        f"Process start to the first Metadata answer, {opts.startup_runs} starts per broker"
        " (brokers taking turns; one uncounted warm-up start each).",
        "",
        "| Broker | version | median | p90 | CPU by then (median) | Slipstream's median / this |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error is not None:
            lines.append(f"| {r.spec.label} | {r.spec.version} | failed | | | |")
            continue
        wall = median(r.wall)
        lines.append(
            f"| {r.spec.label} | {r.spec.version} | {fmt_ms(wall)} | {fmt_ms(percentile(r.wall, 0.9))}"
            f" | {fmt_cpu(median(r.cpu))} | "
            + ("1.0x" if r is ours else _times(ours_wall, wall))
            + " |"
        )
    lines.append("")
    if ours is not None and ours_wall is not None:
        ok = ours_wall * 1000 <= TARGET_MS
        lines.append(
            f"Slipstream median {fmt_ms(ours_wall)} against the {TARGET_MS:.0f} ms target:"
            f" {'met' if ok else 'NOT met'} (CPU {fmt_cpu(ours_cpu)})."
        )
    if embedded is not None:
        if embedded.error:
            lines.append(f"Embedded start: failed ({embedded.error.splitlines()[0]}).")
        else:
            lines.append(
                f"Embedded start (`Broker(storage=\"memory\", port=0)`, modules already imported):"
                f" median {fmt_ms(embedded.median)} over {embedded.runs} starts,"
                f" first {fmt_ms(embedded.first)}."
            )
    for name in missing:
        lines.append(f"Not measured: {name}.")
    lines.append(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()},"
        f" load average {load_start} at start; run took {elapsed:.0f} s."
        f" Command: `{command}`."
    )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Process start-up (spawn -> first Metadata answer) of Slipstream, Tansu and"
        " noida-db in one run. Prints Markdown."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 starts of each")
    parser.add_argument("--runs", type=int, help="counted starts per broker (default 15; quick 3)")
    parser.add_argument(
        "--embedded-runs", type=int, help="embedded starts to time (default 15; quick 3; 0: skip)"
    )
    parser.add_argument(
        "--brokers",
        default="slipstream,tansu,noida-db,floor",
        help="comma-separated subset of slipstream,tansu,noida-db,floor (floor: a bare"
        " asyncio process that answers the probe, the lowest start Python allows here)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions of a start under valgrind (load-independent; a few minutes)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 3 if args.quick else 15
    if args.embedded_runs is None:
        args.embedded_runs = 3 if args.quick else 15
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.embedded_runs < 0:
        parser.error("--embedded-runs must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    with work_directory("slipstream-startup-", args.keep) as workdir:
        opts = Options(
            messages=None,
            rss_messages=0,
            startup_runs=args.runs,
            embedded_runs=args.embedded_runs,
            timeout=30.0,
            workdir=workdir,
        )
        wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]
        began = time.perf_counter()
        load_start = load_average()
        specs, missing = discover_brokers([b for b in wanted if b != "floor"])
        if "floor" in wanted:
            specs.append(floor_spec())
        log("brokers: " + ", ".join(f"{s.label} {s.version}" for s in specs))
        results = measure(specs, opts)
        embedded: EmbeddedResult | None = None
        if args.embedded_runs and any(s.key == "slipstream" for s in specs):
            log(f"Slipstream: embedded start x{args.embedded_runs + 1}")
            embedded = measure_embedded(opts.embedded_runs, workdir, 120.0)
        command = " ".join(["python bench/startup.py", *(sys.argv[1:] if argv is None else argv)])
        print(report(results, embedded, opts, missing, time.perf_counter() - began, load_start, command))
        if args.instructions:
            print()
            print(instructions_report(opts))
        failed = any(r.error for r in results) or (embedded is not None and embedded.error)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
