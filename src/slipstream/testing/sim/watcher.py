"""What the world watches: every step's changes, and the broker's requests and answers.

After each step the watcher notes (trace) and counts (coverage) what changed in the
members that ran and in the coordinator's groups, and checks the safety invariants on
it; as the broker serves, it checks commit fencing, the answers to members of the other
protocol, and a restarted coordinator's replay. ``quiet_problems`` is the liveness check.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...client.consumer_member_core import Phase
from ...coordinator import GroupCoordinator, GroupState
from ...coordinator.consumer import ConsumerGroup
from ...coordinator.group import ClassicGroup
from ...protocol.errors import ErrorCode
from ...protocol.errors import name as error_name
from .broker import BrokerObserver, Origin
from .classic import ClassicMember
from .consumer import ConsumerMember
from .coverage import API_NAMES
from .invariants import (
    CommitFencing,
    OffsetWatch,
    classic_ownership,
    classic_quiet_problems,
    compare_views,
    consumer_ownership,
    consumer_quiet_problems,
    credentials_of,
    durable_view,
    live,
)
from .members import SimMember
from .probes import REFUSAL, check_answer, converts_with_members, group_has_members
from .state import WorldState


@dataclass
class GroupWatch:
    """What the world tracks of one group: its invariants' memory and its last seen state."""

    group_id: str
    offsets: OffsetWatch
    fencing: CommitFencing
    last_key: tuple[object, ...] = ()
    last_type: str = "none"  # the type the group last had (classic or consumer)
    seen_log: tuple[int, int, bool] = (-1, -1, False)


