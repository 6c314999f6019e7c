"""The workload: the list of things that happen to a group, drawn from the seed up front.

Actions are plain data with their time and arguments fixed when drawn, so a history
can be replayed with any subset of them (that is what shrinking does). An action
that does not apply when its time comes (leaving an empty slot, joining a taken one)
is a no-op, which keeps every subset a valid history.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...coordinator.config import MigrationPolicy

MAX_MEMBERS = 8

KINDS = (
    "join",
    "leave",
    "crash",
    "pause",
    "restart",
    "subscribe",
    "add_partitions",
    "coordinator_restart",
    "disconnect",
    "append_failures",
    "create_topic",
    "delete_topic",
    "restart_after_append",
    "foreign_join",
    "convert",
)
# Relative weights of the actions after the initial joins, per workload profile. New kinds
# come last with weight 0 in the older profiles, so their seeds draw what they always did.
PROFILES: dict[str, tuple[int, ...]] = {
    "default": (14, 8, 6, 6, 7, 7, 4, 4, 8, 3, 0, 0, 0, 0, 0),
    # The log refusing writes often: after_append error paths and timer writes.
    "append-heavy": (14, 8, 6, 6, 7, 7, 4, 4, 8, 20, 0, 0, 0, 0, 0),
    # A changing cluster: topics created and deleted (subscriptions may name topics that
    # do not exist yet, patterns match them when they appear), and the coordinator
    # crashing right after an append, before its answer leaves; members of the other
    # group protocol trying the same group id.
    "wide": (14, 8, 6, 6, 7, 7, 4, 3, 8, 3, 5, 4, 4, 5, 0),
    # Groups changing type: all members leave, a member of the other protocol joins the empty
    # group (it converts) and leaves, the members come back (it converts back); plus the
    # default mix, restarts and failing appends around the conversions.
    "convert": (14, 8, 6, 6, 7, 7, 4, 4, 8, 3, 0, 0, 3, 3, 8),
    # The convert mix with online migration on (MIGRATION_POLICIES) and more members of the
    # other protocol trying a group that has members: a classic group with members upgrades
    # to a consumer group, and back when the probe leaves.
    "migrate": (14, 8, 6, 6, 7, 7, 4, 4, 8, 3, 0, 0, 3, 8, 4),
    # Three groups on one coordinator (see GROUPS), with the default mix.
    "multi": (14, 8, 6, 6, 7, 7, 4, 4, 8, 3, 0, 0, 0, 0, 0),
}
# Groups per world, by profile (1 unless listed): members of slot s join group s % n; the
# groups share the coordinator, the topics and the offsets partition.
GROUPS: dict[str, int] = {"multi": 3}
# ``group.consumer.migration.policy`` per profile (DISABLED unless listed): the older
# profiles expect a group with members to refuse the other protocol (probes.py).
MIGRATION_POLICIES: dict[str, MigrationPolicy] = {"migrate": MigrationPolicy.BIDIRECTIONAL}
# Names a "wide" history may create (t0..t2 exist at the start).
WIDE_TOPICS = ("t0", "t1", "t2", "t3", "t4")


@dataclass(frozen=True, slots=True)
class Action:
    at_ms: int
    kind: str
    slot: int = -1
    topics: tuple[str, ...] = ()
    duration_ms: int = 0
    extra: int = 0

    def describe(self) -> str:
        parts = [self.kind]
        if self.slot >= 0:
            parts.append(f"slot={self.slot}")
        if self.topics:
            parts.append(f"topics={','.join(self.topics)}")
        if self.duration_ms:
            parts.append(f"for={self.duration_ms}ms")
        if self.extra:
            parts.append(f"n={self.extra}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Setup:
    """Per-history choices that are not actions: topics, static slots, assignors."""

    topics: tuple[tuple[str, int], ...]
    static_slots: frozenset[int]
    assignors: tuple[str, ...]
    homogeneous: bool
    # Consumer protocol only: how members subscribe and which assignor they ask for.
    regex: bool = False
    server_assignor: str | None = None
    # The coordinator's heartbeat interval while a consumer group changes (its setting
    # consumer_group_reconciling_heartbeat_interval_ms; capped by the regular interval).
    reconciling_interval_ms: int = 200



@dataclass(frozen=True, slots=True)
class Timing:
    """The timeouts of one history (the same for every seed unless a caller picks others)."""

    session_ms: int = 10_000
    heartbeat_ms: int = 1_000
    rebalance_ms: int = 20_000
    metadata_max_age_ms: int = 5_000
    consumer_session_ms: int = 10_000
    consumer_heartbeat_ms: int = 1_000
    # After the last fault, the group must be quiet within this much simulated time.
    liveness_ms: int = 120_000


_ASSIGNOR_CHOICES: tuple[tuple[str, ...], ...] = (
    ("range", "cooperative-sticky"),
    ("cooperative-sticky",),
    ("roundrobin",),
    ("sticky",),
    ("range",),
)


def draw_setup(seed: int) -> Setup:
    rng = random.Random(f"{seed}/setup")
    topics = tuple((f"t{i}", 1 + rng.randrange(6)) for i in range(3))
    static = frozenset(s for s in range(MAX_MEMBERS) if rng.random() < 0.35)
    assignors = rng.choice(_ASSIGNOR_CHOICES)
    homogeneous = rng.random() < 0.6
    rng.random()  # was: "lean" heartbeats; kept so older seeds keep their setups
    return Setup(
        topics,
        static,
        assignors,
        homogeneous,
        regex=rng.random() < 0.3,
        server_assignor=rng.choice((None, None, "uniform", "range")),
        reconciling_interval_ms=rng.choice((200, 500, 1_000)),
    )


def _subscription(rng: random.Random, setup: Setup, wide: bool = False) -> tuple[str, ...]:
    names = list(WIDE_TOPICS) if wide else [n for n, _ in setup.topics]
    if setup.homogeneous:
        return tuple(names[:2])
    picked = tuple(n for n in names if rng.random() < 0.5)
    return picked or (rng.choice(names),)


def draw_actions(seed: int, setup: Setup, steps: int, session_ms: int, profile: str = "default") -> list[Action]:
    """The history's actions. A rough model of which slots are taken steers member
    actions to members that exist and joins to free slots (the run itself may differ:
    a member can die of a fatal error; then the action is a no-op)."""
    rng = random.Random(f"{seed}/workload")
    wide = profile == "wide"
    existing = {n for n, _ in setup.topics}
    actions: list[Action] = []
    initial = 1 + rng.randrange(MAX_MEMBERS)
    taken: set[int] = set()
    for slot in range(initial):
        actions.append(Action(rng.randrange(2_000), "join", slot, _subscription(rng, setup, wide)))
        taken.add(slot)
    actions.sort(key=lambda a: a.at_ms)
    names = [n for n, _ in setup.topics]
    t = 3_000
    for _ in range(steps):
        t += 200 + rng.randrange(4_000)
        kind = rng.choices(KINDS, PROFILES[profile])[0]
        free = sorted(set(range(MAX_MEMBERS)) - taken)
        if kind == "join" and not free:
            kind = "subscribe"
        if kind not in ("join", "add_partitions", "coordinator_restart", "append_failures") and not taken:
            kind = "join"
        if kind == "join":
            slot = rng.choice(free)
            taken.add(slot)
            actions.append(Action(t, kind, slot, _subscription(rng, setup, wide)))
            continue
        if kind == "create_topic":
            missing = [n for n in WIDE_TOPICS if n not in existing]
            if missing:
                name = rng.choice(missing)
                existing.add(name)
                actions.append(Action(t, kind, topics=(name,), extra=1 + rng.randrange(5)))
            continue
        if kind == "delete_topic":
            if len(existing) > 1:
                name = rng.choice(sorted(existing))
                existing.discard(name)
                actions.append(Action(t, kind, topics=(name,)))
            continue
        if kind == "foreign_join":
            actions.append(Action(t, kind, topics=_subscription(rng, setup, wide), extra=len(actions)))
            continue
        if kind == "convert":
            # extra: the probe's number; duration: how long the members stay away after it.
            actions.append(Action(t, kind, duration_ms=rng.randrange(2_000), extra=len(actions)))
            continue
        if kind == "restart_after_append":
            actions.append(Action(t, kind, duration_ms=rng.randrange(3_000), extra=rng.randrange(300)))
            continue
        if kind == "add_partitions":
            actions.append(Action(t, kind, topics=(rng.choice(sorted(existing) if wide else names),), extra=1 + rng.randrange(3)))
            continue
        if kind == "append_failures":
            # extra: 0 -> KAFKA_STORAGE_ERROR, 1 -> NOT_COORDINATOR (what the broker's writes answer).
            actions.append(Action(t, kind, duration_ms=100 + rng.randrange(2_000), extra=rng.randrange(2)))
            continue
        if kind == "coordinator_restart":
            actions.append(Action(t, kind, duration_ms=rng.randrange(3_000), extra=rng.randrange(300)))
            continue
        slot = rng.choice(sorted(taken))
        if kind in ("leave", "crash"):
            taken.discard(slot)
            actions.append(Action(t, kind, slot))
        elif kind == "pause":
            # Mostly longer than the session (the member gets kicked out), sometimes just long.
            factor = rng.choice((0.3, 1.3, 1.6, 2.5))
            actions.append(Action(t, kind, slot, duration_ms=int(session_ms * factor)))
        elif kind == "restart":
            actions.append(Action(t, kind, slot, duration_ms=100 + rng.randrange(3_000)))
        elif kind == "subscribe":
            # More or fewer topics: a prefix of the topic list, or any subset.
            pool = list(WIDE_TOPICS) if wide else names
            topics = tuple(pool[: 1 + rng.randrange(len(pool))]) if setup.homogeneous else _subscription(rng, setup, wide)
            actions.append(Action(t, kind, slot, topics))
        else:
            actions.append(Action(t, kind, slot))
    return actions
