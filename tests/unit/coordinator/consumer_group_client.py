"""Drive consumer (KIP-848) group members through ``GroupContext``, as a well-behaved client does.

``Member.beat()`` sends a ConsumerGroupHeartbeat with what the member owns and
applies the answer at once: partitions no longer assigned are released before
the next heartbeat, new ones are taken. Tests that need a slow or misbehaving
member call ``ctx.consumer_heartbeat`` with the fields they want.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from coord_context import GroupContext

from slipstream.coordinator.consumer.assignors.base import TopicMetadata
from slipstream.coordinator.topics_image import TopicsImage
from slipstream.protocol.apis.consumer_group_describe import ConsumerGroupDescribeRequest
from slipstream.protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)

REBALANCE_MS = 30_000


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, name)


def is_kafka_uuid_string(text: str) -> bool:
    """22 URL-safe base64 characters of a version 4 UUID, as Kafka's Uuid.toString() writes
    the member ids its coordinator makes in consumer groups."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text) or text.startswith("-"):
        return False
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "==")).version == 4


def set_topics(ctx: GroupContext, **partitions: int) -> None:
    """Replace the topics image: ``name=partition count``; the version moves on."""
    ctx.topics = TopicsImage.of(
        ctx.topics.version + 1, [TopicMetadata(topic_id(n), n, c) for n, c in partitions.items()]
    )


def create_topic_anew(ctx: GroupContext, name: str, partitions: int) -> None:
    """``name`` (deleted if it was there) created under a new topic id; other topics stay."""
    kept = [t for t in ctx.topics.by_name.values() if t.name != name]
    ctx.topics = TopicsImage.of(ctx.topics.version + 1, [*kept, TopicMetadata(uuid.uuid4(), name, partitions)])


def heartbeat(
    ctx: GroupContext,
    group: str,
    member_id: str,
    epoch: int,
    *,
    topics: list[str] | None = None,
    regex: str | None = None,
    owned: dict[str, list[int]] | None = None,
    instance_id: str | None = None,
    assignor: str | None = None,
    rebalance_timeout_ms: int = -1,
    version: int = 1,
    client_id: str = "client",
    connection: int = 0,
) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [
            ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=topic_id(t), partitions=ps)
            for t, ps in owned.items()
        ],
    )
    return ctx.send("consumer_group_heartbeat", request, version, client_id=client_id, connection=connection).response


def describe(ctx: GroupContext, *groups: str) -> Any:
    request = ConsumerGroupDescribeRequest(group_ids=list(groups), include_authorized_operations=False)
    return ctx.send("consumer_group_describe", request, 1).response


@dataclass
class Member:
    ctx: GroupContext
    group: str
    topics: list[str] | None = None
    regex: str | None = None
    instance_id: str | None = None
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: dict[str, set[int]] = field(default_factory=dict)
    last: Any = None
    connection: int = 0  # the broker's number of the connection it sends on (0: none)

    def join(self) -> Any:
        self.epoch = 0
        self.owned = {}
        return self._send(
            heartbeat(
                self.ctx,
                self.group,
                self.member_id,
                0,
                topics=self.topics if self.topics is not None or self.regex is not None else [],
                regex=self.regex,
                owned={},
                instance_id=self.instance_id,
                rebalance_timeout_ms=REBALANCE_MS,
                connection=self.connection,
            )
        )

    def beat(self) -> Any:
        owned = {t: sorted(ps) for t, ps in self.owned.items() if ps}
        return self._send(
            heartbeat(
                self.ctx,
                self.group,
                self.member_id,
                self.epoch,
                owned=owned,
                instance_id=self.instance_id,
                connection=self.connection,
            )
        )

    def leave(self, epoch: int = -1) -> Any:
        return heartbeat(
            self.ctx, self.group, self.member_id, epoch, instance_id=self.instance_id, connection=self.connection
        )

    def _send(self, response: Any) -> Any:
        self.last = response
        if response.error_code:
            return response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            names = {meta.topic_id: name for name, meta in self.ctx.topics.by_name.items()}
            self.owned = {}
            for tp in response.assignment.topic_partitions:
                self.owned.setdefault(names[tp.topic_id], set()).update(tp.partitions)
        return response

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def settle(*members: Member, rounds: int = 10) -> None:
    """Heartbeat every member in turn until nobody's epoch or partitions change."""
    for _ in range(rounds):
        before = [(m.epoch, m.partitions()) for m in members]
        for m in members:
            m.beat()
        check_single_owner(*members)
        if before == [(m.epoch, m.partitions()) for m in members]:
            return
    raise AssertionError("the group did not settle")


def check_single_owner(*members: Member) -> None:
    seen: dict[tuple[str, int], str] = {}
    for m in members:
        for tp in m.partitions():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id
