"""What the coordinators' state tables share: the error a transition they do not list raises.

Each state machine (classic groups in ``state.py``, transactions in
``transactions/state.py``) declares, per state, the states it may be entered from;
``check_transition`` there raises a subclass of :class:`IllegalTransition`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class IllegalTransition(RuntimeError):
    """A state machine was asked to enter ``target`` from a state its table does not list."""

    def __init__(self, refusal: str, current: Enum, target: Enum, allowed: Iterable[Enum]) -> None:
        # ``refusal`` says who cannot move, e.g. "group 'g' cannot transition".
        self.current = current
        self.target = target
        listed = ", ".join(sorted(str(s) for s in allowed))
        super().__init__(
            f"{refusal} from {current} to {target} ({target} is entered only from: {listed})"
        )
