"""Three stateless brokers over one PostgreSQL database (issue 16).

Produce through one broker and consume through another (confluent-kafka, the Java
client and Slipstream's client); a consumer group spread over the brokers (the Java
client, both group protocols); kill -9 of the group's coordinator and of a partition
leader while an idempotent acks=all producer and the group run (confluent-kafka, the
Java client and Slipstream's client; the clients are in cluster_group_run.py); a paused
(SIGSTOP) broker whose lease expired cannot write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_group_run import GROUP_PROTOCOLS, GROUP_SESSION_MS, HEARTBEAT_MS, GroupRun, group_run
from conformance_helpers import ck_consume, ck_create_topic, ck_produce, verify_records

from slipstream.broker.cluster import database
from slipstream.broker.cluster.assignment import Lease, current_leader, live_brokers
from slipstream.coordinator import OFFSETS_TOPIC, partition_for
from slipstream.testing.broker_process import BrokerProcess
from slipstream.testing.postgres import PostgresServer

pytestmark = pytest.mark.conformance

SESSION_MS = 3000  # cluster.broker.session.ms: failover within ~SESSION_MS + one heartbeat
OFFSETS_PARTITIONS = 6


class Cluster:
    def __init__(self, brokers: list[BrokerProcess], url: str) -> None:
        self.brokers = brokers
        self.url = url

    def by_node(self, node: int) -> BrokerProcess:
        return self.brokers[node - 1]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def state(self) -> tuple[list[int], dict[tuple[str, int], Lease | None]]:
        """(live node ids, each leased partition's current leader) as the database says."""

        async def read() -> tuple[list[int], dict[tuple[str, int], Lease | None]]:
            import asyncpg

            conn = await asyncpg.connect(self.url)
            try:
                now = await database.now_ms(conn)
                live = [b.node_id for b in live_brokers(await database.brokers(conn), now, SESSION_MS)]
                leases = await database.leases(conn)
            finally:
                await conn.close()
            return live, {tp: current_leader(lease, live, now) for tp, lease in leases.items()}

        return asyncio.run(read())

    def wait_settled(self, live: set[int], topic: str | None = None, partitions: int = 0, timeout: float = 30) -> dict[tuple[str, int], int]:
        """Until exactly ``live`` are live and every partition (of the offsets topic, and of
        ``topic``) has a live leader; returns partition -> leader node."""
        deadline = time.monotonic() + timeout
        wanted = [(OFFSETS_TOPIC, p) for p in range(OFFSETS_PARTITIONS)]
        wanted += [(topic, p) for p in range(partitions)] if topic else []
        while True:
            found_live, leaders = self.state()
            owners = {tp: leaders.get(tp) for tp in wanted}
            if set(found_live) == live and all(o is not None and o.owner in live for o in owners.values()):
                return {tp: o.owner for tp, o in owners.items() if o is not None}
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster did not settle on {live}: live {found_live}, leaders {owners}")
            time.sleep(0.2)


@contextlib.contextmanager
def running_cluster(tmp_path: Path, url: str, extra: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """Three brokers over the database at ``url``, settled (every offsets partition led)."""
    brokers = [
        BrokerProcess(
            tmp_path / f"data-{node}",
            tmp_path / f"broker-{node}.log",
            extra_args=(
                "--storage", "postgres", "--database-url", url,
                "--set", f"node.id={node}",
                "--set", f"cluster.broker.session.ms={SESSION_MS}",
                "--set", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                "--set", "group.initial.rebalance.delay.ms=0",
                # consumer-protocol (KIP-848) groups get the classic members' session
                "--set", "group.consumer.min.session.timeout.ms=1000",
                "--set", f"group.consumer.session.timeout.ms={GROUP_SESSION_MS}",
                "--set", "group.consumer.min.heartbeat.interval.ms=100",
                "--set", f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
                *extra,
            ),
        )
        for node in (1, 2, 3)
    ]  # fmt: skip
    try:
        # Started together (as an operator's script would): they agree on one cluster id,
        # one set of internal topics and one spread of leaders.
        starters = [threading.Thread(target=broker.start, kwargs={"timeout": 60}) for broker in brokers]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        assert all(b.alive() for b in brokers), [b.log_tail(20) for b in brokers]
        c = Cluster(brokers, url)
        c.wait_settled({1, 2, 3})
        yield c
    finally:
        for broker in brokers:
            if broker.alive():
                os.kill(broker.pid, signal.SIGCONT)
            broker.stop()


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[Cluster]:
    with running_cluster(tmp_path, postgres_url) as c:
        yield c


def test_produce_through_one_broker_and_consume_through_another(cluster: Cluster, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    one, two, three = cluster.brokers
    ck_create_topic(one.bootstrap, topic_name, partitions=6)
    leaders = cluster.wait_settled({1, 2, 3}, topic_name, 6)
    assert {leaders[(topic_name, p)] for p in range(6)} == {1, 2, 3}  # spread over all three
    # Broker 3 answers Metadata with the leaders the database names (its view follows
    # the database within a heartbeat, at once on the claim's notification).
    admin = AdminClient({"bootstrap.servers": three.bootstrap})
    deadline = time.monotonic() + 5
    while True:
        metadata = admin.list_topics(topic_name, timeout=10)
        answered = {p.id: p.leader for p in metadata.topics[topic_name].partitions.values()}
        if answered == {p: leaders[(topic_name, p)] for p in range(6)} or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert answered == {p: leaders[(topic_name, p)] for p in range(6)}

    acks = ck_produce(one.bootstrap, topic_name, range(200))
    verify_records(ck_consume(three.bootstrap, topic_name, 200), range(200), acks=acks)
    not_leader_answers(cluster, topic_name, {p: leaders[(topic_name, p)] for p in range(6)})
    leader_epoch_answers(cluster, topic_name)

    # Slipstream's client: produce through broker 2, consume through broker 1 in a group.
    from slipstream.client.consumer import Consumer
    from slipstream.client.producer import Producer

    producer = Producer(two.bootstrap)
    errors: list[object] = []
    for i in range(200, 300):
        producer.produce(topic_name, f"v{i}".encode(), key=f"k{i}".encode(),
                         on_delivery=lambda err, meta: errors.append(err) if err else None)  # fmt: skip
    assert producer.flush(30) == 0 and not errors
    producer.close()
    # A classic group through broker 1 and a consumer-protocol (KIP-848) group through
    # broker 3: each coordinated by whichever broker leads its offsets partition.
    for bootstrap, protocol in ((one.bootstrap, "classic"), (three.bootstrap, "consumer")):
        consumer = Consumer(
            bootstrap, group_id=f"{topic_name}-{protocol}", auto_offset_reset="earliest", group_protocol=protocol
        )
        consumer.subscribe([topic_name])
        values: set[bytes] = set()
        deadline = time.monotonic() + 40
        while len(values) < 300 and time.monotonic() < deadline:
            values.update(m.value for m in consumer.poll(1.0) if m.value is not None)
        consumer.close()
        assert values == {f"v{i}".encode() for i in range(300)}, protocol


def not_leader_answers(cluster: Cluster, topic: str, leaders: dict[int, int]) -> None:
    """Produce v10+ and Fetch v12+ sent to a broker that does not lead the partition:
    NOT_LEADER_OR_FOLLOWER, with the current leader (and, Produce, its endpoint)."""
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import fetch as fe
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.errors import ErrorCode
    from slipstream.protocol.records import ProducerRecord, build_batch

    partition = 0
    leader = leaders[partition]
    other = cluster.by_node(next(n for n in (1, 2, 3) if n != leader))
    batch = memoryview(build_batch([ProducerRecord(b"k", b"to-the-wrong-broker")]))
    produce = pr.ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[pr.ProduceRequestTopicData(
        name=topic, partition_data=[pr.ProduceRequestPartitionData(index=partition, records=batch)],
    )])  # fmt: skip
    fetch = fe.FetchRequest(max_wait_ms=0, min_bytes=0, session_epoch=-1, topics=[fe.FetchRequestTopic(
        topic=topic, partitions=[fe.FetchRequestPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)],
    )])  # fmt: skip

    async def ask() -> tuple[object, object]:
        conn = await BrokerConnection(other.host, other.port).connect()
        try:
            return await conn.request(pr.SPEC, produce, version=10), await conn.request(fe.SPEC, fetch, version=12)
        finally:
            await conn.close()

    produced, fetched = asyncio.run(ask())
    part = produced.responses[0].partition_responses[0]  # type: ignore[attr-defined]
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.current_leader.leader_id == leader and part.current_leader.leader_epoch >= 1
    endpoints = {e.node_id: e.port for e in produced.node_endpoints}  # type: ignore[attr-defined]
    assert endpoints == {leader: cluster.by_node(leader).port}
    answer = fetched.responses[0].partitions[0]  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.records in (b"", None, [])
    assert answer.current_leader.leader_id == leader


def leader_epoch_answers(cluster: Cluster, topic: str) -> None:
    """KIP-320 at a partition's leader: Fetch v12 and ListOffsets v4 naming an older
    leader epoch than the lease's are FENCED_LEADER_EPOCH, a newer one
    UNKNOWN_LEADER_EPOCH; the lease's own epoch, or none (-1), is served."""
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import fetch as fe
    from slipstream.protocol.apis import list_offsets as lo
    from slipstream.protocol.errors import ErrorCode

    lease = cluster.state()[1][(topic, 0)]
    assert lease is not None
    leader = cluster.by_node(lease.owner)

    def fetch(epoch: int) -> fe.FetchRequest:
        return fe.FetchRequest(max_wait_ms=0, min_bytes=0, session_epoch=-1, topics=[fe.FetchRequestTopic(
            topic=topic, partitions=[fe.FetchRequestPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=epoch,
            )],
        )])  # fmt: skip

    def list_offsets(epoch: int) -> lo.ListOffsetsRequest:
        return lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[lo.ListOffsetsRequestTopic(
            name=topic, partitions=[lo.ListOffsetsRequestPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)],
        )])  # fmt: skip

    async def ask() -> dict[int, tuple[int, int]]:
        conn = await BrokerConnection(leader.host, leader.port).connect()
        try:
            answers = {}
            for epoch in (-1, lease.epoch - 1, lease.epoch, lease.epoch + 1):
                fetched = await conn.request(fe.SPEC, fetch(epoch), version=12)
                listed = await conn.request(lo.SPEC, list_offsets(epoch), version=4)
                answers[epoch] = (
                    fetched.responses[0].partitions[0].error_code, listed.topics[0].partitions[0].error_code,
                )
            return answers
        finally:
            await conn.close()

    answers = asyncio.run(ask())
    assert answers == {
        -1: (0, 0),
        lease.epoch - 1: (ErrorCode.FENCED_LEADER_EPOCH,) * 2,
        lease.epoch: (0, 0),
        lease.epoch + 1: (ErrorCode.UNKNOWN_LEADER_EPOCH,) * 2,
    }


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def run_of(client: str, group_protocol: str, cluster: Cluster, topic: str, request: pytest.FixtureRequest) -> GroupRun:
    """``client``'s producer over every broker, and its two members bootstrapped through
    brokers 1 and 2."""
    java_driver = request.getfixturevalue("java_driver") if client == "java" else None
    members = [b.bootstrap for b in cluster.brokers[:2]]
    return group_run(client, cluster.bootstrap, members, topic, group_protocol, java_driver)


