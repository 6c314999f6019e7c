"""The consumer-protocol member (KIP-848) without I/O: requests built, answers interpreted.

Time is passed in; the asyncio adapter's reconciliation order is checked with a
scripted coordinator connection (no broker, no sleeps).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from slipstream.client.assignors import TopicPartition
from slipstream.client.cluster import Cluster, TopicInfo
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.consumer_member_core import ConsumerMemberCore, Phase
from slipstream.client.consumer_membership import ConsumerGroupMembership
from slipstream.client.group_errors import (
    FatalGroupError,
    FencedInstanceError,
    consumer_fatal_error,
)
from slipstream.client.membership_types import Action, Generation, MemberState
from slipstream.client.offsets import CommitFailedError, GroupOffsets, OffsetAndMetadata
from slipstream.client.rebalance_listener import RebalanceListener
from slipstream.protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from slipstream.protocol.errors import ErrorCode

T1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000002")
NAMES = {T1: "t1", T2: "t2"}


def config(**kw: Any) -> ConsumerConfig:
    return ConsumerConfig(group_id="g", group_protocol="consumer", **kw).validate()


def answer(
    epoch: int,
    assignment: dict[uuid.UUID, list[int]] | None = None,
    *,
    member_id: str | None = None,
    interval_ms: int = 1000,
    error: int = ErrorCode.NONE,
    message: str | None = None,
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval_ms,
        assignment=None
        if assignment is None
        else ConsumerGroupHeartbeatResponseAssignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=t, partitions=ps)
                for t, ps in assignment.items()
            ]
        ),
    )


def joined_core(**kw: Any) -> ConsumerMemberCore:
    core = ConsumerMemberCore(config(**kw))
    core.learn_topic_ids(NAMES)
    core.subscribe(["t1", "t2"])
    core.join()
    return core


def owned_of(request: ConsumerGroupHeartbeatRequest) -> dict[uuid.UUID, list[int]] | None:
    if request.topic_partitions is None:
        return None
    return {tp.topic_id: list(tp.partitions) for tp in request.topic_partitions}


def reconcile(core: ConsumerMemberCore) -> tuple[tuple[TopicPartition, ...], tuple[TopicPartition, ...]]:
    step = core.start_reconciliation()
    assert step is not None
    core.revocation_done(step)
    core.complete_reconciliation(step)
    return step.revoked, step.added


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "setting",
    [
        {"session_timeout_ms": 10000},
        {"heartbeat_interval_ms": 500},
        {"partition_assignment_strategy": ["roundrobin"]},
    ],
)
def test_broker_owned_settings_are_refused_with_the_consumer_protocol(setting: dict[str, Any]) -> None:
    name = next(iter(setting))
    with pytest.raises(ValueError, match=name):
        ConsumerConfig(group_id="g", group_protocol="consumer", **setting).validate()
    ConsumerConfig(group_id="g", **setting).validate()  # fine with the classic protocol


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ValueError, match="group_remote_assignor"):
        ConsumerConfig(group_id="g", group_remote_assignor="range").validate()
    with pytest.raises(ValueError, match="group_protocol"):
        ConsumerConfig(group_id="g", group_protocol="kip848").validate()  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- join


def test_join_request_shape_v1() -> None:
    core = ConsumerMemberCore(config(max_poll_interval_ms=123000, group_remote_assignor="range", client_rack="r1"))
    core.subscribe(["b", "a"])
    core.join()
    assert core.time_to_next_heartbeat(0.0) == 0.0
    req, _ = core.heartbeat_request(0.0, version=1)
    assert req.group_id == "g"
    assert req.member_epoch == 0
    assert req.member_id == core.client_member_id
    assert uuid.UUID(req.member_id).version == 4
    assert req.rebalance_timeout_ms == 123000
    assert req.subscribed_topic_names == ["a", "b"]
    assert req.subscribed_topic_regex is None
    assert req.server_assignor == "range"
    assert req.rack_id == "r1"
    assert req.instance_id is None
    assert req.topic_partitions == []  # empty, not null: the broker refuses null on join
    assert core.state is MemberState.PREPARING_REBALANCE
    assert core.time_to_next_heartbeat(0.0) is None  # one heartbeat in flight at a time


def test_join_v0_sends_empty_member_id_and_takes_the_brokers() -> None:
    core = ConsumerMemberCore(config())
    core.subscribe(["t1"])
    core.join()
    req, token = core.heartbeat_request(0.0, version=0)
    assert req.member_id == ""
    core.on_heartbeat_response(answer(1, {}, member_id="broker-given"), token, 0.1)
    req, _ = core.heartbeat_request(5.0, version=0)
    assert req.member_id == "broker-given"
    assert req.member_epoch == 1


def test_pattern_subscription_sends_the_regex_and_needs_v1() -> None:
    core = ConsumerMemberCore(config())
    core.subscribe_pattern("orders-.*")
    core.join()
    with pytest.raises(FatalGroupError, match="v1"):
        core.heartbeat_request(0.0, version=0)
    req, _ = core.heartbeat_request(0.0, version=1)
    assert req.subscribed_topic_regex == "orders-.*"
    assert req.subscribed_topic_names is None


def test_static_member_sends_its_instance_id_in_every_heartbeat() -> None:
    core = joined_core(group_instance_id="inst-1")
    req, token = core.heartbeat_request(0.0, 1)
    assert req.instance_id == "inst-1"
    core.on_heartbeat_response(answer(3, {}), token, 0.0)
    req, _ = core.heartbeat_request(2.0, 1)
    assert req.instance_id == "inst-1"


# ---------------------------------------------------------------------------- later heartbeats


def test_later_heartbeats_send_only_what_changed_and_follow_the_brokers_interval() -> None:
    core = joined_core()
    req, token = core.heartbeat_request(0.0, 1)
    outcome = core.on_heartbeat_response(answer(5, {T1: [0, 1]}, interval_ms=250), token, 10.0)
    assert outcome.action is Action.OK
    assert core.member_epoch == 5
    assert core.state is MemberState.STABLE
    assert core.time_to_next_heartbeat(10.0) == pytest.approx(0.25)
    reconcile(core)
    # The acknowledgement goes out at once, with the owned partitions only.
    assert core.time_to_next_heartbeat(10.0) == 0.0
    req, token = core.heartbeat_request(10.0, 1)
    assert req.member_epoch == 5
    assert req.rebalance_timeout_ms == -1
    assert req.subscribed_topic_names is None
    assert req.server_assignor is None
    assert req.rack_id is None
    assert owned_of(req) == {T1: [0, 1]}
    core.on_heartbeat_response(answer(5, interval_ms=4000), token, 10.1)
    assert core.time_to_next_heartbeat(11.0) == pytest.approx(3.1)
    # Nothing changed: a bare heartbeat.
    req, token = core.heartbeat_request(14.1, 1)
    assert req.topic_partitions is None and req.subscribed_topic_names is None
    core.on_heartbeat_response(answer(5), token, 14.2)
    # A new subscription is sent at once, and only it.
    core.subscribe(["t1"])
    assert core.time_to_next_heartbeat(14.3) == 0.0
    req, _ = core.heartbeat_request(14.3, 1)
    assert req.subscribed_topic_names == ["t1"]
    assert req.topic_partitions is None and req.rebalance_timeout_ms == -1


def test_after_an_error_the_next_heartbeat_is_full() -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(2, {T1: [0]}), token, 0.0)
    reconcile(core)
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(2), token, 0.0)
    core.heartbeat_failed(1.0, 0.5)
    assert core.time_to_next_heartbeat(1.2) == pytest.approx(0.3)
    req, token = core.heartbeat_request(1.5, 1)
    assert req.rebalance_timeout_ms == 300000
    assert req.subscribed_topic_names == ["t1", "t2"]
    assert owned_of(req) == {T1: [0]}
    # A retriable error answer also makes the next one full.
    outcome = core.on_heartbeat_response(answer(-1, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), token, 1.6)
    assert outcome.action is Action.BACKOFF
    core.heartbeat_failed(1.6, 0.0)
    req, _ = core.heartbeat_request(1.6, 1)
    assert req.subscribed_topic_names == ["t1", "t2"] and owned_of(req) == {T1: [0]}


# ---------------------------------------------------------------------------- reconciliation


def test_reconcile_revokes_then_adds_and_keeps_what_stays() -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(1, {T1: [0, 1, 2]}), token, 0.0)
    assert not core.stable
    assert reconcile(core) == ((), (("t1", 0), ("t1", 1), ("t1", 2)))
    assert core.stable
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(2, {T1: [0], T2: [0]}), token, 1.0)
    step = core.start_reconciliation()
    assert step is not None
    assert step.revoked == (("t1", 1), ("t1", 2))
    assert step.added == (("t2", 0),)
    # While the revoke hook runs, heartbeats still report the old owned set.
    assert core.owned == {("t1", 0), ("t1", 1), ("t1", 2)}
    core.revocation_done(step)
    assert core.owned == {("t1", 0)}
    core.complete_reconciliation(step)
    assert core.owned == {("t1", 0), ("t2", 0)}
    req, _ = core.heartbeat_request(1.0, 1)
    assert owned_of(req) == {T1: [0], T2: [0]}


def test_unknown_topic_ids_stay_pending_until_the_metadata_names_them() -> None:
    core = ConsumerMemberCore(config())
    core.learn_topic_ids({T1: "t1"})
    core.subscribe(["t1", "t2"])
    core.join()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(1, {T1: [0], T2: [0, 1]}), token, 0.0)
    assert core.unresolved_topic_ids() == {T2}
    assert reconcile(core) == ((), (("t1", 0),))
    # A later bare answer retries; once the id is known the rest is added.
    _, token = core.heartbeat_request(1.0, 1)
    core.on_heartbeat_response(answer(1), token, 1.0)
    assert core.reconcile_due
    core.learn_topic_ids({T2: "t2"})
    assert reconcile(core) == ((), (("t2", 0), ("t2", 1)))


def test_a_failed_assign_is_retried_at_the_next_answer() -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(1, {T1: [0]}), token, 0.0)
    step = core.start_reconciliation()
    assert step is not None
    core.revocation_done(step)
    core.request_rejoin("committed offsets could not be read")
    core.complete_reconciliation(step)
    assert core.owned == set()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(1), token, 0.5)
    assert reconcile(core) == ((), (("t1", 0),))


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fencing_loses_the_partitions_and_rejoins_with_epoch_0_and_the_same_id(code: int) -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(4, {T1: [0, 1]}), token, 0.0)
    reconcile(core)
    member_id = core.member_id
    _, token = core.heartbeat_request(1.0, 1)
    outcome = core.on_heartbeat_response(answer(-1, error=code), token, 1.0)
    assert outcome.action is Action.REJOIN
    assert core.phase is Phase.FENCED
    assert core.generation is None
    assert core.take_owned() == (("t1", 0), ("t1", 1))  # reported lost by the adapter
    core.join()
    req, _ = core.heartbeat_request(1.0, 1)
    assert req.member_epoch == 0
    assert req.member_id == member_id
    assert req.topic_partitions == []
    assert req.subscribed_topic_names == ["t1", "t2"]


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNSUPPORTED_VERSION,
    ],
)
def test_configuration_errors_are_fatal_with_the_brokers_message(code: int) -> None:
    core = joined_core(group_instance_id="i")
    _, token = core.heartbeat_request(0.0, 1)
    outcome = core.on_heartbeat_response(answer(-1, error=code, message="because the broker says so"), token, 0.0)
    assert outcome.action is Action.FATAL
    err = consumer_fatal_error(outcome.error, "g", "i", outcome.reason)
    assert err.code == code
    assert "because the broker says so" in str(err)
    if code == ErrorCode.FENCED_INSTANCE_ID:
        assert isinstance(err, FencedInstanceError)


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (ErrorCode.NOT_COORDINATOR, Action.REDISCOVER),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, Action.REDISCOVER),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Action.BACKOFF),
        (ErrorCode.UNRELEASED_INSTANCE_ID, Action.BACKOFF),
    ],
)
def test_transient_errors_retry(code: int, action: Action) -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    assert core.on_heartbeat_response(answer(-1, error=code), token, 0.0).action is action
    assert core.phase is Phase.JOINING


def test_an_answer_to_an_earlier_incarnation_is_ignored() -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.join()  # e.g. a leave and rejoin happened meanwhile
    assert core.on_heartbeat_response(answer(7, {T1: [0]}), token, 0.0).action is Action.IGNORE
    assert core.member_epoch == 0 and core.target is None


def test_commit_fencing_fences_only_the_current_epoch() -> None:
    core = joined_core()
    _, token = core.heartbeat_request(0.0, 1)
    core.on_heartbeat_response(answer(3, {}), token, 0.0)
    assert not core.on_commit_error(ErrorCode.FENCED_MEMBER_EPOCH, (2, core.member_id))
    assert core.phase is Phase.MEMBER
    assert core.on_commit_error(ErrorCode.UNKNOWN_MEMBER_ID, (3, core.member_id))
    assert core.phase is Phase.FENCED


# ---------------------------------------------------------------------------- leaving


def test_leave_is_epoch_minus_1_dynamic_and_minus_2_static() -> None:
    for instance, epoch in ((None, -1), ("inst", -2)):
        core = joined_core(group_instance_id=instance)
        _, token = core.heartbeat_request(0.0, 1)
        core.on_heartbeat_response(answer(3, {T1: [0]}), token, 0.0)
        reconcile(core)
        result = core.prepare_leave()
        assert (result.kind, result.partitions) == ("revoked", (("t1", 0),))
        req = core.leave_request()
        assert req is not None
        assert req.member_epoch == epoch
        assert req.member_id == core.client_member_id
        assert req.instance_id == instance
        assert core.phase is Phase.UNJOINED


def test_no_leave_heartbeat_before_the_first_answer() -> None:
    core = joined_core()
    core.heartbeat_request(0.0, 1)
    assert core.leave_request() is None


# ---------------------------------------------------------------------------- adapter, scripted


class ScriptedConnection:
    """A coordinator connection that answers heartbeats from a script and records requests."""

    closed = False

    def __init__(self, answers: list[ConsumerGroupHeartbeatResponse], version: int = 1) -> None:
        self.answers = answers
        self.requests: list[ConsumerGroupHeartbeatRequest] = []
        self.events: list[str] | None = None
        self.version = version
        self.more = asyncio.Event()

    def version_for(self, spec: Any, max_version: int | None = None) -> int:
        return self.version

    async def request(self, spec: Any, request: Any, **kw: Any) -> Any:
        self.requests.append(request)
        if self.events is not None:
            owned = owned_of(request)
            self.events.append(f"heartbeat epoch={request.member_epoch} owned={owned}")
        while not self.answers:
            self.more.clear()
            await self.more.wait()
        return self.answers.pop(0)


class FakeLocator:
    known = True
    group_id = "g"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def connection(self) -> Any:
        return self.conn

    def mark_unknown(self, reason: str) -> None:
        pass

    async def close(self) -> None:
        pass


class OrderListener(RebalanceListener):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def on_join_prepare(self, generation: Generation | None) -> None:
        self.events.append(f"commit epoch={generation.generation_id if generation else None}")

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.events.append(f"revoked {revoked}")

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.events.append(f"assigned {assigned}")

    async def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.events.append(f"lost {lost}")


def adapter(conn: ScriptedConnection, events: list[str], **kw: Any) -> ConsumerGroupMembership:
    cluster = Cluster("127.0.0.1:1")
    cluster.topics = {
        n: TopicInfo(name=n, topic_id=t, error_code=0, is_internal=False, leaders={0: 0, 1: 0, 2: 0})
        for t, n in NAMES.items()
    }
    m = ConsumerGroupMembership(
        cluster, config(**kw), listener=OrderListener(events), locator=FakeLocator(conn)  # type: ignore[arg-type]
    )
    m.core.learn_topic_ids(NAMES)
    conn.events = events
    return m


async def wait_for(cond: Any) -> None:
    async with asyncio.timeout(10):
        while not cond():
            await asyncio.sleep(0.001)


async def test_adapter_reconciles_in_order_and_acknowledges_at_once() -> None:
    events: list[str] = []
    conn = ScriptedConnection(
        [
            answer(1, {T1: [0, 1, 2]}, interval_ms=60000),
            answer(1, interval_ms=60000),
            # Another member joined: revoke first, at the same epoch...
            answer(1, {T1: [0]}, interval_ms=60000),
            # ...and once acknowledged, the new epoch and a partition freed elsewhere.
            answer(2, {T1: [0], T2: [1]}, interval_ms=60000),
            answer(2, interval_ms=60000),
        ]
    )
    m = adapter(conn, events)
    m.subscribe(["t1", "t2"])
    gen = await m.ensure_active()
    assert gen.generation_id == 1
    assert set(gen.assignment) == {("t1", 0), ("t1", 1), ("t1", 2)}
    await wait_for(lambda: len(conn.requests) == 2)  # the acknowledgement, not an interval later
    # The next heartbeat, forced (the scripted interval is a minute).
    m.core.heartbeat_now = True
    m._wakeup.set()
    await wait_for(lambda: len(conn.requests) == 5)
    gen = await m.ensure_active()
    assert gen.generation_id == 2 and gen.assignment == (("t1", 0), ("t2", 1))
    await m.close(leave=False)
    assert events == [
        "heartbeat epoch=0 owned={}",
        "assigned [('t1', 0), ('t1', 1), ('t1', 2)]",
        f"heartbeat epoch=1 owned={ {T1: [0, 1, 2]} }",
        "heartbeat epoch=1 owned=None",
        "commit epoch=1",
        "revoked [('t1', 1), ('t1', 2)]",
        "assigned []",
        f"heartbeat epoch=1 owned={ {T1: [0]} }",
        "assigned [('t2', 1)]",
        f"heartbeat epoch=2 owned={ {T1: [0], T2: [1]} }",
        "revoked [('t1', 0), ('t2', 1)]",  # close(leave=False): revoked, no leave heartbeat
    ]


async def test_adapter_fenced_reports_lost_and_rejoins_with_the_same_id() -> None:
    events: list[str] = []
    conn = ScriptedConnection(
        [
            answer(3, {T1: [0]}, interval_ms=60000),
            answer(3, interval_ms=60000),
            answer(-1, error=ErrorCode.FENCED_MEMBER_EPOCH),
            answer(5, {T1: [2]}, interval_ms=60000),
            answer(5, interval_ms=60000),
        ]
    )
    m = adapter(conn, events)
    m.subscribe(["t1"])
    await m.ensure_active()
    await wait_for(lambda: len(conn.requests) == 2)
    m.core.heartbeat_now = True
    m._wakeup.set()
    await wait_for(lambda: len(conn.requests) == 5)
    gen = await m.ensure_active()
    assert gen.generation_id == 5 and gen.assignment == (("t1", 2),)
    await m.close(leave=False)
    ids = {r.member_id for r in conn.requests}
    assert ids == {m.core.client_member_id}
    assert [r.member_epoch for r in conn.requests] == [0, 3, 3, 0, 5]
    assert "lost [('t1', 0)]" in events
    assert events.index("lost [('t1', 0)]") < events.index("assigned [('t1', 2)]")
    assert not any(e.startswith("commit") for e in events)  # lost partitions are not committed


async def test_adapter_fatal_error_is_raised_from_ensure_active() -> None:
    events: list[str] = []
    conn = ScriptedConnection(
        [answer(-1, error=ErrorCode.GROUP_ID_NOT_FOUND, message="Group g is a classic group")]
    )
    m = adapter(conn, events)
    m.subscribe(["t1"])
    with pytest.raises(FatalGroupError, match="classic group") as info:
        await m.ensure_active()
    assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND
    await m.close()


async def test_adapter_static_close_sends_epoch_minus_2_after_revoking() -> None:
    events: list[str] = []
    conn = ScriptedConnection(
        [answer(2, {T1: [0]}, interval_ms=60000), answer(2, interval_ms=60000), answer(-2, interval_ms=0)]
    )
    m = adapter(conn, events, group_instance_id="inst")
    m.subscribe(["t1"])
    await m.ensure_active()
    await wait_for(lambda: len(conn.requests) == 2)
    await m.close()
    assert conn.requests[-1].member_epoch == -2
    assert conn.requests[-1].instance_id == "inst"
    assert events[-2:] == ["revoked [('t1', 0)]", "heartbeat epoch=-2 owned=None"]


# ---------------------------------------------------------------------------- commits carry the epoch


class CommitConnection:
    closed = False

    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.requests: list[Any] = []

    def version_for(self, spec: Any, max_version: int | None = None) -> int:
        return 9

    async def request(self, spec: Any, request: Any, **kw: Any) -> Any:
        self.requests.append(request)
        code = self.codes.pop(0)
        return OffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )


async def test_commit_carries_the_member_epoch_and_retries_stale_epochs_with_the_next_one() -> None:
    conn = CommitConnection([ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.NONE])
    asked: list[int] = []

    async def next_generation(stale: int) -> Generation | None:
        asked.append(stale)
        return Generation(8, "m1", None, "", (("t1", 0),), None)  # t1-1 was revoked meanwhile

    offsets = GroupOffsets(FakeLocator(conn), config(), next_generation=next_generation)  # type: ignore[arg-type]
    gen = Generation(7, "m1", None, "", (("t1", 0), ("t1", 1)), None)
    await offsets.commit({("t1", 0): OffsetAndMetadata(10), ("t1", 1): OffsetAndMetadata(20)}, gen)
    first, second = conn.requests
    assert (first.generation_id_or_member_epoch, first.member_id) == (7, "m1")
    assert (second.generation_id_or_member_epoch, second.member_id) == (8, "m1")
    assert asked == [7]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in second.topics] == [("t1", [0])]


async def test_commit_fenced_tells_the_membership_and_fails() -> None:
    conn = CommitConnection([ErrorCode.FENCED_MEMBER_EPOCH])
    told: list[tuple[int, tuple[int, str]]] = []
    offsets = GroupOffsets(
        FakeLocator(conn),  # type: ignore[arg-type]
        config(),
        on_membership_error=lambda code, sent: told.append((code, sent)),
    )
    with pytest.raises(CommitFailedError):
        await offsets.commit({("t1", 0): 5}, Generation(4, "m1", None, "", (("t1", 0),), None))
    assert told == [(ErrorCode.FENCED_MEMBER_EPOCH, (4, "m1"))]
