"""A cluster member renews its leases while the partitions it gained load
(broker/cluster/member.py): loads are moves of their own, not part of the heartbeat.

The database is a fake (the lease rules of broker/cluster/database.py over a dict, on
a manual database clock), the store's loads wait for the test to let them end, and the
member's clock is a manual one."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.broker.cluster import database
from slipstream.broker.cluster.assignment import BrokerRow, Lease, ListenerEndpoint, TopicPartition
from slipstream.broker.cluster.member import ClusterMember
from slipstream.broker.cluster.view import ClusterView
from slipstream.coordinator import OFFSETS_TOPIC
from slipstream.log.api import LogConfig

pytestmark = pytest.mark.timeout(30)

SESSION_MS = 6000  # a beat every 2000 ms
ME = 1
T0, T1 = ("t", 0), ("t", 1)
O0 = (OFFSETS_TOPIC, 0)


class FakeDatabase:
    """The cluster's rows: this broker, ``others`` (live ones, by node id) and the leases,
    on a manual clock."""

    def __init__(self) -> None:
        self.now_ms = 1_000_000
        self.others: list[int] = []
        self.leases: dict[TopicPartition, Lease] = {}
        self.beats = 0
        self.claims: list[list[TopicPartition]] = []

    async def beat(
        self, conn: Any, node_id: int, listeners: Sequence[ListenerEndpoint], ttl_ms: int, *, timeout_s: float | None = None
    ) -> database.Beat:
        self.beats += 1
        renewed = {}
        for tp, lease in self.leases.items():
            if lease.owner == node_id and lease.valid(self.now_ms):
                self.leases[tp] = Lease(node_id, lease.epoch, self.now_ms + ttl_ms)
                renewed[tp] = lease.epoch
        brokers = [BrokerRow(n, "h", 1, self.now_ms) for n in sorted([node_id, *self.others])]
        return database.Beat(self.now_ms, brokers, renewed, dict(self.leases))

    async def claim(self, conn: Any, node_id: int, wanted: list[TopicPartition], ttl_ms: int) -> dict[TopicPartition, int]:
        self.claims.append(list(wanted))
        won = {}
        for tp in wanted:
            lease = self.leases.get(tp)
            if lease is None or not lease.valid(self.now_ms) or lease.owner == node_id:
                epoch = 1 if lease is None else lease.epoch + 1
                self.leases[tp] = Lease(node_id, epoch, self.now_ms + ttl_ms)
                won[tp] = epoch
        return won

    async def all_leases(self, conn: Any) -> dict[TopicPartition, Lease]:
        return dict(self.leases)

    async def release(self, conn: Any, node_id: int, held: dict[TopicPartition, int]) -> None:
        for tp, epoch in held.items():
            lease = self.leases.get(tp)
            if lease is not None and lease.owner == node_id and lease.epoch == epoch:
                self.leases[tp] = Lease(node_id, epoch, 0)


class SlowStore:
    """Loads that end when the test says (``finish``); ``started`` is set once one runs."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.finish = threading.Event()
        self.fail_next = False
        self.reloads: list[tuple[str, int, int]] = []
        self.unloads: list[tuple[str, int]] = []

    def reload(self, topic: str, partition: int, config: LogConfig, epoch: int) -> object:
        self.started.set()
        # Bounded: a failed test's event loop, closing, waits for this thread.
        if not self.finish.wait(10):
            raise TimeoutError("the test never let this load end")
        if self.fail_next:
            self.fail_next = False
            raise OSError("the database went away")
        self.reloads.append((topic, partition, epoch))
        return ("loaded", topic, partition, epoch)

    def unload(self, topic: str, partition: int, config: LogConfig) -> object:
        self.unloads.append((topic, partition))
        return ("placeholder", topic, partition)


class FakeTopics:
    def __init__(self, partitions: int) -> None:
        self.topics = {"t": SimpleNamespace(name="t", partitions=[("placeholder", "t", i) for i in range(partitions)])}

    def get(self, name: str) -> Any:
        return self.topics.get(name)

    def fetch_document(self) -> None:
        return None  # nothing changed through other brokers


