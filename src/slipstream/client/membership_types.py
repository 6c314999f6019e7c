"""What both group members (classic and consumer protocol) share: their state, the
generation commits carry, and the outcome of a response (what the adapter does next)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .assignors import TopicPartition

Clock = Callable[[], float]
"""Seconds on a monotonic clock; the adapters take one so tests can pass a manual one."""


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    """Not in the group (before the first join, or after a reset)."""
    PREPARING_REBALANCE = "preparing-rebalance"
    """JoinGroup sent, no answer yet."""
    COMPLETING_REBALANCE = "completing-rebalance"
    """Joined; waiting for the SyncGroup answer (the assignment)."""
    STABLE = "stable"
    """Has an assignment for the current generation and heartbeats."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation of the group as this member saw it: the "session" of sarama."""

    generation_id: int
    member_id: str
    protocol_name: str | None
    leader_id: str
    assignment: tuple[TopicPartition, ...] = ()
    """Every partition this member owns in this generation (sorted)."""
    group_instance_id: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id and bool(self.member_id)


class Action(enum.Enum):
    OK = "ok"
    REJOIN = "rejoin"
    """(Re)join the group at once."""
    REDISCOVER = "rediscover"
    """Forget the coordinator, back off, find it again."""
    BACKOFF = "backoff"
    """Retry after a backoff."""
    FATAL = "fatal"
    IGNORE = "ignore"
    """A stale answer (for an older generation): nothing to do."""


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Action
    error: int = ErrorCode.NONE
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.action is Action.OK


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """What to tell the application before JoinGroup: ``kind`` is "lost", "revoked" or ""."""

    kind: str
    partitions: tuple[TopicPartition, ...] = ()