class Watcher(BrokerObserver):
    def __init__(self, world: WorldState) -> None:
        self.world = world
        self.watches = {g: GroupWatch(g, OffsetWatch(g), CommitFencing(g)) for g in world.group_ids}
        self._seen_activity = -1
        self._last_held: dict[str, frozenset[tuple[str, int]]] = {}
        self._last_member_state: dict[str, enum.Enum] = {}
        self._last_identity: dict[str, tuple[object, ...]] = {}
        # The coordinator's reconciliation state of each KIP-848 member, by member id.
        self._coordinator_member_state: dict[str, enum.Enum] = {}

    # ------------------------------------------------------------ broker observer

    def request_started(self, api: str, request: Any) -> object:
        world = self.world
        if api == world.foreign_api:
            if getattr(request, "member_epoch", 0) < 0:
                return None  # a probe leaving
            return ("probe", group_has_members(world.broker.coordinator, world.group_id, world.protocol))
        if api != "offset_commit":
            return None
        watch = self.watches.get(request.group_id)
        if watch is None:
            return None
        watch.fencing.observe(world.broker.coordinator)
        generation = request.generation_id_or_member_epoch
        return generation >= 0 and watch.fencing.is_fenced(request.member_id, generation)

    def answered(self, origin: Origin, response: Any, append_error: int) -> None:
        world = self.world
        note = origin.note
        if isinstance(note, tuple) and note[0] == "probe":
            code = response.error_code
            if code != REFUSAL[origin.api] and not (note[1] and code == ErrorCode.MEMBER_ID_REQUIRED):
                world.mixed = True
            if note[1] and code == ErrorCode.NONE:
                world.coverage.action("probe:converted-group-with-members")
            if world.tracing:
                world.note(f"   {origin.api} of {origin.conn.owner} (other protocol) answered {error_name(response.error_code)}")
            must_refuse = bool(note[1]) and not converts_with_members(world.migration_policy, origin.api)
            problem = check_answer(origin.api, must_refuse, response)
            if problem:
                world.violate("mixed-group", problem)
            return
        api_name = API_NAMES.get(origin.api, origin.api)
        for code in _answer_codes(origin.api, response):
            world.coverage.error(api_name, code)
        if append_error and not getattr(response, "error_code", 0):
            # Success answered for a change the log refused: remembered for the diagnosis.
            world.acked_unwritten.append(f"{origin.api} from {origin.conn.owner} at {world.queue.now_ms} ms")
            world.note(f"   {origin.api} of {origin.conn.owner} answered OK though its records failed to append")
        if origin.api == "offset_commit" and world.trace_commits:
            req = origin.request
            sent = {(t.name, p.partition_index): p.committed_offset for t in req.topics for p in t.partitions}
            codes = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
            world.note(
                f"   commit {req.member_id}@{req.generation_id_or_member_epoch}: "
                + ", ".join(f"{tp[0]}-{tp[1]}={off}{'' if not codes.get(tp) else ' refused'}" for tp, off in sorted(sent.items()))
            )
        if origin.api == "offset_commit" and origin.note:
            accepted = [
                (t.name, p.partition_index) for t in response.topics for p in t.partitions if not p.error_code
            ]
            if accepted:
                req = origin.request
                world.violate(
                    "fenced-commit",
                    f"commit from {req.member_id} with stale generation/epoch "
                    f"{req.generation_id_or_member_epoch} accepted for {accepted}",
                )

    def restarted(self, old: GroupCoordinator, new: GroupCoordinator) -> None:
        world = self.world
        world.note(f"coordinator replayed {len(world.broker.log)} records")
        for watch in self.watches.values():
            before = durable_view(old, watch.group_id)
            if watch.group_id in world.broker.unwritten_classic:
                before["classic"] = "unsettled"  # its latest record failed to append
            problem = compare_views(before, durable_view(new, watch.group_id))
            if problem:
                world.violate("replay", world.in_group(watch.group_id, problem))
            watch.fencing.after_restart(new)

    # ------------------------------------------------------------ after every step

    def after_step(self) -> None:
        """One pass after each step: trace notes and coverage for what changed, then the
        safety invariants. Only members that ran code in the step are looked at (a member's
        state changes only in its own callbacks and in the world's actions, which touch it);
        coordinator-side work is skipped when the coordinator did not run."""
        world = self.world
        touched = world.touched_members
        broker = world.broker
        served = broker.activity != self._seen_activity
        if not touched and not served:
            return  # nobody ran and the coordinator did not: nothing to look at
        # Ownership can only break when what someone holds (or, classic, the generation
        # it holds it in) changed, or (consumer protocol) the coordinator's members did.
        changed: set[str] = set()  # groups whose members' holdings or identities changed
        if touched:
            world.touched_members = []
            self._look_at_members(touched, changed)
        # The groups as the coordinator has them now (looked up once: the checks below
        # only read them).
        coordinator = broker.coordinator
        groups: list[tuple[GroupWatch, ClassicGroup | None, ConsumerGroup | None]] = []
        if served:
            self._seen_activity = broker.activity
            consumer = world.protocol == "consumer"
            for watch in self.watches.values():
                classic = coordinator.group(watch.group_id)
                group = coordinator.consumer_group(watch.group_id)
                groups.append((watch, classic, group))
                # Consumer protocol: the coordinator may also have fenced (or, replayed,
                # restored) a holder; every such change moves the group's epoch or size.
                if self._observe_group(watch, classic, group) and consumer:
                    changed.add(watch.group_id)
        if changed:
            for group_id in sorted(changed):
                members = world.members if len(world.group_ids) == 1 else [m for m in world.members if m.group_id == group_id]
                if world.protocol == "classic":
                    problem, zombies = classic_ownership(members)
                else:
                    problem, zombies = consumer_ownership(members, coordinator, group_id)
                world.coverage.zombie_overlaps += zombies
                if problem:
                    world.violate("ownership", world.in_group(group_id, problem))
        if not served or not broker.up:
            return
        for watch, classic, group in groups:
            loading = coordinator.is_group_loading(watch.group_id)
            log_mark = (broker.incarnation, broker.offset_writes, loading)
            if log_mark != watch.seen_log:
                # Committed offsets change only with an offset record written (or a replay; the
                # check waits for the load to finish).
                watch.seen_log = log_mark
                problem = watch.offsets.check(coordinator)
                if problem:
                    world.violate("offsets", world.in_group(watch.group_id, problem))
            if not loading:
                watch.fencing.observe_credentials(credentials_of(classic, group))

    def _look_at_members(self, touched: list[SimMember], changed: set[str]) -> None:
        """Notes and coverage for the members that ran; their groups go into ``changed``
        when what they hold or who they are changed."""
        world = self.world
        tracing = world.tracing
        coverage = world.coverage
        last_held = self._last_held
        last_state = self._last_member_state
        last_identity = self._last_identity
        someone_gone = False
        for m in touched:
            m.touched = False
            someone_gone = someone_gone or m.gone
        if someone_gone:
            for m in world.members:
                if m.gone and m.label in last_held and last_held.pop(m.label):
                    world.note(f"   {m.label} holds []")
            world.members = [m for m in world.members if not m.gone]
        for m in touched:
            if m.gone:
                continue
            label = m.label
            now_held = m.held()
            if last_held.get(label) != now_held:
                last_held[label] = frozenset(now_held)
                if tracing:
                    world.note(f"   {label} holds {sorted(now_held)}")
                changed.add(m.group_id)
            if isinstance(m, ConsumerMember):
                core = m.core
                phase = core.phase
                # A core starts unjoined (and joins within the step that starts it).
                before = last_state.get(label, Phase.UNJOINED)
                if before is not phase:
                    last_state[label] = phase
                    coverage.transition("consumer-client", before, phase)
                ident: tuple[object, ...] = (core.member_id, core.member_epoch)
                if last_identity.get(label) != ident:
                    last_identity[label] = ident
                    if tracing:
                        world.note(f"   {label} at epoch {core.member_epoch}")
            elif isinstance(m, ClassicMember):
                classic_core = m.core
                state = classic_core.state
                was = last_state.get(label)
                if was is not state:
                    last_state[label] = state
                    coverage.member_state("classic", state.value)
                    if was is not None:
                        coverage.transition("classic-member", was, state)
                ident = (state, classic_core.member_id, classic_core.generation_id)
                if last_identity.get(label) != ident:
                    last_identity[label] = ident
                    if tracing:
                        world.note(
                            f"   {label} is {state.value} as {classic_core.member_id or '-'} "
                            f"in generation {classic_core.generation_id}"
                        )
                    changed.add(m.group_id)

    def _observe_group(self, watch: GroupWatch, classic: ClassicGroup | None, group: ConsumerGroup | None) -> bool:
        """Note and cover a group's state; True when it (epoch, size, state) changed."""
        world = self.world
        # The states stay enum members here (cheaper than their values); see ``_key_text``.
        key: tuple[object, ...]
        if classic is not None:
            key = ("classic", classic.state, classic.generation_id, len(classic.members))
        elif group is not None:
            key = ("consumer", group.state, group.group_epoch, group.target_assignment_epoch, len(group.members))
            states = self._coordinator_member_state
            for m in group.members.values():
                before = states.get(m.member_id)
                if before is not m.state:
                    states[m.member_id] = m.state
                    world.coverage.member_state("coordinator", m.state.name)
                    if before is not None:
                        world.coverage.transition("consumer-member", before, m.state)
        else:
            key = ("none",)
        last = watch.last_key
        if key == last:
            return False
        if key[:2] != last[:2] and len(key) > 1:
            kind = str(key[0])
            world.coverage.group_state(kind, _value(key[1]))
            if kind == "consumer" and last[:1] == ("consumer",):
                world.coverage.transition("consumer-group", last[1], key[1])
            if watch.last_type not in ("none", kind):
                world.coverage.transition("group-type", watch.last_type, kind)
            watch.last_type = kind
        watch.last_key = key
        if world.tracing:
            named = "" if len(world.group_ids) == 1 else f" {watch.group_id}"
            world.note(f"   group{named}: {' '.join(_value(part) for part in key)}")
        return True

    def quiet_problems(self) -> list[str]:
        world = self.world
        coordinator = world.broker.coordinator
        if not world.broker.up or any(coordinator.is_group_loading(g) for g in world.group_ids):
            return ["coordinator not serving"]
        members = live(world.members)
        if any(m.paused for m in members):
            return ["a member is paused"]
        check = classic_quiet_problems if world.protocol == "classic" else consumer_quiet_problems
        if len(world.group_ids) == 1:
            return check(coordinator, world.group_id, members, world.topics)
        problems = []
        for group_id in world.group_ids:
            mine = [m for m in members if m.group_id == group_id]
            problems += [f"{group_id}: {p}" for p in check(coordinator, group_id, mine, world.topics)]
        return problems

    @contextlib.contextmanager
    def classic_transitions(self) -> Iterator[None]:
        """Count every classic group transition as the coordinator takes it (between steps
        a group may pass through a state unseen). Observation only: the method still runs,
        and still raises on a move outside ``VALID_PREVIOUS_STATES``."""
        original = ClassicGroup.transition_to
        coverage = self.world.coverage

        def transition_to(self: ClassicGroup, target: GroupState, now_ms: int) -> None:
            before = self.state
            original(self, target, now_ms)
            coverage.transition("classic-group", before, target)

        ClassicGroup.transition_to = transition_to  # type: ignore[method-assign]
        try:
            yield
        finally:
            ClassicGroup.transition_to = original  # type: ignore[method-assign]


def _value(part: object) -> str:
    """A group key's part as the trace and the coverage spell it (a state: its value)."""
    return str(part.value) if isinstance(part, enum.Enum) else str(part)


# The APIs whose answers carry error codes below the top level.
_NESTED_CODES = frozenset({"offset_commit", "offset_fetch", "leave_group"})


def _answer_codes(api: str, response: Any) -> Iterable[int]:
    """The distinct error codes in one answer: top level, and per group, member or partition."""
    if api not in _NESTED_CODES:
        code = getattr(response, "error_code", 0)
        return (code,) if code else ()
    codes = {getattr(response, "error_code", 0)}
    if api == "offset_commit":
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    codes.add(p.error_code)
    elif api == "offset_fetch":
        for g in response.groups:
            codes.add(g.error_code)
            codes.update(p.error_code for t in g.topics for p in t.partitions)
    elif api == "leave_group":
        codes.update(m.error_code for m in response.members)
    elif api == "describe_groups":
        codes.update(g.error_code for g in response.groups)
    codes.discard(0)
    return sorted(codes)
