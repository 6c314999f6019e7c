"""A group's rebalance history as a timeline a person reads: one line per event, and a
summary line per completed generation with how long it took and what it waited for.

    09:00:01.000  member c-3 left (reason: "shutting down")
    09:00:01.000  rebalance started: member c-3 left
    ...
    09:00:04.200  generation 7: 3.2 s, after member c-3 left; waited 3.0 s for member c-4
                  which never rejoined; removed at rebalance timeout

For consumer-protocol (KIP-848) groups a summary line follows the step that completes a
reconciliation: every member known from the events at the new group epoch and stable.

    09:00:05.400  epoch 4: reconciled in 1.4 s, after member c-2 joined; last to settle: c-1

Pure: events in, lines out. ``TimelineFormatter`` keeps what it needs between calls so
a follower can feed it events as they come (``feed``); ``format_timeline`` formats a
whole history at once. Times print in UTC; a line with the date comes first and
whenever the date changes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import history as ev

# Kafka clients' member ids are "<client id>-<UUID>"; a timeline keeps the UUID's first 8 hex digits.
_UUID_SUFFIX = re.compile(r"-([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def short_member_id(member_id: str) -> str:
    """``billing-1-8a8f2537-8ebe-...-fa4cd3c032db`` -> ``billing-1-8a8f2537``; other ids as they are."""
    return _UUID_SUFFIX.sub(r"-\1", member_id)


def with_short_ids(event: ev.GroupEvent) -> ev.GroupEvent:
    """The event with every member id shortened (``short_member_id``)."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if f.name in ("member_id", "replaced_member_id", "leader", "previous") and isinstance(value, str):
            changes[f.name] = short_member_id(value)
        elif f.name in ("member_ids", "changed_member_ids"):
            changes[f.name] = tuple(short_member_id(m) for m in value)
        elif f.name == "partitions" and isinstance(value, dict):
            changes[f.name] = {short_member_id(m): n for m, n in value.items()}
        elif f.name == "moves":
            changes[f.name] = tuple(
                ev.PartitionMove(
                    partition=m.partition,
                    from_member=None if m.from_member is None else short_member_id(m.from_member),
                    to_member=None if m.to_member is None else short_member_id(m.to_member),
                )
                for m in value
            )
    return dataclasses.replace(event, **changes) if changes else event


def duration(ms: int) -> str:
    """``1.2 s`` from a second up, ``40 ms`` below."""
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{ms} ms"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _names(ids: Iterable[str], word: str = "member") -> str:
    ids = list(ids)
    if not ids:
        return f"no {word}s"
    return f"{word} {ids[0]}" if len(ids) == 1 else f"{word}s {', '.join(ids)}"


@dataclass(slots=True)
class _Reconciliation:
    """A consumer group's move to a new group epoch, from the first unsettled bump."""

    started_ms: int
    epoch: int
    causes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Rebalance:
    """What the summary of the generation being formed needs."""

    started_ms: int
    cause: str
    waits: list[str] = field(default_factory=list)


