"""The state one history shares: its parameters, clock, network, topics, broker and members,
and what it recorded so far (trace, violations, coverage).

Everything below ``world`` that needs the history reads it and notes into it here: the
probes, the diagnosis and the watcher take a ``WorldState``; a member sees it through
``members.MemberWorld``. The world adds the workload's actions and the run loop on top.
"""

from __future__ import annotations

import hashlib
from collections import deque

from ...coordinator.config import MigrationPolicy
from ...protocol.errors import ErrorCode
from ...protocol.errors import name as error_name
from .broker import SimBroker
from .classic import ClassicMember
from .consumer import ConsumerMember
from .coverage import Coverage
from .events import EventQueue
from .invariants import Violation
from .members import SimMember
from .network import Network
from .topics import Topics
from .workload import Setup, Timing

PROTOCOLS = ("classic", "consumer")
# Fatal answers a correct member can get. FENCED_INSTANCE_ID: a static member whose id
# changed in a generation that never completed, when the coordinator then fails over,
# finds its instance id mapped to its previous id again (Kafka answers the same).
EXPECTED_FATAL = frozenset({ErrorCode.FENCED_INSTANCE_ID})
# ... and, once a member of the other protocol got into the (empty) group, the refusals
# a member of this protocol then gets from the group of the other type.
EXPECTED_FATAL_MIXED = frozenset({ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.GROUP_ID_NOT_FOUND})


class WorldState:
    """One history's shared state; ``world.World`` runs it."""

    # Set by the world once the broker's observer exists (before anything runs).
    broker: SimBroker

    def __init__(
        self, seed: int, protocol: str, setup: Setup, timing: Timing, trace_limit: int | None, groups: int
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}")
        self.seed = seed
        self.protocol = protocol
        self.setup = setup
        self.timing = timing
        # Several groups share the coordinator, the topics and the offsets partition; slot s
        # belongs to group s % groups. Probes and conversions use the first group.
        self.group_ids = ["sim-group"] + [f"sim-group-{i}" for i in range(1, groups)]
        self.group_id = self.group_ids[0]
        self.profile = "default"
        self.queue = EventQueue()
        self.network = Network(self.queue, seed)
        self.topics = Topics(dict(setup.topics))
        self.coverage = Coverage()
        self.violations: list[Violation] = []
        # trace_limit 0: no trace at all (batch runs); a failing history is simulated
        # again with its trace (see ``world.simulate``), which yields the same history.
        self.tracing = trace_limit != 0
        self.trace: deque[str] | list[str] = [] if trace_limit is None else deque(maxlen=trace_limit)
        self.trace_digest = hashlib.blake2b(digest_size=8)
        # Full traces (replays) show every commit and its fate; batch runs skip the text.
        self.trace_commits = trace_limit is None
        # Members that ran code in the current step (see ``touch``).
        self.touched_members: list[SimMember] = []
        # The workload's slots: the member running in each (None: empty), its restarts.
        self.slots: dict[int, SimMember | None] = {}
        self.incarnations: dict[int, int] = {}
        self.members: list[SimMember] = []  # not gone yet, in start order
        self.faults_until = 0  # the last fault's end: liveness is judged after it
        # Successes answered for changes the log refused (for the diagnosis).
        self.acked_unwritten: list[str] = []
        self.mixed = False  # a member of the other protocol got into the group once
        # The API a member of the other protocol joins with (see probes.py).
        self.foreign_api = "consumer_group_heartbeat" if protocol == "classic" else "join_group"
        # The coordinator's group.consumer.migration.policy (set by the world before it runs).
        self.migration_policy = MigrationPolicy.DISABLED

    # ------------------------------------------------------------ queries

    def group_of(self, slot: int) -> str:
        return self.group_ids[slot % len(self.group_ids)]

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        return {t: self.topics.counts[t] for t in topics if t in self.topics.counts}

    def in_group(self, group_id: str, text: str) -> str:
        """``text`` about ``group_id``, named when the world has several groups."""
        return text if len(self.group_ids) == 1 else f"{group_id}: {text}"

    # ------------------------------------------------------------ recording

    def note(self, text: str) -> None:
        if not self.tracing:
            return
        line = f"{self.queue.now_ms:>8} ms  {text}"
        self.trace.append(line)
        self.trace_digest.update(line.encode())

    def violate(self, kind: str, message: str) -> None:
        self.violations.append(Violation(kind, message, self.queue.now_ms))
        self.note(f"!! VIOLATION {kind}: {message}")

    def touch(self, member: SimMember) -> None:
        """``member`` runs code now: look at it after this step (nobody else changes it)."""
        if not member.touched:
            member.touched = True
            self.touched_members.append(member)

    def extend_faults(self, until_ms: int) -> None:
        self.faults_until = max(self.faults_until, until_ms)

    # ------------------------------------------------------------ members

    def start_member(self, slot: int, topics: tuple[str, ...]) -> None:
        incarnation = self.incarnations.get(slot, -1) + 1
        self.incarnations[slot] = incarnation
        instance = f"instance-{slot}" if slot in self.setup.static_slots else None
        member: SimMember
        if self.protocol == "classic":
            member = ClassicMember(self, slot, incarnation, list(topics), instance, list(self.setup.assignors))
        else:
            member = ConsumerMember(self, slot, incarnation, list(topics), instance)
        self.slots[slot] = member
        self.members.append(member)
        self.touch(member)
        member.start()

    def member_failed(self, member: SimMember, code: int, reason: str) -> None:
        self.coverage.member_state(self.protocol, f"fatal:{error_name(code)}")
        self.note(f"   {member.label} failed: {reason}")
        if self.slots.get(member.slot) is member:
            self.slots[member.slot] = None  # the application died with it
        if code not in EXPECTED_FATAL and not (self.mixed and code in EXPECTED_FATAL_MIXED):
            # A well-behaved member of a single-protocol group never gets another fatal answer.
            self.violate("fatal-error", f"{member.label} failed: {reason}")

    def leave_all(self) -> list[tuple[int, tuple[str, ...]]]:
        """Every live member leaves (a clean close); their slots and subscriptions."""
        leavers = []
        for slot, member in sorted(self.slots.items()):
            if member is not None and not member.gone and not member.closing:
                leavers.append((slot, member.subscription))
                self.touch(member)
                member.leave()
                self.slots[slot] = None
        return leavers

    def rejoin(self, slot: int, topics: tuple[str, ...]) -> None:
        if self.slots.get(slot) is None:
            self.start_member(slot, topics)
