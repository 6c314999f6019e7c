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
    durable_view,
    live,
)
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
        if not touched and broker.activity == self._seen_activity:
            return  # nobody ran and the coordinator did not: nothing to look at
        world.touched_members = []
        someone_gone = False
        for m in touched:
            m.touched = False
            someone_gone = someone_gone or m.gone
        if someone_gone:
            for m in world.members:
                if m.gone and m.label in self._last_held and self._last_held.pop(m.label):
                    world.note(f"   {m.label} holds []")
            world.members = [m for m in world.members if not m.gone]
        # Ownership can only break when what someone holds (or, classic, the generation
        # it holds it in) changed, or (consumer protocol) the coordinator's members did.
        changed: set[str] = set()  # groups whose members' holdings or identities changed
        for m in touched:
            if m.gone:
                continue
            now_held = m.held()
            if self._last_held.get(m.label) != now_held:
                self._last_held[m.label] = frozenset(now_held)
                if world.tracing:
                    world.note(f"   {m.label} holds {sorted(now_held)}")
                changed.add(m.group_id)
            if isinstance(m, ClassicMember):
                core = m.core
                state = core.state
                before = self._last_member_state.get(m.label)
                if before is not state:
                    self._last_member_state[m.label] = state
                    world.coverage.member_state("classic", state.value)
                    if before is not None:
                        world.coverage.transition("classic-member", before, state)
                ident: tuple[object, ...] = (state, core.member_id, core.generation_id)
                if self._last_identity.get(m.label) != ident:
                    self._last_identity[m.label] = ident
                    if world.tracing:
                        world.note(f"   {m.label} is {state.value} as {core.member_id or '-'} in generation {core.generation_id}")
                    changed.add(m.group_id)
            elif isinstance(m, ConsumerMember):
                phase = m.core.phase
                # A core starts unjoined (and joins within the step that starts it).
                before = self._last_member_state.get(m.label, Phase.UNJOINED)
                if before is not phase:
                    self._last_member_state[m.label] = phase
                    world.coverage.transition("consumer-client", before, phase)
                ident = (m.member_id, m.epoch)
                if self._last_identity.get(m.label) != ident:
                    self._last_identity[m.label] = ident
                    if world.tracing:
                        world.note(f"   {m.label} at epoch {m.epoch}")
        served = broker.activity != self._seen_activity
        if served:
            self._seen_activity = broker.activity
            for watch in self.watches.values():
                # Consumer protocol: the coordinator may also have fenced (or, replayed,
                # restored) a holder; every such change moves the group's epoch or size.
                if self._observe_group(broker.coordinator, watch) and world.protocol == "consumer":
                    changed.add(watch.group_id)
        for group_id in sorted(changed):
            members = world.members if len(world.group_ids) == 1 else [m for m in world.members if m.group_id == group_id]
            if world.protocol == "classic":
                problem, zombies = classic_ownership(members)
            else:
                problem, zombies = consumer_ownership(members, broker.coordinator, group_id)
            world.coverage.zombie_overlaps += zombies
            if problem:
                world.violate("ownership", world.in_group(group_id, problem))
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
                    world.violate("offsets", world.in_group(watch.group_id, problem))
            watch.fencing.observe(coordinator)

    def _observe_group(self, coordinator: GroupCoordinator, watch: GroupWatch) -> bool:
        """Note and cover a group's state; True when it (epoch, size, state) changed."""
        world = self.world
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
                    world.coverage.member_state("coordinator", m.state.name)
                    if before is not None:
                        world.coverage.transition("consumer-member", before, m.state)
        else:
            key = ("none",)
        last = watch.last_key
        if key != last:
            if key[:2] != last[:2] and len(key) > 1:
                world.coverage.group_state(str(key[0]), str(key[1]))
                if key[0] == "consumer" and last[:1] == ("consumer",):
                    world.coverage.transition("consumer-group", last[1], key[1])
                if key[0] != "none" and watch.last_type not in ("none", key[0]):
                    world.coverage.transition("group-type", watch.last_type, key[0])
                if key[0] != "none":
                    watch.last_type = str(key[0])
            watch.last_key = key
            if world.tracing:
                named = "" if len(world.group_ids) == 1 else f" {watch.group_id}"
                world.note(f"   group{named}: {' '.join(map(str, key))}")
            return True
        return False

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
    elif api == "describe_groups":
        codes.update(g.error_code for g in response.groups)
    codes.discard(0)
    return sorted(codes)
