"""A small, well-behaved KIP-848 member core (sans-I/O), until the client's own exists.

The client's ``ConsumerMemberCore`` is being written on another branch; this core
stands in for it behind ``ConsumerProtocolCore`` so the real one can replace it. It
does what a correct ConsumerGroupHeartbeat client must:

- join with epoch 0, the subscription, the rebalance timeout and no partitions;
- heartbeat at the interval the last answer gave (at once after a change, to
  acknowledge a revocation quickly), always listing what it owns;
- on an assignment: give up revoked partitions at once (the driver commits them
  first), take the new ones, report the result in the next heartbeat;
- on FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: drop everything and rejoin with epoch 0
  (same member id, as KIP-1082 clients do);
- after a failed request, send every field again (the answer to a lost heartbeat may
  have carried an assignment the coordinator will not repeat otherwise);
- a lease: it never holds partitions longer than ``session timeout - 1 ms`` after the
  send time of its last heartbeat that got an answer. The coordinator's session timer
  runs from when it *processed* that heartbeat, so the member always lets go first.
  (A member with a rebalance timeout shorter than its session would need the same
  rule for it; the simulator keeps rebalance >= session.)
- leave with epoch -1 (dynamic) or -2 (static, keeps its place for a restart).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ...protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
    ConsumerGroupHeartbeatResponse,
)
from ...protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class Reaction(enum.Enum):
    OK = "ok"
    REJOIN = "rejoin"  # lost everything; heartbeat again at once with epoch 0
    BACKOFF = "backoff"  # retry after a backoff (coordinator moving, loading, instance id busy)
    FATAL = "fatal"


@dataclass(slots=True)
class Applied:
    """What one answer changed for the application."""

    reaction: Reaction
    revoked: list[TopicPartition] = field(default_factory=list)
    added: list[TopicPartition] = field(default_factory=list)
    lost: list[TopicPartition] = field(default_factory=list)
    error: int = ErrorCode.NONE


class ConsumerProtocolCore(Protocol):
    """What the simulator needs from a KIP-848 member core (the real one must offer this)."""

    member_id: str
    epoch: int
    owned: set[TopicPartition]
    subscription: tuple[str, ...]

    def subscribe(self, topics: list[str]) -> bool: ...
    def heartbeat_request(self, now_ms: int) -> ConsumerGroupHeartbeatRequest: ...
    def on_response(
        self, response: ConsumerGroupHeartbeatResponse, sent_ms: int, names: Mapping[uuid.UUID, str]
    ) -> Applied: ...
    def on_failure(self) -> None: ...
    def next_heartbeat_ms(self) -> int: ...
    def lease_expired(self, now_ms: int) -> list[TopicPartition] | None: ...
    def leave_request(self) -> ConsumerGroupHeartbeatRequest: ...


class SimConsumerCore:
    def __init__(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        topics: list[str],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        topic_ids: Mapping[str, uuid.UUID],
        *,
        lean: bool = False,
        use_regex: bool = False,
        server_assignor: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.instance_id = instance_id
        self.subscription: tuple[str, ...] = tuple(sorted(set(topics)))
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.topic_ids = topic_ids
        self.epoch = JOIN_EPOCH
        self.owned: set[TopicPartition] = set()
        self.send_full = True
        self.subscription_changed = True
        self.interval_ms = 0
        self.lease_until_ms: int | None = None
        self.acknowledge = False  # something changed: heartbeat at once
        # Lean (like the Java client): owned partitions only when they changed since the
        # last heartbeat that got through; otherwise every heartbeat lists them.
        self.lean = lean
        self.last_sent_owned: set[TopicPartition] | None = None
        # Subscribe with a regex matching exactly the subscribed names (resolved by the
        # coordinator) instead of the names themselves.
        self.use_regex = use_regex
        self.server_assignor = server_assignor

    def subscribe(self, topics: list[str]) -> bool:
        new = tuple(sorted(set(topics)))
        if new == self.subscription:
            return False
        self.subscription = new
        self.subscription_changed = True
        self.acknowledge = True
        return True

    def heartbeat_request(self, now_ms: int) -> ConsumerGroupHeartbeatRequest:
        full = self.send_full or self.epoch == JOIN_EPOCH
        owned: dict[str, list[int]] = {}
        for topic, partition in sorted(self.owned):
            owned.setdefault(topic, []).append(partition)
        send_subscription = full or self.subscription_changed
        send_owned = full or not self.lean or self.last_sent_owned != self.owned
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=list(self.subscription) if send_subscription and not self.use_regex else None,
            subscribed_topic_regex=self.regex() if send_subscription and self.use_regex else None,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=[
                ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=self.topic_ids[t], partitions=ps)
                for t, ps in owned.items()
            ]
            if send_owned
            else None,
        )
        if send_owned:
            self.last_sent_owned = set(self.owned)
        self.send_full = False
        self.subscription_changed = False
        self.acknowledge = False
        return request

    def on_response(
        self, response: ConsumerGroupHeartbeatResponse, sent_ms: int, names: Mapping[uuid.UUID, str]
    ) -> Applied:
        code = response.error_code
        if code == ErrorCode.NONE:
            self.epoch = response.member_epoch
            self.interval_ms = response.heartbeat_interval_ms
            self.lease_until_ms = sent_ms + self.session_timeout_ms - 1
            if response.assignment is None:
                return Applied(Reaction.OK)
            target = {
                (names[tp.topic_id], p)
                for tp in response.assignment.topic_partitions
                if tp.topic_id in names
                for p in tp.partitions
            }
            revoked = sorted(self.owned - target)
            added = sorted(target - self.owned)
            self.owned = target
            if revoked or added:
                self.acknowledge = True
            return Applied(Reaction.OK, revoked=revoked, added=added)
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_ID_NOT_FOUND):
            rejoining = self.epoch == JOIN_EPOCH
            lost = self._reset()
            # Fenced again on a join: the coordinator has not dropped our old self yet.
            return Applied(Reaction.BACKOFF if rejoining else Reaction.REJOIN, lost=lost, error=code)
        self.send_full = True
        self.last_sent_owned = None
        if code in (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.UNRELEASED_INSTANCE_ID,
        ):
            return Applied(Reaction.BACKOFF, error=code)
        return Applied(Reaction.FATAL, lost=self._reset(), error=code)

    def _reset(self) -> list[TopicPartition]:
        lost = sorted(self.owned)
        self.owned = set()
        self.epoch = JOIN_EPOCH
        self.send_full = True
        self.last_sent_owned = None
        self.lease_until_ms = None
        return lost

    def on_failure(self) -> None:
        self.send_full = True
        self.last_sent_owned = None

    def regex(self) -> str:
        return "|".join(self.subscription)

    def next_heartbeat_ms(self) -> int:
        return 0 if self.acknowledge or self.epoch == JOIN_EPOCH else self.interval_ms

    def lease_expired(self, now_ms: int) -> list[TopicPartition] | None:
        """None while the lease holds; else give everything up (returned) and rejoin with epoch 0."""
        if self.lease_until_ms is None or now_ms < self.lease_until_ms:
            return None
        return self._reset()

    def leave_request(self) -> ConsumerGroupHeartbeatRequest:
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        self.owned = set()
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id
        )
