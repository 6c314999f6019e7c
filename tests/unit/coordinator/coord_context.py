"""A test context for the coordinator: requests at a manual time, results carried out like the broker.

``GroupContext`` plays the asyncio adapter's part without sockets or sleeps:
it registers parked requests, appends records to an in-memory log, replays
them into the coordinator, delivers completions, runs ``after_append``, and
advances a manual clock that fires timers in deadline order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from slipstream.coordinator import (
    CoordinatorConfig,
    CoordinatorResult,
    GroupCoordinator,
    GroupState,
    ManualTimer,
    Pending,
    Record,
    RequestContext,
)
from slipstream.coordinator.classic_rebalance import initial_wait_ms
from slipstream.coordinator.topics_image import TopicsImage
from slipstream.protocol import consumer_protocol as cp
from slipstream.protocol.apis.delete_groups import DeleteGroupsRequest
from slipstream.protocol.apis.describe_groups import DescribeGroupsRequest
from slipstream.protocol.apis.heartbeat import HeartbeatRequest
from slipstream.protocol.apis.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from slipstream.protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupRequestMemberIdentity
from slipstream.protocol.apis.list_groups import ListGroupsRequest
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from slipstream.protocol.apis.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from slipstream.protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from slipstream.protocol.apis.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.schema import Struct

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def subscription(*topics: str) -> bytes:
    return cp.encode_subscription(cp.ConsumerProtocolSubscription(topics=list(topics)), 1)


def assignment(**topics: list[int]) -> bytes:
    return cp.encode_assignment(
        cp.ConsumerProtocolAssignment(
            assigned_partitions=[
                cp.ConsumerProtocolTopicPartition(topic=t, partitions=ps) for t, ps in topics.items()
            ]
        )
    )


def protocols(*names: str, topics: Iterable[str] = ("t",)) -> list[tuple[str, bytes]]:
    sub = subscription(*topics)
    return [(name, sub) for name in names]


@dataclass
class Call:
    """A request sent to the coordinator; its answer may come now or later."""

    context: GroupContext
    pending: Pending | None
    immediate: Struct | None

    @property
    def done(self) -> bool:
        return self.immediate is not None or (self.pending is not None and self.pending in self.context.answers)

    @property
    def response(self) -> Any:
        if self.immediate is not None:
            return self.immediate
        assert self.pending is not None, "no response and no pending handle"
        assert self.pending in self.context.answers, f"{self.pending} is still parked"
        return self.context.answers[self.pending]

    @property
    def error(self) -> int:
        return int(self.response.error_code)


@dataclass
class Joined:
    """A member of a stable group, as the tests drive it."""

    member_id: str
    generation: int
    leader: str
    instance_id: str | None = None
    join: Call | None = None


@dataclass
class GroupContext:
    config: CoordinatorConfig = field(default_factory=lambda: CoordinatorConfig(offsets_topic_num_partitions=4))
    partition_exists: Any = None
    start_loaded: bool = True
    # The broker's topics as consumer (KIP-848) groups see them; tests replace it.
    topics: TopicsImage = field(default_factory=TopicsImage)
    # group id -> its consumer-group timeouts, when a test gives a group its own configs.
    consumer_group_timeouts: Any = None
    # New member ids: "<client id>-<n>" (replayable) unless the coordinator's own (random) ones.
    random_member_ids: bool = False

    def __post_init__(self) -> None:
        self.timer = ManualTimer(start_ms=1_000_000)
        ids = itertools.count(1)
        self.coordinator = GroupCoordinator(
            self.config,
            timer=self.timer,
            partition_exists=self.partition_exists,
            member_id_factory=None if self.random_member_ids else lambda prefix: f"{prefix}-{next(ids)}",
            topics=lambda: self.topics,
            consumer_group_timeouts=self.consumer_group_timeouts,
        )
        self.log: list[Record] = []
        self.answers: dict[Pending, Struct] = {}
        self.parked: set[Pending] = set()
        self.fail_appends_with: int | None = None
        if self.start_loaded:
            self.coordinator.finish_loading(self.now)

    # ------------------------------------------------------------ time and results

    @property
    def now(self) -> int:
        return self.timer.now_ms

    def advance(self, ms: int) -> list[str]:
        """Move time forward, firing timers at their deadlines; returns the fired keys."""
        fired = self.timer.advance(ms, on_fired=lambda f: self.process(f.result))
        return [f.key for f in fired]

    def advance_until_done(self, *calls: Call, step: int | None = None, limit_ms: int = 600_000) -> int:
        """Advance in steps until every call is answered.

        The default step is the first wait of a group leaving Empty (a quarter of the
        initial rebalance delay), so with the default delay the clock stops exactly
        where the join phase completes.
        """
        step = step or max(1, initial_wait_ms(self.config.group_initial_rebalance_delay_ms))
        waited = 0
        while not all(c.done for c in calls):
            assert waited < limit_ms, "calls still parked"
            self.advance(step)
            waited += step
        return waited

    def process(self, result: CoordinatorResult) -> Struct | None:
        if result.events:
            self.coordinator.history.record(result.events)
        if result.pending is not None:
            assert result.pending not in self.parked, "pending handle reused"
            self.parked.add(result.pending)
            self.last_pending = result.pending
        error = ErrorCode.NONE
        if result.records:
            if self.fail_appends_with is not None:
                error = self.fail_appends_with
            else:
                for r in result.records:
                    self.log.append(r)
                    self.coordinator.replay(r.key, r.value, self.now, *(r.producer or (-1, -1)))
        for c in result.completions:
            assert c.pending not in self.answers, f"{c.pending} answered twice"
            self.answers[c.pending] = c.response
        if result.after_append is not None:
            # A result whose own answer comes after its records (e.g. a JoinGroup that
            # first deletes an empty consumer group) answers through the next result.
            later = self.process(result.after_append(error, self.now))
            if result.response is None:
                return later
        return result.response

    def send(
        self, method: str, request: Struct, version: int, client_id: str = "client", connection: int = 0
    ) -> Call:
        ctx = RequestContext(
            api_version=version, client_id=client_id, client_host="/127.0.0.1", connection=connection
        )
        result = getattr(self.coordinator, method)(ctx, request, self.now)
        assert isinstance(result, CoordinatorResult)
        assert not (result.response is not None and result.pending is not None)
        self.last_pending: Pending | None = None
        immediate = self.process(result)
        return Call(self, self.last_pending if immediate is None else None, immediate)

    # ------------------------------------------------------------ requests

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        protos: list[tuple[str, bytes]] | None = None,
        version: int = 9,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "client",
        reason: str | None = None,
    ) -> Call:
        if protos is None:
            protos = protocols("range")
        request = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protos],
            reason=reason,
        )
        return self.send("join_group", request, version, client_id)

    def join_new(self, group: str, **kwargs: Any) -> Call:
        """Join with the KIP-394 dance (for v4+ dynamic members): returns the parked second join."""
        first = self.join(group, **kwargs)
        version = kwargs.get("version", 9)
        if kwargs.get("instance_id") is not None or version < 4:
            return first
        if not first.done or first.error != ErrorCode.MEMBER_ID_REQUIRED:
            return first
        return self.join(group, first.response.member_id, **kwargs)

    def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        *,
        version: int = 5,
        instance_id: str | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = "range",
    ) -> Call:
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[
                SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()
            ],
        )
        return self.send("sync_group", request, version)

    def heartbeat(
        self, group: str, generation: int, member_id: str, *, instance_id: str | None = None, version: int = 4
    ) -> Call:
        request = HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id
        )
        return self.send("heartbeat", request, version)

    def leave(
        self,
        group: str,
        *members: tuple[str, str | None],
        version: int = 5,
    ) -> Call:
        if version <= 2:
            assert len(members) == 1
            request = LeaveGroupRequest(group_id=group, member_id=members[0][0])
        else:
            request = LeaveGroupRequest(
                group_id=group,
                members=[
                    LeaveGroupRequestMemberIdentity(member_id=m, group_instance_id=i, reason="test")
                    for m, i in members
                ],
            )
        return self.send("leave_group", request, version)

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        *,
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        metadata: str | None = "",
        version: int = 8,
        retention_ms: int = -1,
        leader_epoch: int = -1,
        connection: int = 0,
    ) -> Call:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=leader_epoch,
                    committed_metadata=metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_ms,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        return self.send("offset_commit", request, version, connection=connection)

    def fetch(
        self,
        group: str,
        partitions: dict[str, list[int]] | None = None,
        *,
        version: int = 8,
        require_stable: bool = False,
    ) -> Call:
        if version >= 8:
            topics = None
            if partitions is not None:
                topics = [OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in partitions.items()]
            request = OffsetFetchRequest(
                groups=[OffsetFetchRequestGroup(group_id=group, topics=topics)], require_stable=require_stable
            )
        else:
            old_topics = None
            if partitions is not None:
                old_topics = [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()]
            request = OffsetFetchRequest(group_id=group, topics=old_topics, require_stable=require_stable)
        return self.send("offset_fetch", request, version)

    def fetched(self, group: str, partitions: dict[str, list[int]] | None = None, **kw: Any) -> dict[tuple[str, int], int]:
        """{(topic, partition): committed offset} from a v8 OffsetFetch."""
        response = self.fetch(group, partitions, **kw).response
        (g,) = response.groups
        assert g.error_code == 0, g
        return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}

    def offset_delete(self, group: str, partitions: dict[str, list[int]]) -> Call:
        request = OffsetDeleteRequest(
            group_id=group,
            topics=[
                OffsetDeleteRequestTopic(
                    name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
                )
                for t, ps in partitions.items()
            ],
        )
        return self.send("offset_delete", request, 0)

    def describe(self, *groups: str, version: int = 5, include_ops: bool = False) -> Any:
        request = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=include_ops)
        return self.send("describe_groups", request, version).response

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None, version: int = 5) -> Any:
        request = ListGroupsRequest(states_filter=states or [], types_filter=types or [])
        return self.send("list_groups", request, version).response

    def delete_groups(self, *groups: str, version: int = 2) -> Call:
        return self.send("delete_groups", DeleteGroupsRequest(groups_names=list(groups)), version)

    # ------------------------------------------------------------ scenarios

    def state(self, group: str) -> GroupState | None:
        g = self.coordinator.group(group)
        return None if g is None else g.state

    def form_group(
        self,
        group: str,
        n: int,
        *,
        instance_ids: list[str | None] | None = None,
        protos: list[tuple[str, bytes]] | None = None,
        version: int = 9,
        assignments: dict[int, bytes] | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
    ) -> list[Joined]:
        """n new members join an empty group together; the leader assigns; everyone syncs."""
        calls = []
        for i in range(n):
            instance = instance_ids[i] if instance_ids else None
            calls.append(
                self.join_new(
                    group, protos=protos, version=version, instance_id=instance,
                    session_ms=session_ms, rebalance_ms=rebalance_ms, client_id=f"c{i}",
                )
            )
        self.advance_until_done(*calls)
        members = []
        for i, call in enumerate(calls):
            r = call.response
            assert r.error_code == 0, r
            members.append(
                Joined(r.member_id, r.generation_id, r.leader, instance_ids[i] if instance_ids else None, call)
            )
        self.sync_all(group, members, assignments)
        assert self.state(group) is GroupState.STABLE
        return members

    def sync_all(self, group: str, members: list[Joined], assignments: dict[int, bytes] | None = None) -> list[Call]:
        """Followers sync first, then the leader with an assignment for everyone."""
        leader = next(m for m in members if m.member_id == m.leader)
        syncs = []
        for m in members:
            if m is not leader:
                syncs.append(self.sync(group, m.generation, m.member_id, instance_id=m.instance_id))
        plan = {m.member_id: (assignments or {}).get(i, assignment(t=[i])) for i, m in enumerate(members)}
        syncs.append(self.sync(group, leader.generation, leader.member_id, plan, instance_id=leader.instance_id))
        for s in syncs:
            assert s.error == 0, s.response
        return syncs


def join_response(call: Call) -> JoinGroupResponse:
    response = call.response
    assert isinstance(response, JoinGroupResponse)
    return response
