"""Greedy shrinking: drop actions one at a time while the history still fails the same way."""

from __future__ import annotations

from dataclasses import dataclass

from .history import History
from .world import DEFAULT_STEPS, simulate


@dataclass
class Shrunk:
    keep: list[int]
    history: History
    runs: int


def shrink(
    seed: int,
    protocol: str,
    steps: int = DEFAULT_STEPS,
    *,
    plant: str | None = None,
    max_runs: int = 200,
    profile: str = "default",
) -> Shrunk:
    """The smallest subset of the drawn actions (by greedy removal) that still fails
    with the same kind of violation; ``keep`` are indices into the drawn list."""
    full = simulate(seed, protocol, steps, plant=plant, profile=profile)
    if full.ok:
        raise ValueError(f"seed {seed} does not fail")
    kind = full.violations[0].kind
    keep = list(range(len(full.actions)))
    best = full
    runs = 1
    # From the end: later actions are most often irrelevant to an early failure.
    i = len(keep) - 1
    while i >= 0 and runs < max_runs:
        candidate = keep[:i] + keep[i + 1 :]
        attempt = simulate(seed, protocol, steps, plant=plant, keep=candidate, profile=profile)
        runs += 1
        if not attempt.ok and attempt.violations[0].kind == kind:
            keep, best = candidate, attempt
        i -= 1
    return Shrunk(keep, best, runs)