class ManualClock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


class FakePool:
    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[object]:
        yield object()


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch) -> FakeDatabase:
    fake = FakeDatabase()
    monkeypatch.setattr(database, "beat", fake.beat)
    monkeypatch.setattr(database, "claim", fake.claim)
    monkeypatch.setattr(database, "leases", fake.all_leases)
    monkeypatch.setattr(database, "release", fake.release)
    return fake


@pytest.fixture
def store() -> Iterator[SlowStore]:
    slow = SlowStore()
    yield slow
    slow.finish.set()  # a failed test leaves no load waiting


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def member_of(store: SlowStore, clock: ManualClock, partitions: int = 2) -> ClusterMember:
    state = SimpleNamespace(
        config=SimpleNamespace(cluster_broker_session_ms=SESSION_MS),
        topics=FakeTopics(partitions),
        topic_log_config=lambda name: LogConfig(),
        producer_states={},
        advertised={},
        advertised_host="h",
        advertised_port=1,
        authorizer=None,
        acl_store=SimpleNamespace(metadata=None),
        credentials=SimpleNamespace(metadata=None),
    )
    member = ClusterMember(state, store, "postgresql://unused", ClusterView(ME), clock=clock)  # type: ignore[arg-type]
    member._pool = FakePool()  # (the real one is opened by start())
    return member


async def load_started(store: SlowStore) -> None:
    await asyncio.get_running_loop().run_in_executor(None, store.started.wait)


async def beat_when_due(member: ClusterMember, clock: ManualClock, db: FakeDatabase) -> None:
    """Move both clocks to when the next beat is due, and beat."""
    step = member.renewal.wait_ms(clock.now_ms)
    assert step > 0
    clock.now_ms += step
    db.now_ms += step
    await member.tick()


async def test_a_heartbeat_returns_before_the_partitions_it_gained_load(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock)
    first = asyncio.ensure_future(member.tick())
    await load_started(store)
    assert first.done()  # the heartbeat did not wait for the load it queued
    assert member.loading == {T0: 1, T1: 1}
    assert member.view.held == {}  # not served until loaded

    await beat_when_due(member, clock, db)  # the first load still runs
    assert db.beats == 2
    assert member.renewal.renewed_ms == clock.now_ms == member.renewal.interval_ms
    assert db.leases[T0] == db.leases[T1] == Lease(ME, 1, db.now_ms + SESSION_MS)  # renewed
    assert db.claims == [[T0, T1]]  # neither claimed again while loading
    assert store.reloads == []

    store.finish.set()
    await member._moves.join()
    assert store.reloads == [("t", 0, 1), ("t", 1, 1)]
    assert member.view.held == {T0: 1, T1: 1}
    assert member.loading == {}
    assert member.state.topics.get("t").partitions == [("loaded", "t", 0, 1), ("loaded", "t", 1, 1)]


async def test_a_partition_whose_lease_lapses_while_it_loads_is_not_served(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock, partitions=1)
    await member.tick()
    await load_started(store)
    db.leases[T0] = Lease(2, 2, db.now_ms + 10 * SESSION_MS)  # another broker's now
    await beat_when_due(member, clock, db)
    assert member.loading == {}

    store.finish.set()
    await member._moves.join()
    assert store.reloads == [("t", 0, 1)]
    assert store.unloads == [("t", 0)]  # the copy loaded is dropped at once
    assert member.view.held == {}
    assert member.state.topics.get("t").partitions == [("placeholder", "t", 0)]
    await beat_when_due(member, clock, db)
    assert db.claims == [[T0]]  # another's valid lease is not claimed


async def test_a_partition_whose_load_failed_is_claimed_again_by_a_later_heartbeat(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock)
    store.fail_next = True  # t-0's load
    store.finish.set()
    await member.tick()
    await member._moves.join()
    assert member.view.held == {T1: 1}  # the other one is served all the same
    assert member.loading == {}

    await beat_when_due(member, clock, db)
    await member._moves.join()
    assert db.claims == [[T0, T1], [T0]]
    assert member.view.held == {T0: 2, T1: 1}  # a new epoch: its own lease, claimed again
    assert store.reloads == [("t", 1, 1), ("t", 0, 2)]


