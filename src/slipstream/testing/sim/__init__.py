"""A deterministic simulator of consumer groups (FoundationDB / TigerBeetle VOPR style).

It drives the real ``GroupCoordinator`` and the client's real member cores (the
classic ``MemberCore`` and the KIP-848 ``ConsumerMemberCore``) under a simulated clock and network, checks invariants after every step, shrinks
failing histories and replays any of them from its seed.

Modules, one job each:

- ``events``: the clock and the event queue (ties broken by insertion order);
- ``network``: per-connection FIFO links with random delays, drops, timeouts;
- ``broker``: the coordinator, an in-memory ``__consumer_offsets`` log, a ManualTimer,
  results carried out as ``coordinator/result.py`` prescribes, restarts, failing appends;
- ``members`` / ``classic`` / ``consumer``: members (connect,
  fetch offsets, process, commit) and their group protocol drivers;
- ``topics``: the cluster's topics and the image the coordinator sees;
- ``workload``: the seed's setup and list of actions (joins, leaves, crashes, pauses,
  static restarts, subscription changes, added partitions, coordinator restarts,
  dropped links, failing appends);
- ``invariants``: what must hold after every step, and liveness once faults stop;
- ``state``: what one history shares (parameters, clock, network, broker, members, the
  trace, violations and coverage); members see it through ``members.MemberWorld``;
- ``watcher``: after every step and as the broker serves, notes what changed and checks
  the invariants on it;
- ``world``: one history, step by step (``simulate``): the actions and the run loop;
- ``shrinking``: greedy removal of actions while the failure persists;
- ``coverage``: what the runs reached; ``planted``: bugs planted from outside;
- ``diagnosis``: signatures of the real bugs found so far.

Replay a seed with ``python bench/simulate_groups.py --seed S --protocol P --shrink``.
"""

from . import diagnosis
from .history import History
from .invariants import Violation
from .planted import PLANTS
from .shrinking import shrink
from .state import PROTOCOLS
from .workload import Timing
from .world import DEFAULT_STEPS, simulate

__all__ = [
    "DEFAULT_STEPS",
    "PLANTS",
    "PROTOCOLS",
    "History",
    "Timing",
    "Violation",
    "diagnosis",
    "shrink",
    "simulate",
]
