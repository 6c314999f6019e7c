"""Admin's consumer-group operations against an in-process broker, with groups made by confluent-kafka.

One broker for the module; every test works on its own group ids, so tests share
nothing they change. The "live" group (two confluent-kafka members, range
assignor) and the "done" group (one member that committed and left, so Empty)
are made once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from slipstream.broker.broker import Broker
from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster
from slipstream.client.committed_offsets_admin import CommittedOffset, PartitionLag
from slipstream.client.connection import ConnectionClosed
from slipstream.client.group_admin import decode_member_assignment
from slipstream.client.log_offsets_admin import EARLIEST, LATEST
from slipstream.protocol.apis.describe_groups import SPEC as DESCRIBE_GROUPS
from slipstream.protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from slipstream.protocol.apis.find_coordinator import (
    FindCoordinatorResponse,
    FindCoordinatorResponseCoordinator,
)
from slipstream.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolTopicPartition,
    encode_assignment,
)
from slipstream.protocol.errors import ErrorCode, KafkaError

pytestmark = pytest.mark.timeout(60)

TIMEOUT_S = 15.0
TOPIC = "orders"
# partition -> records produced
COUNTS = {0: 5, 1: 3, 2: 0}
LIVE = "live-group"
DONE = "done-group"
# What each group commits.
LIVE_COMMITS = {0: 2, 1: 3}
DONE_COMMITS = {0: 5, 1: 1, 2: 0}


def consumer_config(bootstrap: str, group: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "heartbeat.interval.ms": 100,
        "session.timeout.ms": 10000,
        "partition.assignment.strategy": "range",
        "log_level": 0,
    }


def wait_for(condition: Any, consumers: list[Consumer], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            msg = c.poll(0.05)
            assert msg is None or not msg.error() or msg.error().code() < 0, msg.error()


def join(consumers: list[Consumer], topic: str) -> None:
    """Subscribe all, and poll until the partitions of ``topic`` are split among them."""
    for c in consumers:
        c.subscribe([topic])

    def settled() -> bool:
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        return all(c.assignment() for c in consumers) and sorted(owned) == sorted(COUNTS)

    wait_for(settled, consumers, "the group to settle")


def commit(consumer: Consumer, offsets: dict[int, int], topic: str = TOPIC) -> None:
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, Any]]:
    with Broker(storage="memory", port=0, group_initial_rebalance_delay_ms=0) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        for future in admin.create_topics([NewTopic(TOPIC, len(COUNTS), 1)], operation_timeout=TIMEOUT_S).values():
            future.result(TIMEOUT_S)
        producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0})
        for partition, count in COUNTS.items():
            for i in range(count):
                producer.produce(TOPIC, f"m{i}".encode(), partition=partition)
        assert producer.flush(TIMEOUT_S) == 0

        # An Empty consumer group: one member consumed, committed and left.
        done = Consumer(consumer_config(bootstrap, DONE, "done-1"))
        join([done], TOPIC)
        commit(done, DONE_COMMITS)
        done.close()

        # A live consumer group of two members.
        live = [Consumer(consumer_config(bootstrap, LIVE, f"live-{i}")) for i in (1, 2)]
        join(live, TOPIC)
        for c in live:
            mine = {p: o for p, o in LIVE_COMMITS.items() if any(tp.partition == p for tp in c.assignment())}
            if mine:
                commit(c, mine)
        try:
            yield {"broker": broker, "bootstrap": bootstrap, "live": live}
        finally:
            for c in live:
                c.close()


@pytest.fixture
async def admin(env: dict[str, Any]) -> AsyncIterator[Admin]:
    cluster = Cluster(env["bootstrap"], request_timeout_s=TIMEOUT_S)
    try:
        yield Admin(cluster, retry_timeout_s=TIMEOUT_S)
    finally:
        await cluster.close()


# ---------------------------------------------------------------------------- coordinator


async def test_find_coordinator_is_the_broker_and_cached(env: dict[str, Any], admin: Admin) -> None:
    broker: Broker = env["broker"]
    node = await admin.find_coordinator(LIVE)
    assert (node.node_id, node.port) == (broker.config.node_id, broker.port)
    both = await admin.find_coordinators([LIVE, DONE])
    assert both == {LIVE: node, DONE: node}
    assert admin.group_coordinators.cached(LIVE) is node


class FakeAnswers:
    """A connection proxy that answers chosen APIs with canned responses a number of times."""

    def __init__(self, conn: Any, spec: Any, answers: list[Any]) -> None:
        self.conn = conn
        self.spec = spec
        self.answers = answers
        self.calls = 0
        self.address = conn.address

    def version_for(self, spec: Any, max_version: int | None = None) -> int:
        return int(self.conn.version_for(spec, max_version))

    async def request(self, spec: Any, request: Any, **kw: Any) -> Any:
        if spec is self.spec:
            self.calls += 1
            if self.answers:
                answer = self.answers.pop(0)
                if isinstance(answer, BaseException):
                    raise answer
                return answer(self.conn.version_for(spec), request) if callable(answer) else answer
        return await self.conn.request(spec, request, **kw)


def coordinator_error(code: int) -> Any:
    def make(version: int, request: Any) -> FindCoordinatorResponse:
        if version >= 4:
            return FindCoordinatorResponse(
                coordinators=[
                    FindCoordinatorResponseCoordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
                    for k in request.coordinator_keys
                ]
            )
        return FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)

    return make


async def test_find_coordinator_retries_while_loading(admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = await admin.cluster.any_connection()
    fake = FakeAnswers(
        conn,
        FIND_COORDINATOR,
        [
            coordinator_error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
            coordinator_error(ErrorCode.COORDINATOR_NOT_AVAILABLE),
            ConnectionClosed("connection lost"),
        ],
    )

    async def any_connection() -> Any:
        return fake

    monkeypatch.setattr(admin.cluster, "any_connection", any_connection)
    node = await admin.find_coordinator("fresh-group")
    assert node.node_id >= 0
    assert fake.calls == 4


async def test_find_coordinator_gives_up_after_the_retry_timeout(
    admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = await admin.cluster.any_connection()
    fake = FakeAnswers(conn, FIND_COORDINATOR, [coordinator_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)] * 1000)

    async def any_connection() -> Any:
        return fake

    monkeypatch.setattr(admin.cluster, "any_connection", any_connection)
    # A manual clock: each backoff sleep moves it, nothing waits for real.
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    admin.clock, admin.sleep = (lambda: now[0]), sleep
    admin.retry_timeout_s = 3.0
    with pytest.raises(KafkaError) as excinfo:
        await admin.find_coordinator("never")
    assert excinfo.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert "never" in str(excinfo.value)
    # Exponential from retry_backoff_s, capped at retry_backoff_max_s, given up before the
    # next sleep would pass the retry timeout.
    assert slept[:3] == [admin.retry_backoff_s, 2 * admin.retry_backoff_s, 4 * admin.retry_backoff_s]
    assert max(slept) <= admin.retry_backoff_max_s
    assert sum(slept) <= 3.0 < sum(slept) + min(2 * slept[-1], admin.retry_backoff_max_s)
    assert fake.calls == len(slept) + 1


async def test_not_coordinator_rediscovers_and_retries(admin: Admin, monkeypatch: pytest.MonkeyPatch) -> None:
    from slipstream.protocol.apis.describe_groups import (
        DescribeGroupsResponse,
        DescribeGroupsResponseDescribedGroup,
    )

    real = admin.group_coordinators.node_connection
    fakes: list[FakeAnswers] = []
    wrong = DescribeGroupsResponse(
        groups=[DescribeGroupsResponseDescribedGroup(group_id=DONE, error_code=ErrorCode.NOT_COORDINATOR)]
    )

    async def node_connection(node: Any) -> Any:
        fake = FakeAnswers(await real(node), DESCRIBE_GROUPS, [wrong] if not fakes else [])
        fakes.append(fake)
        return fake

    monkeypatch.setattr(admin.group_coordinators, "node_connection", node_connection)
    described = await admin.describe_group(DONE)
    assert described.state == "Empty"
    assert len(fakes) == 2


# ---------------------------------------------------------------------------- list / describe


async def test_list_groups_with_states(admin: Admin) -> None:
    groups = {g.group_id: g for g in await admin.list_groups()}
    assert groups[LIVE].state == "Stable"
    assert groups[LIVE].protocol_type == "consumer"
    assert groups[DONE].state == "Empty"
    assert groups[DONE].group_type == "classic"
    stable = [g.group_id for g in await admin.list_groups(states=["Stable"])]
    assert LIVE in stable and DONE not in stable
    empty = [g.group_id for g in await admin.list_groups(states=["empty"])]
    assert DONE in empty and LIVE not in empty
    assert [g.group_id for g in await admin.list_groups(types=["consumer"])] == []


async def test_describe_live_group_decodes_assignments(env: dict[str, Any], admin: Admin) -> None:
    live = (await admin.describe_groups([LIVE]))[0]
    assert (live.state, live.protocol_type, live.protocol) == ("Stable", "consumer", "range")
    assert live.is_consumer_group
    assert sorted(m.client_id for m in live.members) == ["live-1", "live-2"]
    owned: list[int] = []
    for member in live.members:
        assert member.member_id.startswith(member.client_id)
        assert member.group_instance_id is None
        assert member.host.endswith("127.0.0.1")
        assert member.subscription == [TOPIC]
        assert list(member.assignment) == [TOPIC]
        owned += member.assignment[TOPIC]
    assert sorted(owned) == [0, 1, 2]
    # What the members were told is what DescribeGroups reports.
    by_client = {m.client_id: m for m in live.members}
    for i, consumer in enumerate(env["live"], start=1):
        assert sorted(tp.partition for tp in consumer.assignment()) == by_client[f"live-{i}"].assignment[TOPIC]
    owner = live.owner(TOPIC, 0)
    assert owner is not None and 0 in owner.assignment[TOPIC]


async def test_describe_empty_and_unknown_groups(admin: Admin) -> None:
    done, unknown = await admin.describe_groups([DONE, "no-such-group"])
    assert (done.state, done.protocol_type, done.members) == ("Empty", "consumer", [])
    assert (unknown.state, unknown.members) == ("Dead", [])


def test_decode_member_assignment() -> None:
    data = encode_assignment(
        ConsumerProtocolAssignment(
            assigned_partitions=[
                ConsumerProtocolTopicPartition(topic="b", partitions=[2, 0]),
                ConsumerProtocolTopicPartition(topic="a", partitions=[1]),
            ]
        ),
        version=1,
    )
    assert decode_member_assignment(data) == {"a": [1], "b": [0, 2]}
    assert decode_member_assignment(b"") == {}
    assert decode_member_assignment(b"\x00") == {}
    assert decode_member_assignment(b"\x00\x00\x7f\xff\xff\xff") == {}


# ---------------------------------------------------------------------------- offsets and lag


async def test_committed_offsets(admin: Admin) -> None:
    assert await admin.list_committed_offsets(LIVE) == {
        (TOPIC, p): CommittedOffset(o) for p, o in LIVE_COMMITS.items()
    }
    assert await admin.list_committed_offsets(DONE) == {
        (TOPIC, p): CommittedOffset(o) for p, o in DONE_COMMITS.items()
    }
    # Explicit partitions: the ones without a commit are left out.
    assert await admin.list_committed_offsets(LIVE, [(TOPIC, 1), (TOPIC, 2)]) == {(TOPIC, 1): CommittedOffset(3)}
    assert await admin.list_committed_offsets("no-such-group") == {}


async def test_group_lag_of_live_group(admin: Admin) -> None:
    live = await admin.describe_group(LIVE)
    lags = await admin.group_lag(LIVE)
    expected = []
    for p, end in COUNTS.items():
        owner = live.owner(TOPIC, p)
        assert owner is not None
        committed = LIVE_COMMITS.get(p)
        expected.append(
            PartitionLag(
                TOPIC, p, committed, end, None if committed is None else end - committed,
                owner.member_id, owner.client_id, owner.host,
            )
        )
    assert lags == expected
    assert [lag.lag for lag in lags] == [3, 0, None]


async def test_group_lag_of_empty_group(admin: Admin) -> None:
    assert await admin.group_lag(DONE) == [
        PartitionLag(TOPIC, 0, 5, 5, 0),
        PartitionLag(TOPIC, 1, 1, 3, 2),
        PartitionLag(TOPIC, 2, 0, 0, 0),
    ]
    assert await admin.group_lag("no-such-group") == []


async def test_log_offsets(admin: Admin) -> None:
    tps = [(TOPIC, p) for p in COUNTS]
    assert await admin.log_offsets(tps, LATEST) == {(TOPIC, p): n for p, n in COUNTS.items()}
    assert await admin.log_offsets(tps, EARLIEST) == {(TOPIC, p): 0 for p in COUNTS}
    # Far in the future: no record that late.
    assert await admin.log_offsets([(TOPIC, 0)], 2**50) == {(TOPIC, 0): -1}
    missing = await admin.log_offsets([("no-such-topic", 0), (TOPIC, 7)])
    assert all(isinstance(v, KafkaError) and v.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for v in missing.values())


async def test_alter_committed_offsets(admin: Admin) -> None:
    # A group nobody uses: the standalone commit creates it.
    await admin.alter_committed_offsets("altered", {(TOPIC, 0): 4, (TOPIC, 2): 0})
    assert await admin.list_committed_offsets("altered") == {(TOPIC, 0): CommittedOffset(4), (TOPIC, 2): CommittedOffset(0)}
    await admin.alter_committed_offsets("altered", {(TOPIC, 0): 1}, metadata="by test")
    assert (await admin.list_committed_offsets("altered"))[(TOPIC, 0)] == CommittedOffset(1, "by test")
    assert (await admin.describe_group("altered")).state == "Empty"
    with pytest.raises(ValueError, match="must be >= 0"):
        await admin.alter_committed_offsets("altered", {(TOPIC, 0): -1})
    with pytest.raises(KafkaError) as excinfo:
        await admin.alter_committed_offsets("altered", {(TOPIC, 9): 0})
    assert excinfo.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_alter_committed_offsets_refused_for_live_group(admin: Admin) -> None:
    with pytest.raises(KafkaError) as excinfo:
        await admin.alter_committed_offsets(LIVE, {(TOPIC, 0): 0})
    assert excinfo.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "Empty" in str(excinfo.value) and LIVE in str(excinfo.value)
    assert (await admin.list_committed_offsets(LIVE))[(TOPIC, 0)] == CommittedOffset(2)


async def test_delete_committed_offsets(admin: Admin) -> None:
    await admin.alter_committed_offsets("pruned", {(TOPIC, 0): 1, (TOPIC, 1): 2, (TOPIC, 2): 0})
    await admin.delete_committed_offsets("pruned", TOPIC, [1])
    assert await admin.list_committed_offsets("pruned") == {(TOPIC, 0): CommittedOffset(1), (TOPIC, 2): CommittedOffset(0)}
    await admin.delete_committed_offsets("pruned", TOPIC)
    assert await admin.list_committed_offsets("pruned") == {}


async def test_delete_committed_offsets_refused_while_subscribed(admin: Admin) -> None:
    with pytest.raises(KafkaError) as excinfo:
        await admin.delete_committed_offsets(LIVE, TOPIC, [0])
    assert excinfo.value.code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    assert (await admin.list_committed_offsets(LIVE))[(TOPIC, 0)] == CommittedOffset(2)
    with pytest.raises(KafkaError) as excinfo:
        await admin.delete_committed_offsets("no-such-group", TOPIC, [0])
    assert excinfo.value.code == ErrorCode.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------------------- delete


async def test_delete_groups(env: dict[str, Any], admin: Admin) -> None:
    with pytest.raises(KafkaError) as excinfo:
        await admin.delete_groups([LIVE])
    assert excinfo.value.code == ErrorCode.NON_EMPTY_GROUP
    assert (await admin.describe_group(LIVE)).state == "Stable"

    # An Empty consumer group of its own (DONE is shared with other tests).
    consumer = Consumer(consumer_config(env["bootstrap"], "to-delete", "del-1"))
    join([consumer], TOPIC)
    commit(consumer, {0: 1})
    consumer.close()
    assert (await admin.describe_group("to-delete")).state == "Empty"
    await admin.delete_groups(["to-delete"])
    assert (await admin.describe_group("to-delete")).state == "Dead"
    assert await admin.list_committed_offsets("to-delete") == {}
    assert "to-delete" not in [g.group_id for g in await admin.list_groups()]

    with pytest.raises(KafkaError) as excinfo:
        await admin.delete_groups(["to-delete"])
    assert excinfo.value.code == ErrorCode.GROUP_ID_NOT_FOUND

    # Several at once: every group is tried, the failure is reported.
    await admin.alter_committed_offsets("batch-a", {(TOPIC, 0): 0})
    with pytest.raises(KafkaError) as excinfo:
        await admin.delete_groups(["batch-a", LIVE, "batch-missing"])
    assert excinfo.value.code == ErrorCode.NON_EMPTY_GROUP
    assert "batch-missing" in str(excinfo.value)
    assert (await admin.describe_group("batch-a")).state == "Dead"