async def test_a_partition_still_loading_is_handed_over_once_served(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock)
    await member.tick()
    await load_started(store)
    db.others = [2]  # a broker joins: one of the two partitions is now its to lead
    await beat_when_due(member, clock, db)
    assert member.loading == {T0: 1, T1: 1}  # not handed over while it loads
    assert db.leases[T1] == Lease(ME, 1, db.now_ms + SESSION_MS)

    store.finish.set()
    await member._moves.join()
    assert member.view.held == {T0: 1, T1: 1}
    await beat_when_due(member, clock, db)
    handed = set(member.view.held) ^ {T0, T1}
    assert len(handed) == 1  # gone from what is served as soon as decided
    await member._moves.join()
    (tp,) = handed
    assert store.unloads == [tp]
    assert db.leases[tp].expires_ms == 0  # released: the joining broker claims it at once
    assert db.claims == [[T0, T1]]


class FakeGroups:
    """The group coordinator's side of the moves: what it was told, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def stop_coordinating(self, partitions: list[int]) -> None:
        self.calls.append(("stop", sorted(partitions)))

    async def load_partitions(self, partitions: list[int]) -> None:
        self.calls.append(("load", sorted(partitions)))

    async def unload_partitions(self, partitions: list[int]) -> None:
        self.calls.append(("unload", sorted(partitions)))


async def test_a_lost_offsets_partition_stops_coordinating_before_its_unload_turn(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock, partitions=1)
    topics = member.state.topics.topics
    topics[OFFSETS_TOPIC] = SimpleNamespace(name=OFFSETS_TOPIC, partitions=[("placeholder", OFFSETS_TOPIC, 0)])
    groups = FakeGroups()
    member.groups = groups  # type: ignore[assignment]
    store.finish.set()
    await member.tick()
    await member._moves.join()
    assert member.view.held == {O0: 1, T0: 1}
    assert groups.calls == [("load", [0])]

    # t grows a partition whose load takes its time ...
    store.finish.clear()
    store.started.clear()
    topics["t"].partitions.append(("placeholder", "t", 1))
    await beat_when_due(member, clock, db)
    await load_started(store)
    # ... and meanwhile another broker has taken the offsets partition over.
    db.leases[O0] = Lease(2, 2, db.now_ms + 10 * SESSION_MS)
    await beat_when_due(member, clock, db)
    assert O0 not in member.view.held
    assert store.unloads == []  # the unload waits behind t-1's load ...
    assert groups.calls == [("load", [0]), ("stop", [0])]  # ... its groups are not coordinated meanwhile

    store.finish.set()
    await member._moves.join()
    assert store.unloads == [O0]
    assert groups.calls == [("load", [0]), ("stop", [0]), ("unload", [0])]
    assert member.view.held == {T0: 1, T1: 1}


async def test_a_partition_handed_over_is_coordinated_until_its_unload(
    db: FakeDatabase, store: SlowStore, clock: ManualClock
) -> None:
    member = member_of(store, clock, partitions=0)
    topics = member.state.topics.topics
    topics[OFFSETS_TOPIC] = SimpleNamespace(
        name=OFFSETS_TOPIC, partitions=[("placeholder", OFFSETS_TOPIC, i) for i in range(2)]
    )
    groups = FakeGroups()
    member.groups = groups  # type: ignore[assignment]
    store.finish.set()
    await member.tick()
    await member._moves.join()
    db.others = [2]  # a broker joins: one offsets partition is now its to lead
    await beat_when_due(member, clock, db)
    await member._moves.join()
    (handed,) = {O0, (OFFSETS_TOPIC, 1)} - set(member.view.held)
    # Its lease was held until the unload committed what was queued: no early stop.
    assert groups.calls == [("load", [0, 1]), ("unload", [handed[1]])]
    assert db.leases[handed].expires_ms == 0
