"""One simulated history: the world (clock, network, broker, members), run step by step.

``simulate(seed, protocol, steps)`` is a pure function of its arguments: one seed
picks the setup, the workload and every network delay (each from its own named
random stream), the clock is simulated, nothing iterates an unordered set. Every
step runs one event, then the safety invariants; once the faults are over the run
waits (bounded) for the group to become quiet.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import itertools
import random
import traceback
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...client.consumer_member_core import Phase
from ...coordinator import CoordinatorConfig, GroupCoordinator, GroupState, ManualTimer
from ...coordinator.config import MigrationPolicy
from ...coordinator.group import ClassicGroup
from ...protocol.errors import ErrorCode
from ...protocol.errors import name as error_name
from .broker import BrokerObserver, Origin, SimBroker
from .classic import ClassicMember
from .consumer import ConsumerMember
from .coverage import API_NAMES, Coverage
from .diagnosis import diagnose
from .events import EventQueue
from .history import History
from .invariants import (
    CommitFencing,
    OffsetWatch,
    Violation,
    classic_ownership,
    classic_quiet_problems,
    compare_views,
    consumer_ownership,
    consumer_quiet_problems,
    durable_view,
    live,
)
from .members import SimMember
from .network import Network
from .planted import PLANTS, Plant
from .probes import REFUSAL, check_answer, convert_when_empty, group_has_members, send_probe
from .topics import Topics
from .workload import GROUPS, Action, Setup, draw_actions, draw_setup

PROTOCOLS = ("classic", "consumer")
# Fatal answers a correct member can get. FENCED_INSTANCE_ID: a static member whose id
# changed in a generation that never completed, when the coordinator then fails over,
# finds its instance id mapped to its previous id again (Kafka answers the same).
EXPECTED_FATAL = frozenset({ErrorCode.FENCED_INSTANCE_ID})
# ... and, once a member of the other protocol got into the (empty) group, the refusals
# a member of this protocol then gets from the group of the other type.
EXPECTED_FATAL_MIXED = frozenset({ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.GROUP_ID_NOT_FOUND})
DEFAULT_STEPS = 24
# Too many events at one simulated millisecond: something spins without time passing.
STORM_LIMIT = 20_000


@dataclass(frozen=True, slots=True)
class Timing:
    session_ms: int = 10_000
    heartbeat_ms: int = 1_000
    rebalance_ms: int = 20_000
    metadata_max_age_ms: int = 5_000
    consumer_session_ms: int = 10_000
    consumer_heartbeat_ms: int = 1_000
    # After the last fault, the group must be quiet within this much simulated time.
    liveness_ms: int = 120_000


@dataclass
class GroupWatch:
    """What the world tracks of one group: its invariants' memory and its last seen state."""

    group_id: str
    offsets: OffsetWatch
    fencing: CommitFencing
    last_key: tuple[object, ...] = ()
    last_type: str = "none"  # the type the group last had (classic or consumer)
    seen_log: tuple[int, int, bool] = (-1, -1, False)


