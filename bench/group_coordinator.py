#!/usr/bin/env python3
"""Consumer-group coordinator benchmark: Slipstream, with Tansu and noida-db where they can.

    python bench/group_coordinator.py            # full run, a few minutes
    python bench/group_coordinator.py --quick    # smoke run, about a minute

Measures, with confluent-kafka (librdkafka) as the client:

1. one consumer: subscribe -> first record (median of several runs, each a new group),
   against every broker;
2. 10 and 50 consumers started together (threads, one process) on a 60-partition topic,
   several runs each for Slipstream (--herd-runs):
   time until every consumer has its assignment and how many generations it took;
3. sustained OffsetCommit and Heartbeat requests per second, from a separate load-generator
   process that speaks the protocol directly (four members of one group, one pre-encoded
   frame per member and request kind, each pipelined over the member's own raw connection;
   only the correlation id changes per request);
4. capacity: G groups x 5 members heartbeating every 3 s (one connection per member,
   load generator in two processes): expired members, heartbeat latency p50/p99, broker RSS.

Brokers run one after another as subprocesses on 127.0.0.1 only; every wait is bounded
and every process is killed on exit. Progress goes to stderr; the Markdown report to stdout.
(1) and (2) are in group_clients.py, the load generators of (3) and (4) in group_load.py,
the report in group_report.py.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from group_clients import FirstRecord, Herd, measure_first_record, measure_herd
from group_load import SCRIPT as GROUP_LOAD
from group_load import combine_capacity
from group_report import report
from harness import (
    BenchError,
    BrokerSpec,
    RssSampler,
    collect,
    cpu_of,
    create_topics,
    discover_brokers,
    log,
    on_signal,
    run_child,
    spec_broker,
    work_directory,
)

# (3)'s load: this many members of one group, each pipelining over its own connection.
RATE_CONNECTIONS = 4


def measure_rate(spec: BrokerSpec, workdir: Path, rate_s: float) -> dict[str, Any]:
    """(3): OffsetCommit, then Heartbeat requests per second from one load generator."""
    with spec_broker(spec, workdir, "slipstream-3") as b:
        create_topics(b.bootstrap, {"commits": RATE_CONNECTIONS}, 30)
        cpu0 = cpu_of(b.pid)
        child = run_child(
            GROUP_LOAD, ["rate", json.dumps(
                {"port": b.port, "topic": "commits", "duration": rate_s,
                 "connections": RATE_CONNECTIONS, "depth": 32, "broker_pid": b.pid})],
            workdir,
        )
        rates = collect(child, 2 * rate_s + 60)
        rates["broker_cpu"] = cpu_of(b.pid) - cpu0
    return rates


def measure_capacity(
    spec: BrokerSpec, workdir: Path, groups: int, duration: float, join_timeout: float
) -> dict[str, Any]:
    """(4): ``groups`` groups x 5 members heartbeating from two load generators; the
    broker's RSS and CPU meanwhile."""
    with spec_broker(spec, workdir, "slipstream-4") as b:
        create_topics(b.bootstrap, {"cap": 5}, 30)
        sampler = RssSampler(b.pid, 0.2)
        halves = [(0, groups // 2), (groups // 2, groups)]
        cpu0 = cpu_of(b.pid)
        t0 = time.perf_counter()
        kids = []
        for lo, hi in halves:
            kid = run_child(
                GROUP_LOAD, ["capacity", json.dumps(
                    {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                     "interval": 3.0, "duration": duration,
                     "join_timeout": join_timeout})],
                workdir,
            )
            kids.append(kid)
        parts = [collect(k, join_timeout + duration + 120) for k in kids]
        wall = time.perf_counter() - t0
        cap = {
            **combine_capacity(parts),
            "join_errors": sum(x["join_errors"] for x in parts),
            "connect_errors": sum(x["connect_errors"] for x in parts),
            "expired": sum(sum(x["expired"].values()) for x in parts),
            "expired_codes": [x["expired"] for x in parts],
            "other_errors": [x["other_errors"] for x in parts],
            "rss_end": sampler.current(),
            "broker_cpu": cpu_of(b.pid) - cpu0,
            "wall": wall,
        }
        cap["rss_peak"] = sampler.stop()
    return cap


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Consumer-group coordinator benchmark (Markdown).")
    p.add_argument("--quick", action="store_true", help="smoke run (200 groups for 15 s, ...)")
    p.add_argument("--brokers", default="slipstream,tansu,noida-db")
    p.add_argument("--groups", type=int, help="capacity groups (default 2000; quick 200)")
    p.add_argument("--duration", type=float, help="capacity seconds (default 60; quick 15)")
    p.add_argument("--herd-runs", type=int, help="(2): Slipstream runs per herd size (default 5; quick 1)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument(
        "--sections", default="1,2,3,4",
        help="comma-separated sections to run (default 1,2,3,4); (2) needs (1) to pass",
    )
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    groups = args.groups or (200 if quick else 2000)
    duration = args.duration or (15.0 if quick else 60.0)
    fr_runs = 3 if quick else 7
    herd_runs = args.herd_runs or (1 if quick else 5)
    rate_s = 3.0 if quick else 5.0
    with work_directory("slipstream-groups-bench-", args.keep) as workdir:
        began = time.perf_counter()
        specs, missing = discover_brokers([b.strip() for b in args.brokers.split(",") if b.strip()])
        first: dict[str, FirstRecord] = {}
        herds: dict[str, dict[int, list[Herd]]] = {}
        rates: dict[str, Any] = {}
        cap: dict[str, Any] = {}
        errors: list[str] = []
        sections = {int(x) for x in args.sections.split(",") if x.strip()}
        for spec in specs:
            if 1 in sections:
                log(f"{spec.label}: (1) first record x{fr_runs}")
                try:
                    with spec_broker(spec, workdir, spec.key + "-1") as b:
                        first[spec.key] = measure_first_record(b.bootstrap, fr_runs, 30)
                except BenchError as exc:
                    first[spec.key] = FirstRecord(error=str(exc).splitlines()[0])
                if first[spec.key].error:
                    log(f"{spec.label}: (1) failed: {first[spec.key].error}")
                    continue
            if 2 in sections:
                log(f"{spec.label}: (2) 10 and 50 consumers")
                herds[spec.key] = {}
            # Peers get one run each (Tansu takes ~25 s per herd); Slipstream's target is
            # "one generation", so it is checked over several runs, each on a fresh broker.
            runs = herd_runs if spec.key == "slipstream" else 1
            for n in (10, 50) if 2 in sections else ():
                for run in range(runs):
                    try:
                        with spec_broker(spec, workdir, f"{spec.key}-2-{n}-{run}") as b:
                            create_topics(b.bootstrap, {"herd": 60}, 30)
                            herd = measure_herd(b.bootstrap, "herd", n, 60, 3.0)
                    except BenchError as exc:
                        herd = Herd(consumers=n, error=str(exc).splitlines()[0])
                    herds[spec.key].setdefault(n, []).append(herd)
                    log(f"{spec.label}: (2) run {run + 1}/{runs}: {herd}")
            if spec.key != "slipstream":
                continue
            if 3 in sections:
                log("Slipstream: (3) OffsetCommit / Heartbeat rate")
                try:
                    rates = measure_rate(spec, workdir, rate_s)
                except BenchError as exc:
                    errors.append(f"(3) {exc}")
            if 4 in sections:
                log(f"Slipstream: (4) capacity, {groups} groups x 5 for {duration:.0f} s")
                try:
                    cap = measure_capacity(spec, workdir, groups, duration, 60.0 if quick else 120.0)
                except BenchError as exc:
                    errors.append(f"(4) {exc}")
        print(report(specs, missing, first, herds, rates, cap, groups, duration, rate_s, errors,
                     time.perf_counter() - began))
        return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
