"""Rebalance history: a typed event for every decision the coordinator takes about a group.

Each event names what happened and why (a member joined, left with its reason, its
session expired, it never rejoined, a new generation started, partitions moved, a
request was fenced ...) and carries the coordinator's injected time. Handlers put
events into their ``CoordinatorResult`` (``events``); whoever carries results out
records them into a ``GroupHistory``, the bounded per-group store readers ask.

Events are made on decisions only, never on steady heartbeats or commits, so the hot
paths pay nothing. Events rebuilt from ``__consumer_offsets`` at start (the records
say which generations, members, assignments and epochs there were, not why) have
``replayed`` set; their time is the record's when it has one.

Every event turns into a JSON-able dict (``to_dict``) with its ``kind``, and back
(``event_from_dict``), so a remote reader gets the same typed events.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

DEFAULT_MAX_EVENTS = 1_000

# How a member came in.
JOINED_NEW = "new"
JOINED_REJOIN = "rejoin"
JOINED_STATIC_REPLACEMENT = "static-replacement"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEvent:
    """What every event has: the group, the coordinator's time, whether it was rebuilt from records."""

    kind: ClassVar[str] = "event"
    group_id: str
    at_ms: int
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


# ---------------------------------------------------------------- membership


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberJoined(GroupEvent):
    kind: ClassVar[str] = "member-joined"
    member_id: str
    how: str = JOINED_NEW  # JOINED_NEW, JOINED_REJOIN or JOINED_STATIC_REPLACEMENT
    instance_id: str | None = None
    replaced_member_id: str | None = None  # a static replacement: the member id it takes over from
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberLeft(GroupEvent):
    """A LeaveGroup (or a consumer-protocol leave heartbeat); ``reason`` is the client's (KIP-800)."""

    kind: ClassVar[str] = "member-left"
    member_id: str
    instance_id: str | None = None
    reason: str | None = None
    temporarily: bool = False  # a static consumer-protocol member leaving with epoch -2


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionExpired(GroupEvent):
    kind: ClassVar[str] = "session-expired"
    member_id: str
    session_timeout_ms: int
    last_heartbeat_ms: int | None = None  # None: it never heartbeated


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovedAtRebalanceTimeout(GroupEvent):
    """Members that never rejoined before the join phase ended; ``waited_ms`` since it began."""

    kind: ClassVar[str] = "removed-at-rebalance-timeout"
    member_ids: tuple[str, ...]
    waited_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovedAtSyncDeadline(GroupEvent):
    """Members that never sent SyncGroup for the generation; ``waited_ms`` since it started."""

    kind: ClassVar[str] = "removed-at-sync-deadline"
    member_ids: tuple[str, ...]
    generation: int
    waited_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataChanged(GroupEvent):
    """A member's protocols / subscription changed (classic), or its subscription (consumer)."""

    kind: ClassVar[str] = "metadata-changed"
    member_id: str
    topics: tuple[str, ...] = ()
    detail: str = ""


# ---------------------------------------------------------------- classic rebalances


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceStarted(GroupEvent):
    """The group went to PreparingRebalance; ``cause`` is one of the RebalanceCause strings."""

    kind: ClassVar[str] = "rebalance-started"
    generation: int  # the generation being left
    cause: str
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolSelected(GroupEvent):
    """The vote over the members' protocols: ``votes`` per candidate, ``protocol`` won."""

    kind: ClassVar[str] = "protocol-selected"
    protocol: str
    votes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElected(GroupEvent):
    kind: ClassVar[str] = "leader-elected"
    member_id: str
    previous: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationStarted(GroupEvent):
    kind: ClassVar[str] = "generation-started"
    generation: int
    member_ids: tuple[str, ...] = ()
    protocol: str | None = None
    leader: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationCompleted(GroupEvent):
    """The assignment is durable and handed out: the group is Stable. ``duration_ms`` from
    the start of the rebalance (PreparingRebalance) to now."""

    kind: ClassVar[str] = "generation-completed"
    generation: int
    duration_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMove:
    partition: str  # "topic-N"
    from_member: str | None
    to_member: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentSent(GroupEvent):
    """The leader's assignment, handed to the members. ``moves``: partitions that changed
    owner since the previous assignment (only when the consumer protocol's format could be
    read: ``decoded``); ``partitions`` per member after the change."""

    kind: ClassVar[str] = "assignment-sent"
    generation: int
    decoded: bool
    moves: tuple[PartitionMove, ...] = ()
    partitions: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = GroupEvent.to_dict(self)
        out["moves"] = [{"partition": m.partition, "from": m.from_member, "to": m.to_member} for m in self.moves]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFenced(GroupEvent):
    """A request refused for its generation / epoch / instance id, or because its member is no
    longer in the group (a zombie past its session): from whom, which API, why."""

    kind: ClassVar[str] = "request-fenced"
    member_id: str
    api: str
    error: str
    instance_id: str | None = None
    request_generation: int | None = None
    current_generation: int | None = None


