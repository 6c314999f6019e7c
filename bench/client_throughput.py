#!/usr/bin/env python3
"""Slipstream's Python client against aiokafka, kafka-python and confluent-kafka.

    python bench/client_throughput.py            # full run: 200k x 100-byte values
    python bench/client_throughput.py --quick    # smoke run: 20k

One Slipstream broker (``--storage memory``) runs as a subprocess on 127.0.0.1;
every client runs in its own subprocess (no shared interpreter), one after
another, against that broker, in the same run:

* produce N x 100-byte values to a 4-partition topic, acks=all (idempotence on
  where the client supports it): Slipstream AIOProducer, Slipstream sync
  Producer, aiokafka, kafka-python, confluent-kafka (reference);
* consume the same N from the earliest offset (no group, every partition
  assigned): Slipstream AIOConsumer, Slipstream poll Consumer, Slipstream
  ConsumerGroup handler (a group), aiokafka, kafka-python, confluent-kafka;
* a Slipstream ConsumerGroup whose handler sleeps per message, over a topic of
  ~100 MB (``--quick``: ~30 MB), with two fetch-limit settings: peak RSS of the
  consumer process (psutil, sampled every 20 ms) against its RSS before
  fetching and the documented bound (partitions x (partition_buffer_bytes +
  max_partition_fetch_bytes) plus one response in flight of fetch_max_bytes).

Best of ``--runs`` (2) per row. Every wait is bounded, every process is killed
on exit. Progress goes to stderr; the Markdown report to stdout.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from client_loads import MEM_VALUE_SIZE, MEMORY_SETTINGS, PARTITIONS, VALUE_SIZE
from client_loads import SCRIPT as CLIENT_LOADS
from client_report import MemoryRow, Row, report
from harness import create_topics, dying_with_bench, log, slipstream_broker, stop_all

PRODUCERS = ["slipstream-aio", "slipstream-sync", "aiokafka", "kafka-python", "confluent-kafka"]
CONSUMERS = [
    "slipstream-aio",
    "slipstream-poll",
    "slipstream-group",
    "aiokafka",
    "kafka-python",
    "confluent-kafka",
]


# --------------------------------------------------------------------------- processes

_LIVE: set[subprocess.Popen[bytes]] = set()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    _LIVE.discard(proc)


def _kill_children() -> None:
    for proc in list(_LIVE):
        _kill(proc)


def _on_signal(signum: int, _frame: object) -> None:
    _kill_children()
    stop_all()
    sys.exit(128 + signum)


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    """Run one client measurement (client_loads.py) in a fresh interpreter; its last stdout
    line is JSON."""
    cmd = [sys.executable, CLIENT_LOADS, *args]
    proc = subprocess.Popen(
        dying_with_bench(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _LIVE.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return {"error": f"timeout after {timeout:.0f}s"}
    _LIVE.discard(proc)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = err.decode().strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    return dict(json.loads(lines[-1]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20k messages, ~30 MB memory topic")
    parser.add_argument("-n", "--messages", type=int, help="messages per row (default 200k)")
    parser.add_argument("--runs", type=int, default=2, help="runs per row, best kept (2)")
    parser.add_argument("--mem-seconds", type=float, default=None, help="slow-consumer duration")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args(argv)
    n = args.messages or (20_000 if args.quick else 200_000)
    mem_count = 30_000 if args.quick else 100_000
    mem_seconds = args.mem_seconds or (6.0 if args.quick else 12.0)
    child_timeout = 120.0 if args.quick else 300.0

    atexit.register(_kill_children)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    stack = contextlib.ExitStack()
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="client-bench-")))
    log("starting slipstream broker")
    broker = stack.enter_context(slipstream_broker(workdir, "--storage", "memory", "--log-level", "WARNING"))
    bs = broker.bootstrap
    log(f"slipstream broker on {bs}")
    tag = os.getpid()
    consume_topic = f"bench-consume-{tag}"
    mem_topic = f"bench-mem-{tag}"
    prod_topics = {
        (c, run): f"bench-produce-{c}-{run}-{tag}" for c in PRODUCERS for run in range(args.runs)
    }
    create_topics(bs, {consume_topic: PARTITIONS, mem_topic: PARTITIONS}
                  | {t: PARTITIONS for t in prod_topics.values()}, 30)

    produce_rows = [Row(c, []) for c in PRODUCERS]
    for run in range(args.runs):
        for row in produce_rows:
            log(f"produce {row.name} run {run + 1}: {n} x {VALUE_SIZE} B")
            res = run_child(["produce", row.name, bs, prod_topics[(row.name, run)], str(n)],
                            child_timeout)
            log(f"  -> {res}")
            row.results.append(res)

    log(f"filling {consume_topic} with {n} messages (confluent-kafka)")
    fill = run_child(["fill", "-", bs, consume_topic, str(n), str(VALUE_SIZE)], child_timeout)
    if "error" in fill:
        raise RuntimeError(f"fill failed: {fill['error']}")
    consume_rows = [Row(c, []) for c in CONSUMERS]
    for run in range(args.runs):
        for row in consume_rows:
            log(f"consume {row.name} run {run + 1}")
            res = run_child(["consume", row.name, bs, consume_topic, str(n)], child_timeout)
            log(f"  -> {res}")
            row.results.append(res)

    mem_rows: list[MemoryRow] = []
    sleep_ms = 1.0
    if not args.skip_memory:
        log(f"filling {mem_topic} with {mem_count} x {MEM_VALUE_SIZE} B")
        fill = run_child(["fill", "-", bs, mem_topic, str(mem_count), str(MEM_VALUE_SIZE)],
                         child_timeout)
        if "error" in fill:
            raise RuntimeError(f"fill failed: {fill['error']}")
        for label, mpfb, fmb, pbb in MEMORY_SETTINGS:
            results = []
            for run in range(args.runs):
                log(f"slow consumer {label} run {run + 1}")
                res = run_child(
                    ["memory", label, bs, mem_topic, str(mem_seconds), str(sleep_ms)],
                    mem_seconds + 90,
                )
                log(f"  -> {res}")
                results.append(res)
            good = [r for r in results if "error" not in r]
            best = min(good, key=lambda r: r["peak"] - r["baseline"]) if good else None
            err = "" if good else results[-1].get("error", "?")
            mem_rows.append((label, mpfb, fmb, pbb, best, err))

    broker_rss = None
    with contextlib.suppress(Exception):
        import psutil

        broker_rss = psutil.Process(broker.pid).memory_info().rss
    stack.close()

    print(report(n, args.runs, produce_rows, consume_rows, mem_rows, mem_count, mem_seconds,
                 sleep_ms, broker_rss))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
