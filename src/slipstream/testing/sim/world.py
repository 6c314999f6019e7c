"""One simulated history: the world (clock, network, broker, members), run step by step.

``simulate(seed, protocol, steps)`` is a pure function of its arguments: one seed
picks the setup, the workload and every network delay (each from its own named
random stream), the clock is simulated, nothing iterates an unordered set. Every
step runs one event, then the safety invariants (``watcher``); once the faults are
over the run waits (bounded) for the group to become quiet.
"""

from __future__ import annotations

import functools
import itertools
import random
import traceback

from ...coordinator import CoordinatorConfig, GroupCoordinator, ManualTimer
from ...coordinator.config import MigrationPolicy
from ...protocol.errors import ErrorCode
from .broker import SimBroker
from .diagnosis import diagnose
from .history import History
from .planted import PLANTS, Plant
from .probes import convert_when_empty, send_probe
from .state import PROTOCOLS, WorldState
from .watcher import Watcher
from .workload import GROUPS, MIGRATION_POLICIES, Action, Setup, Timing, draw_actions, draw_setup

DEFAULT_STEPS = 24
# Too many events at one simulated millisecond: something spins without time passing.
STORM_LIMIT = 20_000


class World(WorldState):
    """The shared state, plus the coordinator it runs, the workload's actions and the run loop."""

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
        migration_policy: MigrationPolicy = MigrationPolicy.DISABLED,
    ) -> None:
        super().__init__(seed, protocol, setup, timing or Timing(), trace_limit, groups)
        self.migration_policy = migration_policy
        self.actions = actions
        self.plant = plant
        self._member_ids = itertools.count(1)
        t = self.timing
        self.config = CoordinatorConfig(
            offsets_topic_num_partitions=1,
            # Online migration of a group with members only in the profiles that ask for it
            # (workload.MIGRATION_POLICIES); the others expect such a group to refuse the
            # other protocol. Empty groups change type under every policy.
            consumer_group_migration_policy=migration_policy,
            consumer_group_session_timeout_ms=t.consumer_session_ms,
            consumer_group_heartbeat_interval_ms=t.consumer_heartbeat_ms,
            consumer_group_reconciling_heartbeat_interval_ms=min(setup.reconciling_interval_ms, t.consumer_heartbeat_ms),
        )
        self.faults_until = max((a.at_ms for a in actions), default=0)
        self.watcher = Watcher(self)
        self.broker = SimBroker(
            self.queue,
            self.network,
            self._coordinator,
            random.Random(f"{seed}/broker"),
            self.watcher,
            None if plant is None else plant.replay_filter,
        )

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
                self.start_member(slot, action.topics)
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
                    self.start_member(slot, topics)

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

    # ------------------------------------------------------------ running

    def run(self, steps: int, plant_name: str | None) -> History:
        with self.watcher.classic_transitions():
            return self._run(steps, plant_name)

    def _run(self, steps: int, plant_name: str | None) -> History:
        for action in self.actions:
            self.queue.at(action.at_ms, ("action ", action.describe()), functools.partial(self._do, action))
        history = History(self.seed, self.protocol, steps, plant_name, list(self.actions), profile=self.profile)
        events = 0
        queue = self.queue
        after_step = self.watcher.after_step
        violations = self.violations
        tracing = self.tracing
        same_ms, last_ms = 0, -1
        next_quiet_check = 0
        problems: list[str] = []
        while not violations:
            event = queue.peek()
            now = queue.now_ms
            if event is None or event.at_ms > self.faults_until:
                upcoming = None if event is None else event.at_ms
                # Nothing changes until the next event: judge quietness on the state as it is.
                if now >= next_quiet_check or upcoming is None or upcoming > now + 50:
                    next_quiet_check = now + 50
                    problems = self.watcher.quiet_problems()
                    if not problems:
                        history.quiet_at_ms = max(now, self.faults_until)
                        self.note("quiet: every member settled, every subscribed partition owned")
                        break
                deadline = self.faults_until + self.timing.liveness_ms
                if upcoming is None or upcoming > deadline:
                    queue.advance_to(deadline)
                    self.violate("liveness", f"not quiet {self.timing.liveness_ms} ms after the faults: {problems}")
                    break
                if event is None:
                    break
            queue.pop_peeked()
            now = queue.now_ms
            if now == last_ms:
                same_ms += 1
                if same_ms > STORM_LIMIT:
                    self.violate("storm", f"more than {STORM_LIMIT} events at {now} ms (last: {event.text})")
                    break
            else:
                same_ms, last_ms = 0, now
            events += 1
            if tracing:
                text = event.text
                if not text.endswith("tick"):
                    self.note(text)
            try:
                event.action()
            except Exception as exc:  # the real code raised: a finding in itself
                self.violate("exception", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
                break
            after_step()
        history.violations = list(self.violations)
        if self.violations:
            history.diagnosis = diagnose(self)
        history.events = events
        history.sim_ms = self.queue.now_ms
        history.trace = list(self.trace)
        history.coverage = self.coverage
        history.digest = self.trace_digest.hexdigest() if self.tracing else ""
        return history


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
    policy = MIGRATION_POLICIES.get(profile, MigrationPolicy.DISABLED)
    world = World(seed, protocol, actions, setup, planted, timing, trace_limit, GROUPS.get(profile, 1), policy)
    world.profile = profile
    if planted is None:
        return world.run(steps, None)
    with planted.installed():
        return world.run(steps, plant)


__all__ = ["DEFAULT_STEPS", "PROTOCOLS", "ErrorCode", "Timing", "World", "generate", "simulate"]
