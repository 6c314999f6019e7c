#!/usr/bin/env python3
"""The postgres log backend against the disk backend, one broker each, in one run.

    python bench/postgres_storage.py            # full run
    python bench/postgres_storage.py --quick    # smoke run

A Slipstream broker subprocess per backend (one after another, never side by side):
``--storage disk`` (default durability: page cache), ``--storage disk --durability
fsync`` (fsync group commit before acks=all) and ``--storage postgres`` against a
PostgreSQL server this script starts in a temporary directory (initdb, fsync on).
confluent-kafka produces 1 KiB values with acks=all and idempotence (linger.ms=5) and
then consumes them from the beginning. Issue 16's target: the postgres backend reaches
at least 30% of the disk backend's produce throughput.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    BenchError,
    create_topics,
    log,
    on_signal,
    signalled_if_bench_dies,
    slipstream_broker,
)
from produce_consume import WARMUP_TOPIC, Rate, consume_phase, produce_phase

from slipstream.testing.postgres import PostgresServer, find_postgres_bin

VALUE_SIZE = 1024


def run_backend(name: str, args: list[str], opts: argparse.Namespace) -> tuple[Rate, Rate]:
    with (
        tempfile.TemporaryDirectory(prefix="slipstream-bench-") as tmp,
        slipstream_broker(Path(tmp), "--log-level", "WARNING", *args, timeout=60) as broker,
    ):
        bootstrap = broker.bootstrap
        topic = f"bench-{name}"
        create_topics(bootstrap, {WARMUP_TOPIC: 1, topic: opts.partitions}, 30)
        log(f"{name}: producing {opts.count} x {VALUE_SIZE} B")
        produced = produce_phase(bootstrap, topic, opts.partitions, VALUE_SIZE, opts.count, True, 300)
        log(f"{name}: produce {produced}")
        consumed = consume_phase(bootstrap, topic, opts.partitions, opts.count, {}, 300)
        log(f"{name}: consume {consumed}")
        return produced, consumed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--count", type=int, help="records per backend (default 200000, quick 20000)")
    parser.add_argument("--partitions", type=int, default=1)
    opts = parser.parse_args(argv)
    opts.count = opts.count or (20_000 if opts.quick else 200_000)
    if find_postgres_bin() is None:
        log("PostgreSQL is not installed: run scripts/setup_postgres.sh")
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    results: dict[str, tuple[Rate, Rate]] = {}
    try:
        results["disk"] = run_backend("disk", ["--storage", "disk"], opts)
        results["disk, fsync"] = run_backend("disk-fsync", ["--storage", "disk", "--durability", "fsync"], opts)
        # pg_ctl detaches the server: no parent-death signal reaches it (SIGQUIT: its
        # immediate shutdown).
        with PostgresServer() as pg, signalled_if_bench_dies(pg.server_pids()[0], signal.SIGQUIT):
            results["postgres"] = run_backend("postgres", ["--storage", "postgres", "--database-url", pg.url], opts)
    except BenchError as exc:
        log(f"benchmark failed: {exc}")
        return 1
    disk_produce, disk_consume = results["disk"]
    print(
        f"Postgres vs disk log backend: {opts.count} x 1 KiB records, {opts.partitions} partition(s), "
        f"acks=all, idempotent, linger.ms=5; {platform.machine()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d')}.\n"
    )
    print("| backend | produce msg/s | produce MB/s | vs disk | consume msg/s | consume MB/s | vs disk |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (produced, consumed) in results.items():
        print(
            f"| {name} | {produced.msgs_per_s:,.0f} | {produced.mb_per_s:.1f} | "
            f"{produced.msgs_per_s / disk_produce.msgs_per_s:.0%} | {consumed.msgs_per_s:,.0f} | "
            f"{consumed.mb_per_s:.1f} | {consumed.msgs_per_s / disk_consume.msgs_per_s:.0%} |"
        )
    ratio = results["postgres"][0].msgs_per_s / disk_produce.msgs_per_s
    print(f"\nTarget: postgres produce >= 30% of disk: {ratio:.0%} ({'met' if ratio >= 0.3 else 'NOT met'}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
