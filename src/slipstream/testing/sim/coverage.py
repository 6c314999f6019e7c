"""What a run exercised: group states, transitions, member states, error codes, actions.

A simulator that never reaches a state cannot find its bugs; the bench prints this,
and what a run did *not* reach (``missing``), so a change that makes histories tamer
shows up.

Transitions are counted per state machine (``TRANSITIONS`` is the table of each):

- ``classic-group``: the coordinator's classic group, every ``transition_to`` (the table
  is the coordinator's own ``VALID_PREVIOUS_STATES``; a move outside it raises there);
- ``consumer-group``: the KIP-848 group's state, which the coordinator derives from its
  members after each request (seen between steps: a step may pass through a state);
- ``classic-member``: the client's ``MemberCore`` state, between steps;
- ``consumer-member``: the coordinator's reconciliation state of a KIP-848 member;
- ``consumer-client``: the client's ``ConsumerMemberCore`` phase.

Error codes are counted as the coordinator answers (``Watcher.answered``), per API; the
table ``ERRORS`` lists those a correct member can meet in these histories.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ...client.consumer_member_core import Phase
from ...client.membership_types import MemberState as ClientState
from ...coordinator import VALID_PREVIOUS_STATES
from ...coordinator.consumer import ConsumerGroupState
from ...coordinator.consumer.member import MemberState as CgMemberState
from ...protocol.errors import ErrorCode
from ...protocol.errors import name as error_name

Transition = tuple[str, str]


def _pairs(*pairs: tuple[object, object]) -> frozenset[Transition]:
    return frozenset((_state(a), _state(b)) for a, b in pairs)


def _state(s: object) -> str:
    value = getattr(s, "value", s)
    return getattr(s, "name", str(s)) if isinstance(value, int) else str(value)


_CG = ConsumerGroupState
_LIVE_CG = (_CG.EMPTY, _CG.ASSIGNING, _CG.RECONCILING, _CG.STABLE)
_CM = (CgMemberState.STABLE, CgMemberState.UNREVOKED_PARTITIONS, CgMemberState.UNRELEASED_PARTITIONS)

TRANSITIONS: dict[str, frozenset[Transition]] = {
    "classic-group": _pairs(*((before, after) for after, befores in VALID_PREVIOUS_STATES.items() for before in befores)),
    # Derived from the members: any live state can follow any other (a request can add a
    # member, bump the epoch and reconcile at once); Dead only once the group is deleted.
    "consumer-group": _pairs(*((a, b) for a in _LIVE_CG for b in _LIVE_CG if a is not b)),
    "classic-member": _pairs(
        (ClientState.UNJOINED, ClientState.PREPARING_REBALANCE),
        (ClientState.PREPARING_REBALANCE, ClientState.COMPLETING_REBALANCE),
        (ClientState.PREPARING_REBALANCE, ClientState.UNJOINED),
        (ClientState.COMPLETING_REBALANCE, ClientState.STABLE),
        (ClientState.COMPLETING_REBALANCE, ClientState.PREPARING_REBALANCE),
        (ClientState.COMPLETING_REBALANCE, ClientState.UNJOINED),
        (ClientState.STABLE, ClientState.PREPARING_REBALANCE),
        (ClientState.STABLE, ClientState.UNJOINED),
    ),
    "consumer-member": _pairs(*((a, b) for a in _CM for b in _CM if a is not b)),
    "consumer-client": _pairs(
        (Phase.UNJOINED, Phase.JOINING),
        (Phase.JOINING, Phase.MEMBER),
        (Phase.JOINING, Phase.FENCED),
        (Phase.MEMBER, Phase.FENCED),
        (Phase.FENCED, Phase.JOINING),
        (Phase.MEMBER, Phase.UNJOINED),
        (Phase.JOINING, Phase.UNJOINED),
    ),
    # The group's type: an empty group changes type when a member of the other protocol joins.
    "group-type": frozenset({("classic", "consumer"), ("consumer", "classic")}),
}
# The machines each protocol's histories run.
MACHINES = {
    "classic": ("classic-group", "classic-member", "group-type"),
    "consumer": ("consumer-group", "consumer-member", "consumer-client", "group-type"),
}

_E = ErrorCode
_COORDINATOR_MOVES = (_E.COORDINATOR_LOAD_IN_PROGRESS, _E.NOT_COORDINATOR)
ERRORS: dict[str, dict[str, frozenset[int]]] = {
    "classic": {
        "JoinGroup": frozenset({_E.MEMBER_ID_REQUIRED, _E.UNKNOWN_MEMBER_ID, _E.REBALANCE_IN_PROGRESS, *_COORDINATOR_MOVES}),
        "SyncGroup": frozenset({_E.UNKNOWN_MEMBER_ID, _E.ILLEGAL_GENERATION, _E.REBALANCE_IN_PROGRESS, *_COORDINATOR_MOVES}),
        "Heartbeat": frozenset({_E.UNKNOWN_MEMBER_ID, _E.ILLEGAL_GENERATION, _E.REBALANCE_IN_PROGRESS, *_COORDINATOR_MOVES}),
        "LeaveGroup": frozenset({_E.UNKNOWN_MEMBER_ID, *_COORDINATOR_MOVES}),
        "OffsetCommit": frozenset({_E.UNKNOWN_MEMBER_ID, _E.ILLEGAL_GENERATION, _E.REBALANCE_IN_PROGRESS, *_COORDINATOR_MOVES}),
        "OffsetFetch": frozenset(_COORDINATOR_MOVES),
    },
    "consumer": {
        "ConsumerGroupHeartbeat": frozenset(
            {_E.FENCED_MEMBER_EPOCH, _E.UNKNOWN_MEMBER_ID, _E.UNRELEASED_INSTANCE_ID, *_COORDINATOR_MOVES}
        ),
        "OffsetCommit": frozenset({_E.STALE_MEMBER_EPOCH, _E.UNKNOWN_MEMBER_ID, *_COORDINATOR_MOVES}),
        "OffsetFetch": frozenset({_E.STALE_MEMBER_EPOCH, _E.UNKNOWN_MEMBER_ID, *_COORDINATOR_MOVES}),
    },
}
API_NAMES = {
    "join_group": "JoinGroup",
    "sync_group": "SyncGroup",
    "heartbeat": "Heartbeat",
    "leave_group": "LeaveGroup",
    "offset_commit": "OffsetCommit",
    "offset_fetch": "OffsetFetch",
    "consumer_group_heartbeat": "ConsumerGroupHeartbeat",
    "describe_groups": "DescribeGroups",
}


@dataclass
class Coverage:
    group_states: Counter[str] = field(default_factory=Counter)
    member_states: Counter[str] = field(default_factory=Counter)
    transitions: Counter[str] = field(default_factory=Counter)  # "machine:A->B"
    errors: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    # A partition held by a live member and by a zombie of an older generation (or epoch) at
    # once. Allowed by both protocols (a zombie has not noticed yet); counted.
    zombie_overlaps: int = 0

    def group_state(self, protocol: str, state: str) -> None:
        self.group_states[f"{protocol}:{state}"] += 1

    def member_state(self, protocol: str, state: str) -> None:
        self.member_states[f"{protocol}:{state}"] += 1

    def transition(self, machine: str, before: object, after: object) -> None:
        self.transitions[f"{machine}:{_state(before)}->{_state(after)}"] += 1

    def error(self, api: str, code: int) -> None:
        if code:
            self.errors[f"{api}:{error_name(code)}"] += 1

    def action(self, kind: str) -> None:
        self.actions[kind] += 1

    def merge(self, other: Coverage) -> None:
        self.group_states.update(other.group_states)
        self.member_states.update(other.member_states)
        self.transitions.update(other.transitions)
        self.errors.update(other.errors)
        self.actions.update(other.actions)
        self.zombie_overlaps += other.zombie_overlaps

    # ------------------------------------------------------------ what was not reached

    def missing_transitions(self, protocol: str) -> list[str]:
        """Transitions of ``protocol``'s tables this coverage never saw, as "machine:A->B"."""
        return sorted(
            f"{machine}:{a}->{b}"
            for machine in MACHINES[protocol]
            for a, b in TRANSITIONS[machine]
            if not self.transitions[f"{machine}:{a}->{b}"]
        )

    def unlisted_transitions(self, protocol: str) -> list[str]:
        """Transitions seen that the tables do not list (for the client-side machines, whose
        tables are this module's model: worth a look, not a violation by themselves)."""
        listed = {f"{m}:{a}->{b}" for m in MACHINES[protocol] for a, b in TRANSITIONS[m]}
        machines = MACHINES[protocol]
        return sorted(t for t in self.transitions if t.split(":", 1)[0] in machines and t not in listed)

    def missing_errors(self, protocol: str) -> list[str]:
        return sorted(
            f"{api}:{error_name(code)}"
            for api, codes in ERRORS[protocol].items()
            for code in codes
            if not self.errors[f"{api}:{error_name(code)}"]
        )

    def render(self, protocol: str | None = None) -> str:
        def line(title: str, counter: Counter[str]) -> str:
            items = ", ".join(f"{k} x{v}" for k, v in sorted(counter.items()))
            return f"- {title}: {items or '(none)'}"

        lines = [
            line("group states", self.group_states),
            line("transitions", self.transitions),
            line("member states", self.member_states),
            line("error codes", self.errors),
            line("actions", self.actions),
            f"- steps where a zombie (classic: an older generation; consumer: a member the coordinator"
            f" fenced that has not heard yet) still held a partition its successor held (allowed: only"
            f" its commits are refused): {self.zombie_overlaps}",
        ]
        if protocol is not None:
            lines += [
                f"- transitions NOT exercised: {', '.join(self.missing_transitions(protocol)) or '(none)'}",
                f"- error codes NOT exercised: {', '.join(self.missing_errors(protocol)) or '(none)'}",
            ]
            unlisted = self.unlisted_transitions(protocol)
            if unlisted:
                lines.append(f"- transitions seen outside the tables: {', '.join(unlisted)}")
        return "\n".join(lines)
