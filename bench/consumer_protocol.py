#!/usr/bin/env python3
"""The consumer group protocol (KIP-848) against the classic one, same run, same broker.

    python bench/consumer_protocol.py            # full run, about ten minutes
    python bench/consumer_protocol.py --quick    # smoke run, under three minutes

Three protocols are compared with confluent-kafka (librdkafka) consumers:

- classic, ``range`` (eager: every member gives up everything on each rebalance);
- classic, ``cooperative-sticky`` (incremental, two rebalances per change);
- consumer (``group.protocol=consumer``; the broker assigns, ``uniform`` by default).

1. Herd: 10 and 50 consumers (threads, one process) subscribe together to a 60-partition
   topic: time until every partition is owned and every consumer owns some, assignment
   callbacks, and partitions owned by two consumers at once (ownership is tracked from
   on_assign / on_revoke / on_lost; incremental for cooperative and consumer, the full
   set for eager).
2. Join into a stable group: ten consumers read a 60-partition topic that a producer writes
   at a steady rate; an eleventh joins. Time until it gets its first record, and the longest
   pause on the partitions the ten keep across the rebalance.
3. Capacity: G groups x 5 raw consumer-protocol members (ConsumerGroupHeartbeat v1, one
   connection per member, two load-generator processes); the classic members of
   ``bench/group_coordinator.py`` (JoinGroup/SyncGroup/Heartbeat) on a fresh broker for
   comparison.

Every wait is bounded and every child and broker is killed on exit. Progress goes to
stderr, the Markdown report to stdout. Broker settings can be added with ``--set k=v``.
The consumers are in protocol_consumers.py, (1) and (2) in protocol_herd_join.py, (3) in
protocol_capacity.py and its load generator consumer_load.py, the report in protocol_report.py.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from group_load import MEMBERS_PER_GROUP
from harness import (
    MB,
    BenchError,
    BrokerSpec,
    create_topics,
    discover_brokers,
    log,
    ms,
    on_signal,
    pct,
    spec_broker,
    work_directory,
)
from protocol_capacity import measure_capacity, scan_log
from protocol_consumers import ORDER, PARTITIONS
from protocol_herd_join import HerdRun, JoinRun, measure_herd, measure_join
from protocol_report import report, seconds


def slipstream_spec(settings: list[str]) -> BrokerSpec:
    specs, _missing = discover_brokers(["slipstream"])
    base = specs[0]
    extra = [a for s in settings for a in ("--set", s)]

    def command(port: int, work: Path) -> list[str]:
        return [*base.command(port, work), *extra]

    return BrokerSpec(key=base.key, label=base.label, version=base.version,
                      describe=base.describe + (f"; {' '.join(extra)}" if extra else ""),
                      command=command)



def run_herds(bootstrap: str, runs: int) -> dict[str, dict[int, list[HerdRun]]]:
    """(1) for every herd size, run and protocol, on the broker at ``bootstrap``."""
    herds: dict[str, dict[int, list[HerdRun]]] = {}
    for n in (10, 50):
        for r in range(runs):
            # Interleaved, so drift on the machine hits each protocol alike.
            for k in ORDER:
                t = time.perf_counter()
                try:
                    h = measure_herd(bootstrap, f"herd-{k}-{n}-{r}", k, n, 60, 3.0)
                except Exception as exc:
                    h = HerdRun(protocol=k, consumers=n, error=str(exc).splitlines()[0])
                herds.setdefault(k, {}).setdefault(n, []).append(h)
                log(f"(1) {k} x{n} run {r + 1}/{runs}: complete"
                    f" {seconds(h.complete_after)}, settled {seconds(h.settled_after)},"
                    f" cb {h.assigns}/{h.revokes}, double {h.violations},"
                    f" balanced {h.balanced}, errors {len(h.client_errors)}"
                    f"{', ' + h.error if h.error else ''}"
                    f" ({time.perf_counter() - t:.0f} s)")
    return herds


def run_joins(bootstrap: str, runs: int, rate: int, baseline: float, stable: float
              ) -> dict[str, list[JoinRun]]:
    """(2) for every run and protocol, on the broker at ``bootstrap``."""
    joins: dict[str, list[JoinRun]] = {}
    for r in range(runs):
        for k in ORDER:
            t = time.perf_counter()
            try:
                j = measure_join(bootstrap, f"join-{k}-{r}", k, rate, baseline, stable, 45)
            except Exception as exc:
                j = JoinRun(protocol=k, error=str(exc).splitlines()[0])
            joins.setdefault(k, []).append(j)
            log(f"(2) {k} run {r + 1}/{runs}: first record {seconds(j.first_record)},"
                f" balanced {seconds(j.balanced_after)}, kept {j.kept}, pause"
                f" {seconds(j.kept_pause)} (gap {seconds(j.kept_max_gap)}, normal"
                f" {seconds(j.normal_gap)}), moved gap {seconds(j.moved_max_gap)},"
                f" cb {j.assigns}/{j.revokes}, double {j.violations}"
                f"{', ' + j.error if j.error else ''}"
                f" ({time.perf_counter() - t:.0f} s)")
            log(f"(2) {k} longest kept gap: {j.kept_gap_where}; callbacks after"
                f" the join (ms:consumer +assigned/-revoked count): {j.timeline}")
    return joins


def log_capacity(kind: str, c: dict[str, Any]) -> None:
    log(f"(3) {kind}: joined {c['joined']}/{c['members']} in {c['join_s']:.1f} s,"
        f" fenced {c['fenced']}, other {c['other_errors']}, p99"
        f" {ms(pct(c['latencies'], 0.99))}, RSS {c['rss_peak'] / MB:.0f} MB,"
        f" CPU {c['broker_cpu']:.0f} s in {c['wall']:.0f} s")
    if kind == "consumer":
        log(f"(3) consumer: acks p50/p99 {ms(pct(c['ack_latencies'], 0.5))}/"
            f"{ms(pct(c['ack_latencies'], 0.99))} ({len(c['ack_latencies'])}), others sent in the same 100 ms"
            f" {ms(pct(c['ack_peer_latencies'], 0.5))}/{ms(pct(c['ack_peer_latencies'], 0.99))};"
            " per second of the window (second: answers > 50 ms / worst"
            " load-generator loop lag / slowest broker probe / broker CPU +"
            " load generators' CPU):"
            f" {c['per_second']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Consumer vs classic group protocol (Markdown).")
    p.add_argument("--quick", action="store_true", help="smoke run (1 run each, 200 groups for 15 s)")
    p.add_argument("--runs", type=int, help="runs per herd size and protocol, and per join (default 3; quick 1)")
    p.add_argument("--groups", type=int, help="capacity groups (default 2000; quick 200)")
    p.add_argument("--duration", type=float, help="capacity seconds (default 60; quick 15)")
    p.add_argument("--join-spread", type=float,
                   help="(3) consumer groups join at random moments over this many seconds"
                        " (default groups/100: 2 s quick, 20 s full)")
    p.add_argument("--rate", type=int, default=3000, help="(2) records/s (default 3000)")
    p.add_argument("--sections", default="1,2,3", help="comma-separated sections (default 1,2,3)")
    p.add_argument("--no-classic-capacity", action="store_true",
                   help="(3) skip the classic capacity comparison")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="broker setting, passed on as --set (repeatable)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (broker logs)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    runs = args.runs or (1 if quick else 3)
    groups = args.groups or (200 if quick else 2000)
    duration = args.duration or (15.0 if quick else 60.0)
    sections = {int(x) for x in args.sections.split(",") if x.strip()}
    regular_ms = 5000
    for s in args.set:
        if s.startswith("group.consumer.heartbeat.interval.ms="):
            regular_ms = int(s.split("=", 1)[1])
    spec = slipstream_spec(args.set)
    with work_directory("slipstream-kip848-bench-", args.keep) as workdir:
        began = time.perf_counter()
        herds: dict[str, dict[int, list[HerdRun]]] = {}
        joins: dict[str, list[JoinRun]] = {}
        caps: dict[str, dict[str, Any]] = {}
        errors: list[str] = []
        logs: dict[str, dict[str, Any]] = {}
        if sections & {1, 2}:
            log("starting the broker for (1) and (2)")
            with spec_broker(spec, workdir, "groups") as b:
                topics = {}
                if 1 in sections:
                    topics.update({f"herd-{k}-{n}-{r}": PARTITIONS for k in ORDER
                                   for n in (10, 50) for r in range(runs)})
                if 2 in sections:
                    topics.update({f"join-{k}-{r}": PARTITIONS for k in ORDER for r in range(runs)})
                create_topics(b.bootstrap, topics, 60)
                if 1 in sections:
                    herds = run_herds(b.bootstrap, runs)
                if 2 in sections:
                    joins = run_joins(b.bootstrap, runs, args.rate, 2.0 if quick else 4.0,
                                      regular_ms / 1000 + 1.0)
                logs["(1)+(2) broker"] = scan_log(b)
        if 3 in sections:
            join_timeout = 60.0 if quick else 120.0
            join_spread = args.join_spread if args.join_spread is not None else groups / 100
            kinds = ["consumer"] if args.no_classic_capacity else ["consumer", "classic"]
            for kind in kinds:
                log(f"(3) capacity, {kind}: {groups} groups x {MEMBERS_PER_GROUP} for {duration:.0f} s")
                try:
                    caps[kind] = measure_capacity(kind, spec, workdir, groups, duration,
                                                  join_timeout, regular_ms, join_spread)
                    logs[f"(3) {kind} broker"] = caps[kind].pop("log")
                    log_capacity(kind, caps[kind])
                except BenchError as exc:
                    caps[kind] = {"error": str(exc).splitlines()[0]}
                    errors.append(f"(3) {kind}: {exc}")
        print(report(spec, herds, joins, caps, errors, logs, time.perf_counter() - began,
                     groups, duration, args.rate))
        return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