# ---------------------------------------------------------------- consumer-protocol (KIP-848) groups


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEpochBumped(GroupEvent):
    kind: ClassVar[str] = "group-epoch-bumped"
    epoch: int
    cause: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentComputed(GroupEvent):
    kind: ClassVar[str] = "target-assignment-computed"
    epoch: int
    changed_member_ids: tuple[str, ...] = ()
    assignor: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberEpochAdvanced(GroupEvent):
    """A reconciliation step: the member's epoch and state now, what it must revoke, what it got."""

    kind: ClassVar[str] = "member-epoch-advanced"
    member_id: str
    from_epoch: int
    to_epoch: int
    state: str
    revoking: tuple[str, ...] = ()
    assigning: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberFenced(GroupEvent):
    """A consumer-protocol member taken out: ``cause`` "left", "session-expired" or "rebalance-timeout"."""

    kind: ClassVar[str] = "member-fenced"
    member_id: str
    epoch: int
    cause: str


class RebalanceCause:
    """Why a classic group went to PreparingRebalance (``RebalanceStarted.cause``)."""

    MEMBER_JOINED = "member-joined"
    MEMBER_REJOINED = "member-rejoined"  # a known member's JoinGroup (e.g. the leader's)
    METADATA_CHANGED = "metadata-changed"
    MEMBER_LEFT = "member-left"
    SESSION_EXPIRED = "session-expired"
    SYNC_DEADLINE = "sync-deadline"
    STATIC_MEMBER_REPLACED = "static-member-replaced"
    ASSIGNMENT_WRITE_FAILED = "assignment-write-failed"


EVENT_TYPES: dict[str, type[GroupEvent]] = {
    cls.kind: cls
    for cls in (
        MemberJoined, MemberLeft, SessionExpired, RemovedAtRebalanceTimeout, RemovedAtSyncDeadline,
        MetadataChanged, RebalanceStarted, ProtocolSelected, LeaderElected, GenerationStarted,
        GenerationCompleted, AssignmentSent, RequestFenced, GroupEpochBumped, TargetAssignmentComputed,
        MemberEpochAdvanced, MemberFenced,
    )
}


def event_from_dict(data: Mapping[str, Any]) -> GroupEvent:
    """The event a ``to_dict`` made; ValueError for an unknown kind or missing fields."""
    cls = EVENT_TYPES.get(str(data.get("kind")))
    if cls is None:
        raise ValueError(f"unknown group event kind {data.get('kind')!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "moves":
            value = tuple(
                PartitionMove(partition=m["partition"], from_member=m.get("from"), to_member=m.get("to"))
                for m in value
            )
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"malformed {cls.kind} event: {exc}") from None


# ---------------------------------------------------------------- the store


class _Kept:
    """One group's last events and their numbers, side by side: a deque of ints is one
    object for the garbage collector, where (seq, event) pairs were one more per event
    (10,000 members keep some 60,000 events, and every full pass walks them)."""

    __slots__ = ("events", "seqs")

    def __init__(self, max_events: int) -> None:
        self.seqs: deque[int] = deque(maxlen=max_events)
        self.events: deque[GroupEvent] = deque(maxlen=max_events)


class GroupHistory:
    """The last ``max_events`` events of every group, numbered in the order recorded;
    a group's events go with the group (``forget``, when its tombstone is replayed).

    ``seq`` numbers are shared by all groups and only grow, so a follower asks for
    what came after the last number it saw (``since``).
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        if max_events < 1:
            raise ValueError("group.history.max.events must be >= 1")
        self.max_events = max_events
        self._events: dict[str, _Kept] = {}
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    def record(self, events: Iterable[GroupEvent]) -> None:
        for event in events:
            self._seq += 1
            kept = self._events.get(event.group_id)
            if kept is None:
                kept = self._events[event.group_id] = _Kept(self.max_events)
            kept.seqs.append(self._seq)
            kept.events.append(event)

    def events(self, group_id: str, since: int = 0) -> list[tuple[int, GroupEvent]]:
        """(seq, event) of ``group_id`` with seq > ``since``, oldest first."""
        kept = self._events.get(group_id)
        if kept is None:
            return []
        return [(seq, e) for seq, e in zip(kept.seqs, kept.events, strict=True) if seq > since]

    def forget(self, group_id: str) -> None:
        """Drop a deleted group's events (the store stays bounded by the live groups)."""
        self._events.pop(group_id, None)

    def group_ids(self) -> list[str]:
        return list(self._events)

    def as_json(self, group_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The events as JSON-able dicts, each with its ``seq``."""
        return [{"seq": seq, **event.to_dict()} for seq, event in self.events(group_id, since)]
