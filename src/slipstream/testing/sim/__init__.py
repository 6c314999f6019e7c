"""A deterministic simulator of consumer groups (FoundationDB / TigerBeetle VOPR style).

It drives the real ``GroupCoordinator`` and the real classic ``MemberCore`` (plus a
small KIP-848 member) under a simulated clock and network, checks invariants after
every step, shrinks failing histories and replays them from their seed. Entry point:
``simulate(seed, protocol, steps)``; the bench is ``bench/simulate_groups.py``.
"""

from .history import History
from .invariants import Violation
from .planted import PLANTS
from .shrinking import shrink
from .world import DEFAULT_STEPS, PROTOCOLS, Timing, simulate

__all__ = ["DEFAULT_STEPS", "PLANTS", "PROTOCOLS", "History", "Timing", "Violation", "shrink", "simulate"]