class TimelineFormatter:
    def __init__(self, *, short_ids: bool = False) -> None:
        """``short_ids``: print member ids shortened (``short_member_id``)."""
        self.short_ids = short_ids
        self._day: str | None = None
        self._rebalance: _Rebalance | None = None
        # The last membership event, as the cause of a rebalance started at the same moment.
        self._trigger: tuple[int, str] | None = None
        # Consumer groups: each member's (epoch, state) as the events told it, and the
        # reconciliation under way. Members that joined before the events fed are unknown.
        self._members: dict[str, tuple[int, str]] = {}
        self._reconciliation: _Reconciliation | None = None

    def feed(self, events: Iterable[ev.GroupEvent]) -> list[str]:
        lines: list[str] = []
        for event in events:
            if self.short_ids:
                event = with_short_ids(event)
            moment = datetime.fromtimestamp(event.at_ms / 1000, UTC)
            day = moment.strftime("%Y-%m-%d")
            if day != self._day:
                self._day = day
                lines.append(f"{day} (UTC)")
            stamp = moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
            text = self._describe(event)
            if event.replayed:
                text += "  [rebuilt from __consumer_offsets]"
            lines.append(f"{stamp}  {text}")
            summary = self._summary(event)
            if summary is not None:
                lines.append(f"{stamp}  {summary}")
        return lines

    # ---------------------------------------------------------------- one event

    def _describe(self, e: ev.GroupEvent) -> str:
        if isinstance(e, ev.MemberJoined):
            how = {
                ev.JOINED_NEW: "joined",
                ev.JOINED_REJOIN: "rejoined",
                ev.JOINED_STATIC_REPLACEMENT: f"joined, replacing {e.replaced_member_id} as instance {e.instance_id}",
            }.get(e.how, e.how)
            where = ", ".join(
                part
                for part in (
                    f"instance {e.instance_id}" if e.instance_id and e.how != ev.JOINED_STATIC_REPLACEMENT else "",
                    f"client {e.client_id}" if e.client_id else "",
                    f"host {e.client_host}" if e.client_host else "",
                )
                if part
            )
            self._trigger = (e.at_ms, f"member {e.member_id} {'rejoined' if e.how == ev.JOINED_REJOIN else 'joined'}")
            if e.how == ev.JOINED_REJOIN:
                return f"member {e.member_id} {how}"  # who it is was said when it joined
            return f"member {e.member_id} {how}" + (f" ({where})" if where else "")
        if isinstance(e, ev.MemberLeft):
            why = f'reason: "{e.reason}"' if e.reason else "no reason given"
            self._trigger = (e.at_ms, f"member {e.member_id} left ({why})")
            if e.temporarily:
                return f"member {e.member_id} (instance {e.instance_id}) left for now, keeping its partitions"
            return f"member {e.member_id} left ({why})"
        if isinstance(e, ev.SessionExpired):
            if e.last_heartbeat_ms is None:
                last = "it never sent a heartbeat"
            else:
                last = f"last heartbeat {duration(e.at_ms - e.last_heartbeat_ms)} before"
            self._trigger = (e.at_ms, f"member {e.member_id}'s session expired")
            return f"member {e.member_id}'s session expired ({last}; session timeout {duration(e.session_timeout_ms)})"
        if isinstance(e, ev.RemovedAtRebalanceTimeout):
            names = _names(e.member_ids)
            if self._rebalance is not None:
                self._rebalance.waits.append(
                    f"waited {duration(e.waited_ms)} for {names} which never rejoined; removed at rebalance timeout"
                )
            return f"{names} never rejoined within {duration(e.waited_ms)}: removed at the rebalance timeout"
        if isinstance(e, ev.RemovedAtSyncDeadline):
            names = _names(e.member_ids)
            self._trigger = (e.at_ms, f"{names} never sent SyncGroup")
            return (
                f"{names} never sent SyncGroup for generation {e.generation} within {duration(e.waited_ms)}: "
                "removed at the sync deadline"
            )
        if isinstance(e, ev.MetadataChanged):
            self._trigger = (e.at_ms, f"member {e.member_id} changed its subscription")
            topics = f": {', '.join(e.topics)}" if e.topics else ""
            return f"member {e.member_id}: {e.detail or 'metadata changed'}{topics}"
        if isinstance(e, ev.RebalanceStarted):
            cause = self._cause(e)
            self._rebalance = _Rebalance(e.at_ms, cause)
            return f"rebalance started (leaving generation {e.generation}): {cause}"
        if isinstance(e, ev.ProtocolSelected):
            votes = ", ".join(f"{name} {_plural(n, 'vote')}" for name, n in e.votes.items())
            return f"  protocol {e.protocol} chosen" + (f" ({votes})" if votes else "")
        if isinstance(e, ev.LeaderElected):
            if e.previous is None or e.previous == e.member_id:
                return f"  leader: {e.member_id}"
            return f"  leader: {e.member_id} (was {e.previous})"
        if isinstance(e, ev.GenerationStarted):
            if not e.member_ids:
                return f"  generation {e.generation} started with no members: the group is empty"
            return f"  generation {e.generation} started with {_plural(len(e.member_ids), 'member')}: " + ", ".join(
                e.member_ids
            )
        if isinstance(e, ev.AssignmentSent):
            return f"  assignment sent for generation {e.generation}: {_moves(e)}"
        if isinstance(e, ev.GenerationCompleted):
            return f"  generation {e.generation} complete"
        if isinstance(e, ev.RequestFenced):
            whom = f"member {e.member_id}" + (f" (instance {e.instance_id})" if e.instance_id else "")
            gens = ""
            if e.request_generation is not None and e.current_generation is not None:
                gens = f" (it sent {e.request_generation}, the group is at {e.current_generation})"
            return f"{e.api} from {whom} fenced: {e.error}{gens}"
        if isinstance(e, ev.GroupEpochBumped):
            return f"group epoch {e.epoch}: {e.cause}"
        if isinstance(e, ev.TargetAssignmentComputed):
            who = f" for {', '.join(e.changed_member_ids)}" if e.changed_member_ids else ""
            by = f" by the {e.assignor} assignor" if e.assignor else ""
            return f"  target assignment of epoch {e.epoch} computed{by}{who}"
        if isinstance(e, ev.MemberEpochAdvanced):
            parts = []
            if e.revoking:
                parts.append(f"revoking {', '.join(e.revoking)}")
            if e.assigning:
                parts.append(f"assigning {', '.join(e.assigning)}")
            steps = f": {'; '.join(parts)}" if parts else ""
            return f"  member {e.member_id} epoch {e.from_epoch} -> {e.to_epoch} ({e.state}){steps}"
        if isinstance(e, ev.MemberFenced):
            why = {
                "left": "it left",
                "session-expired": "its session expired",
                "rebalance-timeout": "it did not revoke its partitions within its rebalance timeout",
            }.get(e.cause, e.cause)
            return f"member {e.member_id} fenced at epoch {e.epoch}: {why}"
        return e.kind

    def _cause(self, e: ev.RebalanceStarted) -> str:
        trigger = self._trigger
        self._trigger = None
        if trigger is not None and trigger[0] == e.at_ms:
            return trigger[1]
        return {
            ev.RebalanceCause.MEMBER_REJOINED: "a member rejoined",
            ev.RebalanceCause.ASSIGNMENT_WRITE_FAILED: "storing the assignment failed",
            ev.RebalanceCause.STATIC_MEMBER_REPLACED: "a static member was replaced",
        }.get(e.cause, e.reason or e.cause)

    def _summary(self, e: ev.GroupEvent) -> str | None:
        if isinstance(e, ev.GroupEpochBumped | ev.MemberEpochAdvanced | ev.MemberJoined | ev.MemberLeft | ev.MemberFenced):
            return self._reconciled(e)
        if not isinstance(e, ev.GenerationCompleted) or e.replayed:
            return None
        rebalance, self._rebalance = self._rebalance, None
        text = f"generation {e.generation}: {duration(e.duration_ms)}"
        if rebalance is not None:
            text += f", after {rebalance.cause}"
            if rebalance.waits:
                text += "; " + "; ".join(rebalance.waits)
        return text


    def _reconciled(self, e: ev.GroupEvent) -> str | None:
        """The reconciliation summary when ``e`` completes one (consumer groups only)."""
        if isinstance(e, ev.MemberJoined):
            if e.member_id not in self._members:
                self._members[e.member_id] = (0, "joining")
            return None
        if isinstance(e, ev.MemberLeft | ev.MemberFenced):
            self._members.pop(e.member_id, None)
        elif isinstance(e, ev.MemberEpochAdvanced):
            self._members[e.member_id] = (e.to_epoch, e.state)
        elif isinstance(e, ev.GroupEpochBumped):
            if self._reconciliation is None:
                self._reconciliation = _Reconciliation(e.at_ms, e.epoch)
            self._reconciliation.epoch = e.epoch
            self._reconciliation.causes.append(e.cause)
            if not self._members:
                self._reconciliation = None  # nobody left to reconcile: the group is empty
            return None
        pending = self._reconciliation
        if pending is None or not self._members:
            return None
        if any(epoch < pending.epoch or state != "stable" for epoch, state in self._members.values()):
            return None
        self._reconciliation = None
        if e.replayed:
            return None  # the records' times say when they were written, not when members settled
        text = f"epoch {pending.epoch}: reconciled in {duration(e.at_ms - pending.started_ms)}"
        if pending.causes:
            text += f", after {', '.join(pending.causes)}"
        if isinstance(e, ev.MemberEpochAdvanced) and len(self._members) > 1:
            text += f"; last to settle: {e.member_id}"
        return text


def _moves(e: ev.AssignmentSent) -> str:
    if not e.decoded:
        return "(not the consumer protocol: partitions unknown)"
    if not e.moves:
        return "no partition moved"
    gained: dict[str, list[str]] = {}
    lost: dict[str, list[str]] = {}
    handed: list[str] = []
    for m in e.moves:
        if m.from_member is not None and m.to_member is not None:
            handed.append(f"{m.partition} {m.from_member} -> {m.to_member}")
        elif m.to_member is not None:
            gained.setdefault(m.to_member, []).append(m.partition)
        elif m.from_member is not None:
            lost.setdefault(m.from_member, []).append(m.partition)
    parts = [f"{member} gets {', '.join(ps)}" for member, ps in gained.items()]
    parts += handed
    parts += [f"{', '.join(ps)} no longer assigned (was {member})" for member, ps in lost.items()]
    return "; ".join(parts)


def format_timeline(events: Iterable[ev.GroupEvent], *, short_ids: bool = False) -> list[str]:
    return TimelineFormatter(short_ids=short_ids).feed(events)