class World(BrokerObserver):
    def __init__(
        self,
        seed: int,
        protocol: str,
        actions: list[Action],
        setup: Setup,
        plant: Plant | None = None,
        timing: Timing | None = None,
        trace_limit: int | None = 400,
        groups: int = 1,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}")
        self.seed = seed
        self.protocol = protocol
        self.actions = actions
        self.setup = setup
        self.plant = plant
        self.timing = timing or Timing()
        # Several groups share the coordinator, the topics and the offsets partition; slot s
        # belongs to group s % groups. Probes and conversions use the first group.
        self.group_ids = ["sim-group"] + [f"sim-group-{i}" for i in range(1, groups)]
        self.group_id = self.group_ids[0]
        self.watches = {g: GroupWatch(g, OffsetWatch(g), CommitFencing(g)) for g in self.group_ids}
        self.profile = "default"
        self.queue = EventQueue()
        self.network = Network(self.queue, seed)
        self.topics = Topics(dict(setup.topics))
        self.coverage = Coverage()
        self.violations: list[Violation] = []
        # trace_limit 0: no trace at all (batch runs); a failing history is simulated
        # again with its trace (see ``simulate``), which yields the same history.
        self.tracing = trace_limit != 0
        self.trace: deque[str] | list[str] = [] if trace_limit is None else deque(maxlen=trace_limit)
        self._digest = hashlib.blake2b(digest_size=8)
        self._member_ids = itertools.count(1)
        self._touched: list[SimMember] = []
        t = self.timing
        self.config = CoordinatorConfig(
            offsets_topic_num_partitions=1,
            # Online migration of a group with members (KIP-848, on main since this round)
            # is not simulated yet: the probes expect such a group to refuse the other
            # protocol. Empty groups still change type.
            consumer_group_migration_policy=MigrationPolicy.DISABLED,
            consumer_group_session_timeout_ms=t.consumer_session_ms,
            consumer_group_heartbeat_interval_ms=t.consumer_heartbeat_ms,
            consumer_group_reconciling_heartbeat_interval_ms=min(setup.reconciling_interval_ms, t.consumer_heartbeat_ms),
        )
        self.slots: dict[int, SimMember | None] = {}
        self.incarnations: dict[int, int] = {}
        self.members: list[SimMember] = []
        self.faults_until = max((a.at_ms for a in actions), default=0)
        self.broker = SimBroker(
            self.queue,
            self.network,
            self._coordinator,
            random.Random(f"{seed}/broker"),
            self,
            None if plant is None else plant.replay_filter,
        )
        self._seen_activity = -1
        self._last_held: dict[str, frozenset[tuple[str, int]]] = {}
        self._last_member_state: dict[str, enum.Enum] = {}
        self._last_identity: dict[str, tuple[object, ...]] = {}
        self.acked_unwritten: list[str] = []
        self.mixed = False  # a member of the other protocol got into the group once
        # The API a member of the other protocol joins with (see probes.py).
        self.foreign_api = "consumer_group_heartbeat" if protocol == "classic" else "join_group"
        # Full traces (replays) show every commit and its fate; batch runs skip the text.
        self.trace_commits = trace_limit is None

    # ------------------------------------------------------------ construction helpers

    def _coordinator(self, timer: ManualTimer) -> GroupCoordinator:
        coordinator = GroupCoordinator(
            self.config,
            timer=timer,
            # Ids keep counting across restarts: a real broker's uuids never repeat.
            member_id_factory=lambda prefix: f"{prefix}-{next(self._member_ids)}",
            topics=self.topics.image,
        )
        if self.plant is not None and self.plant.wrap is not None:
            self.plant.wrap(coordinator)
        return coordinator

    def group_of(self, slot: int) -> str:
        return self.group_ids[slot % len(self.group_ids)]

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        return {t: self.topics.counts[t] for t in topics if t in self.topics.counts}

    def _start_member(self, slot: int, topics: tuple[str, ...]) -> None:
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

    def violate(self, kind: str, message: str) -> None:
        self.violations.append(Violation(kind, message, self.queue.now_ms))
        self.note(f"!! VIOLATION {kind}: {message}")

    def note(self, text: str) -> None:
        if not self.tracing:
            return
        line = f"{self.queue.now_ms:>8} ms  {text}"
        self.trace.append(line)
        self._digest.update(line.encode())

    # ------------------------------------------------------------ actions

    def _do(self, action: Action) -> None:
        self.coverage.action(action.kind)
        for m in self.members:
            self.touch(m)
        kind, slot = action.kind, action.slot
        member = self.slots.get(slot) if slot >= 0 else None
        now = self.queue.now_ms
        if kind == "join":
            if member is None:
                self._start_member(slot, action.topics)
        elif kind == "leave" and member is not None:
            member.leave()
            self.slots[slot] = None
        elif kind == "crash" and member is not None:
            member.crash()
            self.slots[slot] = None
        elif kind == "pause" and member is not None:
            member.pause(action.duration_ms)
            self.faults_until = max(self.faults_until, now + action.duration_ms)
        elif kind == "restart" and member is not None:
            member.crash()
            self.slots[slot] = None
            topics = member.subscription

            def back() -> None:
                if self.slots.get(slot) is None:
                    self._start_member(slot, topics)

            self.queue.after(action.duration_ms, ("slot ", slot, " restarts"), back)
            self.faults_until = max(self.faults_until, now + action.duration_ms)
        elif kind == "subscribe" and member is not None:
            member.subscribe(list(action.topics))
        elif kind == "add_partitions":
            self.topics.add_partitions(action.topics[0], action.extra)
        elif kind == "coordinator_restart":
            self.broker.restart(action.duration_ms, action.extra)
            self.faults_until = max(self.faults_until, now + action.duration_ms + action.extra)
        elif kind == "foreign_join":
            send_probe(self, action.extra, action.topics)
        elif kind == "create_topic":
            self.topics.create(action.topics[0], action.extra)
        elif kind == "delete_topic":
            self.topics.delete(action.topics[0])
        elif kind == "restart_after_append":
            # The coordinator crashes right after its next append, before the answer leaves.
            self.broker.restart_after_append = (action.duration_ms, action.extra)
            self.faults_until = max(self.faults_until, now + 10_000 + action.duration_ms + action.extra)
        elif kind == "append_failures":
            code = ErrorCode.NOT_COORDINATOR if action.extra else ErrorCode.KAFKA_STORAGE_ERROR
            self.broker.fail_appends(action.duration_ms, code)
            self.faults_until = max(self.faults_until, now + action.duration_ms)
        elif kind == "disconnect" and member is not None:
            member.drop_connection()
        elif kind == "convert":
            convert_when_empty(self, action.extra, action.duration_ms)

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
            self._start_member(slot, topics)

    def extend_faults(self, until_ms: int) -> None:
        self.faults_until = max(self.faults_until, until_ms)

    # ------------------------------------------------------------ broker observer

    def request_started(self, api: str, request: Any) -> object:
        if api == self.foreign_api:
            if getattr(request, "member_epoch", 0) < 0:
                return None  # a probe leaving
            return ("probe", group_has_members(self.broker.coordinator, self.group_id, self.protocol))
        if api != "offset_commit":
            return None
        watch = self.watches.get(request.group_id)
        if watch is None:
            return None
        watch.fencing.observe(self.broker.coordinator)
        generation = request.generation_id_or_member_epoch
        return generation >= 0 and watch.fencing.is_fenced(request.member_id, generation)

    def answered(self, origin: Origin, response: Any, append_error: int) -> None:
        note = origin.note
        if isinstance(note, tuple) and note[0] == "probe":
            code = response.error_code
            if code != REFUSAL[origin.api] and not (note[1] and code == ErrorCode.MEMBER_ID_REQUIRED):
                self.mixed = True
            if self.tracing:
                self.note(f"   {origin.api} of {origin.conn.owner} (other protocol) answered {error_name(response.error_code)}")
            problem = check_answer(origin.api, bool(note[1]), response)
            if problem:
                self.violate("mixed-group", problem)
            return
        api_name = API_NAMES.get(origin.api, origin.api)
        for code in _answer_codes(origin.api, response):
            self.coverage.error(api_name, code)
        if append_error and not getattr(response, "error_code", 0):
            # Success answered for a change the log refused: remembered for the diagnosis.
            self.acked_unwritten.append(f"{origin.api} from {origin.conn.owner} at {self.queue.now_ms} ms")
            self.note(f"   {origin.api} of {origin.conn.owner} answered OK though its records failed to append")
        if origin.api == "offset_commit" and self.trace_commits:
            req = origin.request
            sent = {(t.name, p.partition_index): p.committed_offset for t in req.topics for p in t.partitions}
            codes = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
            self.note(
                f"   commit {req.member_id}@{req.generation_id_or_member_epoch}: "
                + ", ".join(f"{tp[0]}-{tp[1]}={off}{'' if not codes.get(tp) else ' refused'}" for tp, off in sorted(sent.items()))
            )
        if origin.api == "offset_commit" and origin.note:
            accepted = [
                (t.name, p.partition_index) for t in response.topics for p in t.partitions if not p.error_code
            ]
            if accepted:
                req = origin.request
                self.violate(
                    "fenced-commit",
                    f"commit from {req.member_id} with stale generation/epoch "
                    f"{req.generation_id_or_member_epoch} accepted for {accepted}",
                )

    def restarted(self, old: GroupCoordinator, new: GroupCoordinator) -> None:
        self.note(f"coordinator replayed {len(self.broker.log)} records")
        for watch in self.watches.values():
            before = durable_view(old, watch.group_id)
            if watch.group_id in self.broker.unwritten_classic:
                before["classic"] = "unsettled"  # its latest record failed to append
            problem = compare_views(before, durable_view(new, watch.group_id))
            if problem:
                self.violate("replay", self._in_group(watch.group_id, problem))
            watch.fencing.after_restart(new)

    # ------------------------------------------------------------ observing and checking

    def touch(self, member: SimMember) -> None:
        """``member`` runs code now: look at it after this step (nobody else changes it)."""
        if not member.touched:
            member.touched = True
            self._touched.append(member)

    def _observe_and_check(self) -> None:
        """One pass after each step: trace notes and coverage for what changed, then the
        safety invariants. Only members that ran code in the step are looked at (a member's
        state changes only in its own callbacks and in the world's actions, which touch it);
        coordinator-side work is skipped when the coordinator did not run."""
        touched = self._touched
        broker = self.broker
        if not touched and broker.activity == self._seen_activity:
            return  # nobody ran and the coordinator did not: nothing to look at
        self._touched = []
        someone_gone = False
        for m in touched:
            m.touched = False
            someone_gone = someone_gone or m.gone
        if someone_gone:
            for m in self.members:
                if m.gone and m.label in self._last_held and self._last_held.pop(m.label):
                    self.note(f"   {m.label} holds []")
            self.members = [m for m in self.members if not m.gone]
        # Ownership can only break when what someone holds (or, classic, the generation
        # it holds it in) changed, or (consumer protocol) the coordinator's members did.
        changed: set[str] = set()  # groups whose members' holdings or identities changed
        for m in touched:
            if m.gone:
                continue
            now_held = m.held()
            if self._last_held.get(m.label) != now_held:
                self._last_held[m.label] = frozenset(now_held)
                if self.tracing:
                    self.note(f"   {m.label} holds {sorted(now_held)}")
                changed.add(m.group_id)
            if isinstance(m, ClassicMember):
                core = m.core
                state = core.state
                before = self._last_member_state.get(m.label)
                if before is not state:
                    self._last_member_state[m.label] = state
                    self.coverage.member_state("classic", state.value)
                    if before is not None:
                        self.coverage.transition("classic-member", before, state)
                ident: tuple[object, ...] = (state, core.member_id, core.generation_id)
                if self._last_identity.get(m.label) != ident:
                    self._last_identity[m.label] = ident
                    if self.tracing:
                        self.note(f"   {m.label} is {state.value} as {core.member_id or '-'} in generation {core.generation_id}")
                    changed.add(m.group_id)
            elif isinstance(m, ConsumerMember):
                phase = m.core.phase
                # A core starts unjoined (and joins within the step that starts it).
                before = self._last_member_state.get(m.label, Phase.UNJOINED)
                if before is not phase:
                    self._last_member_state[m.label] = phase
                    self.coverage.transition("consumer-client", before, phase)
                ident = (m.member_id, m.epoch)
                if self._last_identity.get(m.label) != ident:
                    self._last_identity[m.label] = ident
                    if self.tracing:
                        self.note(f"   {m.label} at epoch {m.epoch}")
        served = broker.activity != self._seen_activity
        if served:
            self._seen_activity = broker.activity
            for watch in self.watches.values():
                # Consumer protocol: the coordinator may also have fenced (or, replayed,
                # restored) a holder; every such change moves the group's epoch or size.
                if self._observe_group(broker.coordinator, watch) and self.protocol == "consumer":
                    changed.add(watch.group_id)
        for group_id in sorted(changed):
            members = self.members if len(self.group_ids) == 1 else [m for m in self.members if m.group_id == group_id]
            if self.protocol == "classic":
                problem, zombies = classic_ownership(members)
            else:
                problem, zombies = consumer_ownership(members, broker.coordinator, group_id)
            self.coverage.zombie_overlaps += zombies
            if problem:
                self.violate("ownership", self._in_group(group_id, problem))
        if not served or not broker.up:
            return
        coordinator = broker.coordinator
        for watch in self.watches.values():
            log_mark = (broker.incarnation, broker.offset_writes, coordinator.is_group_loading(watch.group_id))
            if log_mark != watch.seen_log:
                # Committed offsets change only with an offset record written (or a replay; the
                # check waits for the load to finish).
                watch.seen_log = log_mark
                problem = watch.offsets.check(coordinator)
                if problem:
                    self.violate("offsets", self._in_group(watch.group_id, problem))
            watch.fencing.observe(coordinator)

    def _in_group(self, group_id: str, text: str) -> str:
        return text if len(self.group_ids) == 1 else f"{group_id}: {text}"

    def _observe_group(self, coordinator: GroupCoordinator, watch: GroupWatch) -> bool:
        """Note and cover a group's state; True when it (epoch, size, state) changed."""
        classic = coordinator.group(watch.group_id)
        group = coordinator.consumer_group(watch.group_id)
        key: tuple[object, ...]
        if classic is not None:
            key = ("classic", classic.state.value, classic.generation_id, len(classic.members))
        elif group is not None:
            key = ("consumer", group.state.value, group.group_epoch, group.target_assignment_epoch, len(group.members))
            for m in group.members.values():
                name = "cg:" + m.member_id
                before = self._last_member_state.get(name)
                if before is not m.state:
                    self._last_member_state[name] = m.state
                    self.coverage.member_state("coordinator", m.state.name)
                    if before is not None:
                        self.coverage.transition("consumer-member", before, m.state)
        else:
            key = ("none",)
        last = watch.last_key
        if key != last:
            if key[:2] != last[:2] and len(key) > 1:
                self.coverage.group_state(str(key[0]), str(key[1]))
                if key[0] == "consumer" and last[:1] == ("consumer",):
                    self.coverage.transition("consumer-group", last[1], key[1])
                if key[0] != "none" and watch.last_type not in ("none", key[0]):
                    self.coverage.transition("group-type", watch.last_type, key[0])
                if key[0] != "none":
                    watch.last_type = str(key[0])
            watch.last_key = key
            if self.tracing:
                named = "" if len(self.group_ids) == 1 else f" {watch.group_id}"
                self.note(f"   group{named}: {' '.join(map(str, key))}")
            return True
        return False

    def _quiet_problems(self) -> list[str]:
        coordinator = self.broker.coordinator
        if not self.broker.up or any(coordinator.is_group_loading(g) for g in self.group_ids):
            return ["coordinator not serving"]
        members = live(self.members)
        if any(m.paused for m in members):
            return ["a member is paused"]
        check = classic_quiet_problems if self.protocol == "classic" else consumer_quiet_problems
        if len(self.group_ids) == 1:
            return check(coordinator, self.group_id, members, self.topics)
        problems = []
        for group_id in self.group_ids:
            mine = [m for m in members if m.group_id == group_id]
            problems += [f"{group_id}: {p}" for p in check(coordinator, group_id, mine, self.topics)]
        return problems

    # ------------------------------------------------------------ running

    def run(self, steps: int, plant_name: str | None) -> History:
        with self._watching_classic_transitions():
            return self._run(steps, plant_name)

    @contextlib.contextmanager
    def _watching_classic_transitions(self) -> Iterator[None]:
        """Count every classic group transition as the coordinator takes it (between steps
        a group may pass through a state unseen). Observation only: the method still runs,
        and still raises on a move outside ``VALID_PREVIOUS_STATES``."""
        original = ClassicGroup.transition_to
        coverage = self.coverage

        def transition_to(self: ClassicGroup, target: GroupState, now_ms: int) -> None:
            before = self.state
            original(self, target, now_ms)
            coverage.transition("classic-group", before, target)

        ClassicGroup.transition_to = transition_to  # type: ignore[method-assign]
        try:
            yield
        finally:
            ClassicGroup.transition_to = original  # type: ignore[method-assign]

    def _run(self, steps: int, plant_name: str | None) -> History:
        for action in self.actions:
            self.queue.at(action.at_ms, ("action ", action.describe()), functools.partial(self._do, action))
        history = History(self.seed, self.protocol, steps, plant_name, list(self.actions), profile=self.profile)
        events = 0
        same_ms, last_ms = 0, -1
        next_quiet_check = 0
        problems: list[str] = []
        while not self.violations:
            upcoming = self.queue.next_time()
            now = self.queue.now_ms
            if upcoming is None or upcoming > self.faults_until:
                # Nothing changes until the next event: judge quietness on the state as it is.
                if now >= next_quiet_check or upcoming is None or upcoming > now + 50:
                    next_quiet_check = now + 50
                    problems = self._quiet_problems()
                    if not problems:
                        history.quiet_at_ms = max(now, self.faults_until)
                        self.note("quiet: every member settled, every subscribed partition owned")
                        break
                deadline = self.faults_until + self.timing.liveness_ms
                if upcoming is None or upcoming > deadline:
                    self.queue.advance_to(deadline)
                    self.violate("liveness", f"not quiet {self.timing.liveness_ms} ms after the faults: {problems}")
                    break
            event = self.queue.pop()
            if event is None:
                break
            now = self.queue.now_ms
            if now == last_ms:
                same_ms += 1
                if same_ms > STORM_LIMIT:
                    self.violate("storm", f"more than {STORM_LIMIT} events at {now} ms (last: {event.text})")
                    break
            else:
                same_ms, last_ms = 0, now
            events += 1
            if self.tracing:
                text = event.text
                if not text.endswith("tick"):
                    self.note(text)
            try:
                event.action()
            except Exception as exc:  # the real code raised: a finding in itself
                self.violate("exception", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                break
            self._observe_and_check()
        history.violations = list(self.violations)
        if self.violations:
            history.diagnosis = diagnose(self)
        history.events = events
        history.sim_ms = self.queue.now_ms
        history.trace = list(self.trace)
        history.coverage = self.coverage
        history.digest = self._digest.hexdigest() if self.tracing else ""
        return history


def _answer_codes(api: str, response: Any) -> Iterable[int]:
    """The distinct error codes in one answer: top level, and per group, member or partition."""
    codes = {getattr(response, "error_code", 0)}
    if api == "offset_commit":
        codes.update(p.error_code for t in response.topics for p in t.partitions)
    elif api == "offset_fetch":
        for g in response.groups:
            codes.add(g.error_code)
            codes.update(p.error_code for t in g.topics for p in t.partitions)
    elif api == "leave_group":
        codes.update(m.error_code for m in response.members)
    codes.discard(0)
    return sorted(codes)


def generate(
    seed: int, steps: int = DEFAULT_STEPS, timing: Timing | None = None, profile: str = "default"
) -> tuple[Setup, list[Action]]:
    setup = draw_setup(seed)
    return setup, draw_actions(seed, setup, steps, (timing or Timing()).session_ms, profile)


def simulate(
    seed: int,
    protocol: str,
    steps: int = DEFAULT_STEPS,
    *,
    plant: str | None = None,
    keep: list[int] | None = None,
    trace_limit: int | None = 400,
    timing: Timing | None = None,
    profile: str = "default",
) -> History:
    """Run one history. ``keep``: indices of the drawn actions to run (None: all of them);
    ``profile``: the workload's mix of actions (``workload.PROFILES``).

    ``trace_limit``: None keeps the whole trace (and the digest) of every history; N > 0
    the last N lines of a failing one only: the history runs without a trace, and if it
    fails it runs again with one (same seed, same history: it is a pure function of its
    arguments), so passing histories cost no formatting; 0 never keeps a trace."""
    if trace_limit is not None and trace_limit > 0:
        quick = _simulate(seed, protocol, steps, plant, keep, 0, timing, profile)
        if quick.ok:
            return quick
        traced = _simulate(seed, protocol, steps, plant, keep, trace_limit, timing, profile)
        if [v.kind for v in traced.violations] != [v.kind for v in quick.violations] or traced.events != quick.events:
            raise AssertionError(f"seed {seed} ({protocol}) ran differently with its trace: not deterministic")
        return traced
    return _simulate(seed, protocol, steps, plant, keep, trace_limit, timing, profile)


def _simulate(
    seed: int,
    protocol: str,
    steps: int,
    plant: str | None,
    keep: list[int] | None,
    trace_limit: int | None,
    timing: Timing | None,
    profile: str,
) -> History:
    setup, actions = generate(seed, steps, timing, profile)
    if keep is not None:
        actions = [actions[i] for i in keep]
    planted = None
    if plant is not None:
        planted = PLANTS[plant]
        if protocol not in planted.protocols:
            raise ValueError(f"plant {plant!r} applies to {planted.protocols}, not {protocol!r}")
    world = World(seed, protocol, actions, setup, planted, timing, trace_limit, GROUPS.get(profile, 1))
    world.profile = profile
    if planted is None:
        return world.run(steps, None)
    with planted.installed():
        return world.run(steps, plant)


__all__ = ["DEFAULT_STEPS", "PROTOCOLS", "ErrorCode", "Timing", "World", "generate", "simulate"]
