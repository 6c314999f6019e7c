#!/usr/bin/env python3
"""Fingerprints of simulated histories: proof that a speed-up left every history as it was.

    python bench/simulate_fingerprint.py --histories 100 --out before.json
    python bench/simulate_fingerprint.py --histories 100 --out after.json --compare before.json

Each (protocol, profile, seed) is simulated twice, with its full trace and without
one (the batch path), and its fingerprint keeps the trace digest, events, simulated
time, quiet time, violations, diagnosis and coverage of both. ``--compare`` names the
histories whose fingerprint differs (exit status 1 when any does).

The coordinator names classic members of a consumer group with ``uuid4`` (as Kafka does),
which no seed decides: such ids would make the traces of the ``convert`` and ``migrate``
profiles differ from run to run, so here each history's ``uuid4`` counts from 1.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import logging
import multiprocessing
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from slipstream.testing.sim import DEFAULT_STEPS, PROTOCOLS, simulate
from slipstream.testing.sim.batch import default_jobs
from slipstream.testing.sim.workload import PROFILES

Task = tuple[str, str, int, int]


def _counted_uuid(ids: Iterator[int]) -> uuid.UUID:
    return uuid.UUID(int=next(ids))


def fingerprint(task: Task) -> tuple[str, list[Any]]:
    protocol, profile, seed, steps = task
    logging.getLogger("slipstream").setLevel(logging.CRITICAL)
    runs: list[Any] = []
    for trace_limit in (None, 0):
        uuid.uuid4 = functools.partial(_counted_uuid, itertools.count(1))  # see the module's docstring
        h = simulate(seed, protocol, steps, trace_limit=trace_limit, profile=profile)
        c = h.coverage
        runs.append([
            h.digest, h.events, h.sim_ms, h.quiet_at_ms,
            [(v.kind, v.message, v.at_ms) for v in h.violations], h.diagnosis,
            sorted(c.group_states.items()), sorted(c.member_states.items()), sorted(c.transitions.items()),
            sorted(c.errors.items()), sorted(c.actions.items()), c.zombie_overlaps,
        ])
    return f"{protocol} {profile} {seed}", runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=100, help="seeds per protocol and profile, from --start")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--profiles", default=",".join(sorted(PROFILES)), help="comma-separated workload profiles")
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--out", required=True, help="where the fingerprints go (JSON)")
    parser.add_argument("--compare", help="fingerprints of an earlier run to compare with")
    args = parser.parse_args()
    tasks = [
        (protocol, profile, seed, args.steps)
        for protocol in PROTOCOLS
        for profile in args.profiles.split(",")
        for seed in range(args.start, args.start + args.histories)
    ]
    # spawn: each worker starts clean (the uuid4 patch stays inside the workers).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=context) as pool:
        # Through JSON and back, so both sides compare as the file holds them.
        prints = json.loads(json.dumps(dict(pool.map(fingerprint, tasks, chunksize=5))))
    with open(args.out, "w") as f:
        json.dump(prints, f, sort_keys=True)
    print(f"{len(prints)} histories fingerprinted into {args.out}")
    if not args.compare:
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    common = [k for k in prints if k in before]
    differ = [k for k in common if before[k] != prints[k]]
    print(f"compared {len(common)} with {args.compare}: {len(differ)} differ")
    for key in differ[:20]:
        print(f"  {key}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