@pytest.mark.parametrize(
    ("client", "group_protocol"),
    [
        ("confluent", "classic"),
        pytest.param("java", "classic", marks=pytest.mark.java),
        pytest.param("java", "consumer", marks=pytest.mark.java),
        ("slipstream", "classic"),
        ("slipstream", "consumer"),
        ("slipstream-asyncio", "classic"),
        ("slipstream-asyncio", "consumer"),
    ],
)
def test_kill_9_of_the_coordinator_and_of_a_leader_loses_nothing(
    cluster: Cluster, topic_name: str, client: str, group_protocol: str, request: pytest.FixtureRequest
) -> None:
    ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=3)
    cluster.wait_settled({1, 2, 3}, topic_name, 3)
    group_partition = partition_for(f"{topic_name}-group", OFFSETS_PARTITIONS)
    with run_of(client, group_protocol, cluster, topic_name, request) as run:
        run.wait_progress(0, 30)
        time.sleep(1)
        # 1. the group's coordinator
        coordinator = cluster.wait_settled({1, 2, 3})[(OFFSETS_TOPIC, group_partition)]
        before = committed_offsets(cluster.bootstrap, run.group, topic_name, 3)
        assert sum(o for o in before.values() if o > 0) > 0
        cluster.by_node(coordinator).kill9()
        killed_at = time.monotonic()
        back = run.wait_progress(killed_at, GROUP_SESSION_MS / 1000 + 5)
        print(f"coordinator {coordinator} killed: the group consumed and committed again after {back - killed_at:.1f}s")
        after = committed_offsets(cluster.bootstrap, run.group, topic_name, 3)
        assert all(after[p] >= before[p] for p in before), (before, after)  # committed offsets kept
        cluster.by_node(coordinator).start(timeout=30)
        leaders = cluster.wait_settled({1, 2, 3}, topic_name, 3)
        # 2. a leader of the topic (not the new group coordinator, so this is the leader case)
        owner = leaders[(OFFSETS_TOPIC, group_partition)]
        victim = next(leaders[(topic_name, p)] for p in range(3) if leaders[(topic_name, p)] != owner)
        cluster.by_node(victim).kill9()
        killed_at = time.monotonic()
        back = run.wait_progress(killed_at, GROUP_SESSION_MS / 1000 + 5)
        print(f"leader {victim} killed: the group consumed and committed again after {back - killed_at:.1f}s")
        time.sleep(2)
        run.stop_producing()
        missing = run.wait_all_consumed(30)
        assert not missing, f"the group never consumed {len(missing)} acknowledged records: {run.missing_report(missing)}"
    assert run.acked, run.errors
    assert_acked_once_in_log(cluster, run)


