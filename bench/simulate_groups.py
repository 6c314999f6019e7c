#!/usr/bin/env python3
"""Deterministic simulation of consumer groups: many seeded histories, planted bugs, replay.

    python bench/simulate_groups.py                          # 200 histories per protocol + planted bugs
    python bench/simulate_groups.py --histories 1000 --protocol consumer
    python bench/simulate_groups.py --seed 66 --protocol classic          # replay one, full trace
    python bench/simulate_groups.py --seed 66 --protocol classic --shrink # ... and shrink it
    python bench/simulate_groups.py --seed 7 --protocol consumer --plant early-handoff
    python bench/simulate_groups.py --seed 7 --protocol consumer --keep 0,3,9   # a shrunk history

Each history drives the real GroupCoordinator and the client's real member core
(the classic MemberCore or the KIP-848 ConsumerMemberCore) under a simulated clock and network (see
``slipstream/testing/sim``). Violations print their seed and the command that
replays them. The Markdown report goes to stdout; progress to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass

from slipstream.testing.sim import DEFAULT_STEPS, PLANTS, PROTOCOLS, shrink, simulate
from slipstream.testing.sim.batch import BatchResult, default_jobs, run_histories
from slipstream.testing.sim.workload import PROFILES

# Histories a planted bug may take to be found (the test asserts the same budgets).
PLANT_BUDGET = 60


@dataclass
class PlantResult:
    plant: str
    protocol: str
    found_at: int | None  # histories run until found (1-based), None if not within the budget
    seed: int | None
    kind: str
    seconds: float
    shrunk_to: str


class Progress:
    """Prints how far a long run got (to stderr, flushed): it may be stopped before the end."""

    def __init__(self, protocol: str, total: int, every: int) -> None:
        self.protocol = protocol
        self.total = total
        self.every = max(1, every)
        self.next_at = self.every

    def __call__(self, r: BatchResult) -> None:
        if r.histories < self.next_at and r.histories < self.total:
            return
        self.next_at = (r.histories // self.every + 1) * self.every
        seeds = ", ".join(str(h.seed) for h in r.failures[:10]) or "-"
        print(
            f"[progress] {self.protocol}: {r.histories}/{self.total} histories in {r.seconds:.0f} s "
            f"({r.histories_per_s:.1f}/s), {len(r.failures)} violations (seeds {seeds})",
            file=sys.stderr, flush=True,
        )


def hunt(plant: str, protocol: str, start: int, budget: int, steps: int, do_shrink: bool) -> PlantResult:
    began = time.perf_counter()
    for i in range(budget):
        seed = start + i
        history = simulate(seed, protocol, steps, plant=plant)
        if not history.ok:
            shrunk = ""
            if do_shrink:
                s = shrink(seed, protocol, steps, plant=plant, max_runs=60)
                shrunk = f"{len(s.keep)}/{len(history.actions)} actions"
            return PlantResult(
                plant, protocol, i + 1, seed, history.violations[0].kind, time.perf_counter() - began, shrunk
            )
    return PlantResult(plant, protocol, None, None, "-", time.perf_counter() - began, "")


def replay(args: argparse.Namespace) -> int:
    keep = None if args.keep is None else [int(x) for x in args.keep.split(",") if x]
    history = simulate(
        args.seed, args.protocol, args.steps, plant=args.plant, keep=keep, trace_limit=None, profile=args.profile
    )
    print(history.render(last=args.trace_lines or None))
    print()
    print(history.coverage.render())
    if not history.ok and args.shrink:
        s = shrink(args.seed, args.protocol, args.steps, plant=args.plant, profile=args.profile)
        print()
        print(f"shrunk to {len(s.keep)} of {len(history.actions)} actions in {s.runs} runs:")
        print(f"  python bench/simulate_groups.py --seed {args.seed} --protocol {args.protocol}"
              + (f" --plant {args.plant}" if args.plant else "")
              + (f" --profile {args.profile}" if args.profile != "default" else "")
              + f" --keep {','.join(map(str, s.keep))}")
        print()
        print(s.history.render(last=args.trace_lines or 200))
    return 0 if history.ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=200, help="histories per protocol")
    parser.add_argument("--protocol", choices=(*PROTOCOLS, "both"), default="both")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="workload actions per history")
    parser.add_argument("--seed", type=int, help="replay this one seed with its full trace")
    parser.add_argument("--plant", choices=(*PLANTS, "all", "none"), default=None,
                        help="with --seed: run with this bug planted; else which plants to hunt (default all)")
    parser.add_argument("--keep", help="with --seed: comma-separated indices of the actions to keep")
    parser.add_argument("--shrink", action="store_true", help="shrink failing histories")
    parser.add_argument("--trace-lines", type=int, default=0, help="with --seed: last N trace lines only")
    parser.add_argument("--quick", action="store_true", help="smoke size: 20 histories per protocol")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default", help="workload mix of actions")
    parser.add_argument("--progress-every", type=int, default=1000, help="histories between progress lines")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="worker processes (default: up to 2)")
    args = parser.parse_args()
    # The coordinator logs planted inconsistencies loudly; the report says what matters.
    logging.getLogger("slipstream").setLevel(logging.CRITICAL)

    if args.seed is not None:
        if args.protocol == "both":
            parser.error("--seed needs --protocol classic or consumer")
        if args.plant in ("all", "none"):
            args.plant = None
        return replay(args)

    count = 20 if args.quick else args.histories
    protocols = PROTOCOLS if args.protocol == "both" else (args.protocol,)
    print("## Deterministic group simulation\n")
    print(f"Seeds {args.start}..{args.start + count - 1}, {args.steps} workload actions per history, "
          f"profile {args.profile}, {args.jobs} worker process(es).\n")
    print("| protocol | histories | histories/s | events/s | violations | failing seeds |")
    print("|---|---:|---:|---:|---:|---|")
    results: list[BatchResult] = []
    for protocol in protocols:
        print(f"running {count} {protocol} histories in {args.jobs} process(es)...", file=sys.stderr)
        r = run_histories(
            protocol, range(args.start, args.start + count), steps=args.steps, profile=args.profile, jobs=args.jobs,
            progress=Progress(protocol, count, args.progress_every),
        )
        for h in r.failures:
            print(f"  {h.summary()}", file=sys.stderr)
        results.append(r)
        seeds = ", ".join(str(h.seed) for h in r.failures[:10]) or "-"
        print(
            f"| {protocol} | {r.histories} | {r.histories_per_s:.1f} | {r.events / r.seconds:,.0f} "
            f"| {len(r.failures)} | {seeds} |"
        )
    for r in results:
        print(f"\n### Coverage ({r.protocol})\n")
        print(r.coverage.render(r.protocol))
        if r.failures:
            print(f"\n### Violations ({r.protocol})\n")
            for h in r.failures:
                print(f"- {h.summary()}")
                extra = f" --profile {h.profile}" if h.profile != "default" else ""
                print(f"  replay: `python bench/simulate_groups.py --seed {h.seed} --protocol {h.protocol}{extra} --shrink`")

    if args.plant != "none":
        plants = list(PLANTS) if args.plant in (None, "all") else [args.plant]
        print(f"\n### Planted bugs (budget {PLANT_BUDGET} histories each)\n")
        print("| plant | protocol | found after | seed | violation | seconds | shrunk to |")
        print("|---|---|---:|---:|---|---:|---|")
        for name in plants:
            for protocol in PLANTS[name].protocols:
                if protocol not in protocols:
                    continue
                print(f"hunting {name} ({protocol})...", file=sys.stderr)
                p = hunt(name, protocol, args.start, PLANT_BUDGET, args.steps, args.shrink)
                found = "NOT FOUND" if p.found_at is None else f"{p.found_at} histories"
                print(f"| {name} | {protocol} | {found} | {p.seed if p.seed is not None else '-'} | {p.kind} "
                      f"| {p.seconds:.1f} | {p.shrunk_to or '-'} |")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
