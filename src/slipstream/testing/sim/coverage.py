"""What a run exercised: group states, member states, error codes, actions.

A simulator that never reaches a state cannot find its bugs; the bench prints this
so a change that makes histories tamer shows up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ...protocol.errors import name as error_name


@dataclass
class Coverage:
    group_states: Counter[str] = field(default_factory=Counter)
    member_states: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    # A partition held by a live member and by a zombie of an older generation (or epoch) at
    # once. Allowed by both protocols (a zombie has not noticed yet); counted.
    zombie_overlaps: int = 0

    def group_state(self, protocol: str, state: str) -> None:
        self.group_states[f"{protocol}:{state}"] += 1

    def member_state(self, protocol: str, state: str) -> None:
        self.member_states[f"{protocol}:{state}"] += 1

    def error(self, api: str, code: int) -> None:
        if code:
            self.errors[f"{api}:{error_name(code)}"] += 1

    def action(self, kind: str) -> None:
        self.actions[kind] += 1

    def merge(self, other: Coverage) -> None:
        self.group_states.update(other.group_states)
        self.member_states.update(other.member_states)
        self.errors.update(other.errors)
        self.actions.update(other.actions)
        self.zombie_overlaps += other.zombie_overlaps

    def render(self) -> str:
        def line(title: str, counter: Counter[str]) -> str:
            items = ", ".join(f"{k} x{v}" for k, v in sorted(counter.items()))
            return f"- {title}: {items or '(none)'}"

        return "\n".join(
            [
                line("group states", self.group_states),
                line("member states", self.member_states),
                line("error codes", self.errors),
                line("actions", self.actions),
                f"- steps where a zombie (classic: an older generation; consumer: a member the coordinator"
                f" fenced that has not heard yet) still held a partition its successor held (allowed: only"
                f" its commits are refused): {self.zombie_overlaps}",
            ]
        )