def assert_acked_once_in_log(cluster: Cluster, run: GroupRun) -> None:
    """Every acknowledged record is in the log exactly once (the idempotent producer's
    retries across leaders made no duplicate), at the offset it was acknowledged at."""
    topic_name = run.topic
    survivor = next(b for b in cluster.brokers if b.alive())
    count = len(run.acked)
    records = ck_consume(survivor.bootstrap, topic_name, count, timeout=60) if count else []
    in_log = [int(r.value) for r in records]
    assert len(in_log) == len(set(in_log)), "a record is in the log twice"
    positions = {int(r.value): (r.partition, r.offset) for r in records}
    lost = [v for v in run.acked if v not in positions]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    assert all(positions[v][0] == p and off in (None, positions[v][1]) for v, (p, off) in run.acked.items())


def assert_group_read_in_order(events: list[tuple[str, int, int]]) -> None:
    """Each partition was read offset after offset, no record skipped; a read that went
    back (a rebalance after a failed commit) started no lower than a committed offset."""
    last: dict[int, int] = {}
    committed: dict[int, int] = {}
    for kind, partition, offset in events:
        if kind == "committed":
            committed[partition] = max(committed.get(partition, 0), offset)
            continue
        previous = last.get(partition, -1)
        if offset != previous + 1:
            assert offset <= previous, f"partition {partition}: read {offset} after {previous}, skipping records"
            floor = committed.get(partition, 0)
            assert offset >= floor, f"partition {partition}: read again from {offset}, below committed {floor}"
        last[partition] = offset


