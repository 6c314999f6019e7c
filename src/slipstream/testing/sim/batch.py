"""Many histories at once, spread over worker processes.

Every history is a pure function of its seed, so splitting the seeds between
processes changes nothing but the wall-clock time: the same seeds fail, with the
same traces. Results come back in seed order.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .coverage import Coverage
from .history import History
from .world import DEFAULT_STEPS, simulate

# Seeds per task: large enough that process hand-offs cost little, small enough that
# both workers stay busy until the end.
CHUNK = 20


@dataclass
class BatchResult:
    protocol: str
    histories: int
    seconds: float
    events: int
    failures: list[History] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)

    @property
    def histories_per_s(self) -> float:
        return self.histories / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class _Task:
    protocol: str
    seeds: tuple[int, ...]
    steps: int
    profile: str


def _quiet() -> None:
    # Planted bugs and fault injection make the coordinator log errors by design.
    logging.getLogger("slipstream").setLevel(logging.CRITICAL)


def _run(task: _Task) -> tuple[int, int, Coverage, list[History]]:
    coverage = Coverage()
    failures: list[History] = []
    events = 0
    for seed in task.seeds:
        history = simulate(seed, task.protocol, task.steps, profile=task.profile)
        events += history.events
        coverage.merge(history.coverage)
        if not history.ok:
            failures.append(history)
    return len(task.seeds), events, coverage, failures


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def run_histories(
    protocol: str,
    seeds: Iterable[int],
    *,
    steps: int = DEFAULT_STEPS,
    profile: str = "default",
    jobs: int = 1,
    progress: Callable[[BatchResult], None] | None = None,
) -> BatchResult:
    """Simulate every seed; ``jobs`` > 1 runs them in that many worker processes.
    ``progress`` hears the result so far after every chunk of seeds (in seed order)."""
    ordered: Sequence[int] = list(seeds)
    tasks = [
        _Task(protocol, tuple(ordered[i : i + CHUNK]), steps, profile) for i in range(0, len(ordered), CHUNK)
    ]
    result = BatchResult(protocol, 0, 0.0, 0)
    began = time.perf_counter()
    if jobs <= 1 or len(tasks) <= 1:
        outcomes = map(_run, tasks)
        _collect(result, outcomes, began, progress)
    else:
        # spawn: the workers start clean (no inherited event loop, threads or patches).
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_quiet) as pool:
            _collect(result, pool.map(_run, tasks), began, progress)
    result.seconds = time.perf_counter() - began
    return result


def _collect(
    result: BatchResult,
    outcomes: Iterable[tuple[int, int, Coverage, list[History]]],
    began: float,
    progress: Callable[[BatchResult], None] | None,
) -> None:
    for count, events, coverage, failures in outcomes:
        result.histories += count
        result.events += events
        result.coverage.merge(coverage)
        result.failures.extend(failures)
        if progress is not None:
            result.seconds = time.perf_counter() - began
            progress(result)
