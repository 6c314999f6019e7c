"""The outcome of one simulated history: what ran, what broke, and a readable trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from .coverage import Coverage
from .invariants import Violation
from .workload import Action


@dataclass
class History:
    seed: int
    protocol: str
    steps: int
    plant: str | None
    actions: list[Action]
    profile: str = "default"
    violations: list[Violation] = field(default_factory=list)
    events: int = 0
    sim_ms: int = 0
    quiet_at_ms: int | None = None
    trace: list[str] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    digest: str = ""  # a hash of the trace: equal digests, identical histories
    # Known real bugs whose signature the failing world shows (see diagnosis.py).
    diagnosis: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        head = f"seed={self.seed} protocol={self.protocol} plant={self.plant or '-'}"
        if self.profile != "default":
            head += f" profile={self.profile}"
        if self.ok:
            return f"{head}: ok ({self.events} events, {self.sim_ms} ms simulated, quiet at {self.quiet_at_ms} ms)"
        v = self.violations[0]
        cause = f" [probable cause: {', '.join(self.diagnosis)}]" if self.diagnosis else ""
        return f"{head}: VIOLATION {v.kind} at {v.at_ms} ms: {v.message}{cause}"

    def render(self, last: int | None = None) -> str:
        lines = [self.summary(), "", "actions:"]
        lines += [f"  {a.at_ms:>8} ms  {a.describe()}" for a in self.actions]
        trace = self.trace if last is None else self.trace[-last:]
        lines += ["", f"trace ({len(trace)} of {self.events} steps shown):"] + [f"  {t}" for t in trace]
        return "\n".join(lines)