@pytest.fixture
def restartable_postgres(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test's own, as it is stopped and started mid-test
    (``postgres_server``: skipped or failed like the others when PostgreSQL is absent)."""
    server = PostgresServer(fsync=False)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("down_s", [0, SESSION_MS / 1000 + 1], ids=["within-a-lease", "past-every-lease"])
def test_brokers_reconnect_after_the_database_restarts_and_lose_nothing(
    tmp_path: Path, restartable_postgres: PostgresServer, topic_name: str, down_s: float
) -> None:
    """PostgreSQL stopped (fast: every session ended, open transactions aborted), then
    started again on the same data directory, while an idempotent acks=all producer and
    a two-member group run over three brokers. Down briefly, the brokers keep their
    leases and commit what they queued; down past the leases, every broker gives its
    partitions up and they are claimed and loaded anew."""
    pg = restartable_postgres
    with running_cluster(tmp_path, pg.url) as cluster:
        ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=3)
        cluster.wait_settled({1, 2, 3}, topic_name, 3)
        with group_run("confluent", cluster.bootstrap, [b.bootstrap for b in cluster.brokers[:2]], topic_name) as run:
            run.wait_progress(0, 30)
            time.sleep(1)
            before = committed_offsets(cluster.bootstrap, run.group, topic_name, 3)
            assert sum(o for o in before.values() if o > 0) > 0
            pg.halt("fast")
            acked_at_halt = run.last_acked_offsets(3)
            time.sleep(down_s)
            pg.resume()
            resumed_at = time.monotonic()
            back = run.wait_progress(resumed_at, 40)
            print(f"database back: the group consumed and committed again after {back - resumed_at:.1f}s")
            cluster.wait_settled({1, 2, 3}, topic_name, 3)
            time.sleep(2)
            run.stop_producing()
            missing = run.wait_all_consumed(30)
            assert not missing, f"the group never consumed {len(missing)} acknowledged records, e.g. {sorted(missing)[:5]}"
        assert not run.errors, run.errors[:5]  # every failure the brokers answered was retriable
        acked_last = run.last_acked_offsets(3)
        assert all(acked_last[p] > acked_at_halt[p] for p in range(3)), (acked_at_halt, acked_last)  # every leader writes again
        assert_group_read_in_order(run.events)
        after = committed_offsets(cluster.bootstrap, run.group, topic_name, 3)
        assert all(after[p] >= before[p] for p in before), (before, after)
        assert_acked_once_in_log(cluster, run)


def test_a_broker_cut_off_from_a_hung_database_stops_leading(
    tmp_path: Path, restartable_postgres: PostgresServer, topic_name: str
) -> None:
    """PostgreSQL stopped dead (SIGSTOP: connections open, nothing answered, as a host
    cut off by the network): the heartbeat's statements time out, and once a session
    passed since its last renewal the leader stops serving the partition (its lease may
    be another's by now), answering NOT_LEADER_OR_FOLLOWER. Resumed, the cluster settles
    again and nothing acknowledged with acks=all was lost."""
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.errors import ErrorCode
    from slipstream.protocol.records import ProducerRecord, build_batch

    pg = restartable_postgres
    with running_cluster(tmp_path, pg.url) as cluster:
        ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=1)
        leader = cluster.by_node(cluster.wait_settled({1, 2, 3}, topic_name, 1)[(topic_name, 0)])
        acks = ck_produce(leader.bootstrap, topic_name, range(5))
        probe = pr.ProduceRequest(acks=1, timeout_ms=5_000, topic_data=[pr.ProduceRequestTopicData(
            name=topic_name, partition_data=[pr.ProduceRequestPartitionData(
                index=0, records=memoryview(build_batch([ProducerRecord(b"probe", b"while the database hangs")])),
            )],
        )])  # fmt: skip

        async def probe_until_refused() -> list[int]:
            """acks=1 (no database round trip) straight to the leader, until it refuses."""
            conn = await BrokerConnection(leader.host, leader.port).connect()
            answers: list[int] = []
            try:
                deadline = time.monotonic() + 4 * SESSION_MS / 1000 + 10
                while not answers or answers[-1] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    if time.monotonic() > deadline:
                        break
                    response = await conn.request(pr.SPEC, probe, version=9)
                    answers.append(int(response.responses[0].partition_responses[0].error_code))
                    await asyncio.sleep(0.3)
                return answers
            finally:
                await conn.close()

        pg.pause()
        try:
            answers = asyncio.run(probe_until_refused())
        finally:
            pg.unpause()
        assert answers[-1] == ErrorCode.NOT_LEADER_OR_FOLLOWER, answers
        cluster.wait_settled({1, 2, 3}, topic_name, 1)
        after = ck_produce(cluster.bootstrap, topic_name, range(5, 10))
        records = [r for r in ck_consume(cluster.bootstrap, topic_name, 10, timeout=30) if r.key != "probe"]
        verify_records(records, range(10), acks={**acks, **after})


def test_a_paused_broker_whose_lease_expired_cannot_write(cluster: Cluster, topic_name: str) -> None:
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import produce as pr
    from slipstream.protocol.errors import ErrorCode
    from slipstream.protocol.records import ProducerRecord, build_batch

    ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=1)
    leader_node = cluster.wait_settled({1, 2, 3}, topic_name, 1)[(topic_name, 0)]
    paused = cluster.by_node(leader_node)
    ck_produce(paused.bootstrap, topic_name, range(5))

    def produce_request(value: bytes) -> pr.ProduceRequest:
        batch = build_batch([ProducerRecord(b"zombie", value)])
        return pr.ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[pr.ProduceRequestTopicData(
            name=topic_name, partition_data=[pr.ProduceRequestPartitionData(index=0, records=memoryview(batch))],
        )])  # fmt: skip

    async def zombie_write() -> int:
        conn = await BrokerConnection(paused.host, paused.port, request_timeout_s=60).connect()
        try:
            os.kill(paused.pid, signal.SIGSTOP)
            # Sent while it sleeps: the broker reads it only after SIGCONT, when its lease is gone.
            pending = asyncio.ensure_future(conn.request(pr.SPEC, produce_request(b"from-the-paused-broker"), version=9))
            await asyncio.sleep(0.2)
            others = {1, 2, 3} - {leader_node}
            await asyncio.get_running_loop().run_in_executor(None, lambda: cluster.wait_settled(others, topic_name, 1))
            os.kill(paused.pid, signal.SIGCONT)
            response = await pending
            return int(response.responses[0].partition_responses[0].error_code)
        finally:
            await conn.close()

    error = asyncio.run(zombie_write())
    assert error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    new_leader = cluster.by_node(cluster.wait_settled({1, 2, 3}, topic_name, 1, timeout=30)[(topic_name, 0)])
    ck_produce(new_leader.bootstrap, topic_name, range(5, 10))
    records = ck_consume(new_leader.bootstrap, topic_name, 10, timeout=30)
    assert [r.key for r in records] == [f"k{i}" for i in range(10)]  # no zombie record, no gap


def test_a_paused_coordinator_whose_lease_expired_cannot_write_group_records(cluster: Cluster, topic_name: str) -> None:
    """The group side of the lease check: an OffsetCommit read by the coordinator only
    after SIGCONT, when another broker owns the group's offsets partition, is refused
    with a retriable coordinator error, and the new coordinator keeps the offset
    committed before the pause."""
    from confluent_kafka import Consumer, TopicPartition

    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import offset_commit as oc
    from slipstream.protocol.errors import ErrorCode

    ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=1)
    group = f"{topic_name}-group"
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    coordinator = cluster.wait_settled({1, 2, 3}, topic_name, 1)[(OFFSETS_TOPIC, offsets_partition)]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    consumer.close()
    paused = cluster.by_node(coordinator)
    commit = oc.OffsetCommitRequest(group_id=group, member_id="", topics=[oc.OffsetCommitRequestTopic(
        name=topic_name, partitions=[oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=99)],
    )])  # fmt: skip

    async def zombie_commit() -> int:
        conn = await BrokerConnection(paused.host, paused.port, request_timeout_s=60).connect()
        try:
            os.kill(paused.pid, signal.SIGSTOP)
            pending = asyncio.ensure_future(conn.request(oc.SPEC, commit, version=8))
            await asyncio.sleep(0.2)
            others = {1, 2, 3} - {coordinator}
            await asyncio.get_running_loop().run_in_executor(None, lambda: cluster.wait_settled(others))
            os.kill(paused.pid, signal.SIGCONT)
            response = await pending
            return int(response.topics[0].partitions[0].error_code)
        finally:
            await conn.close()

    error = asyncio.run(zombie_commit())
    assert error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE), ErrorCode(error)
    cluster.wait_settled({1, 2, 3})
    assert committed_offsets(cluster.bootstrap, group, topic_name, 1) == {0: 1}


def test_groups_coordinated_by_every_broker_are_listed_through_one(cluster: Cluster, topic_name: str) -> None:
    """Each broker answers ListGroups with the groups it coordinates (as Kafka's brokers
    do); confluent-kafka's and Slipstream's admin clients ask every broker, so a listing
    bootstrapped through one broker holds the groups of all three."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from slipstream.client.admin import Admin

    ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=1)
    owners = cluster.wait_settled({1, 2, 3}, topic_name, 1)
    groups: dict[int, str] = {}  # coordinating node -> a group it coordinates
    for i in range(200):
        name = f"{topic_name}-g{i}"
        groups.setdefault(owners[(OFFSETS_TOPIC, partition_for(name, OFFSETS_PARTITIONS))], name)
        if len(groups) == 3:
            break
    assert sorted(groups) == [1, 2, 3]
    for name in groups.values():  # an offsets-only group, as after a consumer left
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": name, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 0)], asynchronous=False)
        consumer.close()

    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import list_groups as lg

    async def listed_by(broker: BrokerProcess) -> set[str]:
        conn = await BrokerConnection(broker.host, broker.port).connect()
        try:
            response = await conn.request(lg.SPEC, lg.ListGroupsRequest())
            assert response.error_code == 0, response
            return {g.group_id for g in response.groups} & set(groups.values())
        finally:
            await conn.close()

    for node, name in groups.items():
        assert asyncio.run(listed_by(cluster.by_node(node))) == {name}

    one = cluster.brokers[0].bootstrap
    admin = AdminClient({"bootstrap.servers": one})  # kept: the listing dies with its client
    listed = admin.list_consumer_groups(request_timeout=20).result(timeout=30)
    assert not listed.errors, listed.errors
    assert set(groups.values()) <= {g.group_id for g in listed.valid}

    async def slipstream_listing() -> set[str]:
        async with Admin(one) as admin:
            return {g.group_id for g in await admin.list_groups()}

    assert set(groups.values()) <= asyncio.run(slipstream_listing())


def test_acls_and_scram_credentials_made_through_one_broker_reach_the_others(
    tmp_path: Path, postgres_url: str, topic_name: str
) -> None:
    """ACLs and SCRAM users are documents in the database: a change made through one
    broker is followed by the others at their next heartbeat (each broker authorizes
    and authenticates from what it holds in memory)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    secured = ("--set", "authorizer=acl", "--set", "super.users=User:ANONYMOUS")  # PLAINTEXT: ANONYMOUS
    with running_cluster(tmp_path, postgres_url, secured) as cluster:
        one = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
        binding = AclBinding(
            ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:alice", "*",
            AclOperation.READ, AclPermissionType.ALLOW,
        )  # fmt: skip
        assert one.create_acls([binding])[binding].result(timeout=20) is None
        user = f"{topic_name[:40]}-user"
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
        for future in one.alter_user_scram_credentials([upsert]).values():
            assert future.result(timeout=20) is None

        for broker in cluster.brokers:  # the change went to one of them: all three follow
            deadline = time.monotonic() + 10
            while True:
                acls, mechanisms = asyncio.run(security_documents_of(broker, user))
                if ((topic_name, "User:alice") in acls and mechanisms) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert (topic_name, "User:alice") in acls, (broker.port, acls)
            assert mechanisms == [ScramMechanism.SCRAM_SHA_256.value], (broker.port, mechanisms)


async def security_documents_of(broker: BrokerProcess, user: str) -> tuple[set[tuple[str, str]], list[int]]:
    """What ``broker`` itself holds: every ACL's (resource name, principal), and the SCRAM
    mechanisms of ``user``."""
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import describe_acls as da
    from slipstream.protocol.apis import describe_user_scram_credentials as ds

    any_ = 1  # the ANY of resource type, pattern type, operation and permission filters
    conn = await BrokerConnection(broker.host, broker.port).connect()
    try:
        acls = await conn.request(da.SPEC, da.DescribeAclsRequest(
            resource_type_filter=any_, resource_name_filter=None, pattern_type_filter=any_,
            principal_filter=None, host_filter=None, operation=any_, permission_type=any_,
        ))  # fmt: skip
        users = await conn.request(
            ds.SPEC, ds.DescribeUserScramCredentialsRequest(users=[ds.DescribeUserScramCredentialsRequestUser(name=user)])
        )
    finally:
        await conn.close()
    assert acls.error_code == 0 and users.error_code == 0, (acls, users)
    held = {(r.resource_name, a.principal) for r in acls.resources for a in r.acls}
    found = [i.mechanism for result in users.results if result.error_code == 0 for i in result.credential_infos]
    return held, found


@pytest.mark.java
def test_java_client_produces_through_one_broker_and_consumes_through_another(
    cluster: Cluster, java_driver: object, topic_name: str
) -> None:
    from conformance_helpers import java_acks, java_records, verify_acks

    one, two, three = cluster.brokers
    ck_create_topic(one.bootstrap, topic_name, partitions=3)
    cluster.wait_settled({1, 2, 3}, topic_name, 3)
    produced = java_driver.run(two.bootstrap, "produce", topic_name, "60", "lz4")  # type: ignore[attr-defined]
    acks = java_acks(produced)
    verify_acks(acks, 60)
    consumed = java_driver.run(  # type: ignore[attr-defined]
        three.bootstrap, "consume", topic_name, "60", "--from-beginning", "--timeout-ms", "30000"
    )
    verify_records(java_records(consumed), range(60), acks=acks)


@pytest.mark.java
@pytest.mark.parametrize("group_protocol", GROUP_PROTOCOLS)
def test_java_consumer_group_spread_over_brokers(
    cluster: Cluster, java_driver: object, topic_name: str, group_protocol: str
) -> None:
    """Three Java members, each bootstrapped through a different broker (so one of them
    through the group's coordinator), fetching from leaders spread over all three, while
    a producer writes: every partition is assigned to exactly one member, every record is
    processed by its partition's owner, and the offsets the members committed are what an
    admin client bootstrapped through a broker other than the coordinator reads."""
    from test_groups_harness import (
        TOPIC_PARTITIONS,
        PacedProducer,
        admin_client,
        finish_and_verify,
        mono_ns,
        progressed,
        start_java_member,
        wait_stable,
    )

    ck_create_topic(cluster.brokers[0].bootstrap, topic_name, partitions=TOPIC_PARTITIONS)
    leaders = cluster.wait_settled({1, 2, 3}, topic_name, TOPIC_PARTITIONS)
    assert {leaders[(topic_name, p)] for p in range(TOPIC_PARTITIONS)} == {1, 2, 3}
    group = f"{topic_name}-group"
    coordinator = leaders[(OFFSETS_TOPIC, partition_for(group, OFFSETS_PARTITIONS))]
    observer = cluster.by_node(next(n for n in (1, 2, 3) if n != coordinator))
    admin = admin_client(observer.bootstrap)
    producer = PacedProducer(cluster.bootstrap, topic_name, rate=100).start()
    members = []
    try:
        for node in (1, 2, 3):
            members.append(start_java_member(
                java_driver, f"member-{node}", cluster.by_node(node).bootstrap, topic_name, group,
                session_ms=GROUP_SESSION_MS, heartbeat_ms=HEARTBEAT_MS, group_protocol=group_protocol,
            ))  # fmt: skip
        wait_stable(admin, group, members, timeout=60)
        assert all(m.owned() for m in members), {m.name: m.owned() for m in members}
        progressed(members, mono_ns())  # records flow to each member through its own broker
        acks = producer.stop()
        committed, report = finish_and_verify(admin, observer, group, topic_name, members, acks)
        print(f"{group_protocol}: coordinator {coordinator}, committed {committed}; {report}")
    finally:
        with contextlib.suppress(AssertionError):
            producer.stop()
        for m in members:
            m.reap()
