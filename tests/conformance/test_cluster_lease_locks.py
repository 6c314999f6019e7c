"""What a commit's lease check locks, against a real PostgreSQL (issue 16).

A commit locks its partitions' lease rows FOR KEY SHARE until its transaction ends.
The heartbeat's renewal (an UPDATE of the expiry only) does not wait for it; a claim
(which moves the epoch, a key column) does, so the new leader loads what the commit
stored; and a commit that waited for a claim finds the new epoch and stores nothing.
Each test holds a real commit's transaction open (``HeldCommitStore``) or a claim's,
and tells waiting from not waiting by what PostgreSQL says blocks whom
(``pg_blocking_pids``), not by time.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from slipstream.broker.cluster import database
from slipstream.broker.cluster.assignment import ListenerEndpoint
from slipstream.log.api import LogConfig, LogFenced
from slipstream.log.postgres import PostgresLogStore
from slipstream.log.postgres import store as store_module
from slipstream.log.postgres.store import PostgresLog
from slipstream.protocol.records import ProducerRecord, build_batch

pytestmark = pytest.mark.conformance

TTL_MS = 60_000
LISTENERS = [ListenerEndpoint("PLAINTEXT", "127.0.0.1", 9092)]
TP = ("t", 0)


class HeldCommitStore(PostgresLogStore):
    """A store whose next commit, once its statement ran, keeps its transaction (and
    so its locks) open until ``release`` is set; ``holding`` is set meanwhile."""

    def __init__(self, url: str, node_id: int) -> None:
        super().__init__(url, node_id=node_id)
        self.hold_next = False
        self.holding = threading.Event()
        self.release = threading.Event()
        self.backend_pid = 0

    async def _store(self, conn: Any, *, work: list[Any]) -> None:
        if not self.hold_next:
            await super()._store(conn, work=work)
            return
        self.hold_next = False
        async with conn.transaction():
            await super()._store(conn, work=work)
            self.backend_pid = conn.get_server_pid()
            self.holding.set()
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait)


@pytest.fixture(autouse=True, params=["statement", "streamed"])
def commit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways a commit is stored: one statement, or the function then COPY."""
    if request.param == "streamed":
        monkeypatch.setattr(store_module, "STATEMENT_COMMIT_BYTES", -1)


@pytest.fixture
def old_leader(postgres_url: str) -> Iterator[HeldCommitStore]:
    store = HeldCommitStore(postgres_url, node_id=1)
    yield store
    store.release.set()
    with contextlib.suppress(LogFenced):  # the fenced test leaves a fenced log behind
        store.close()


def append(log: PostgresLog, value: bytes) -> None:
    log.append([bytearray(build_batch([ProducerRecord(None, value, timestamp_ms=0)]))], now_ms=0, log_append_time=False)


async def connect(url: str) -> Any:
    import asyncpg

    return await asyncpg.connect(url)


async def blocked_by(observer: Any, task: asyncio.Task[Any], pid: int, blocker: int) -> bool:
    """Whether backend ``pid``, running ``task``, waits for a lock of backend ``blocker``
    (False once the task is done without having been seen waiting)."""
    while not task.done():
        if blocker in await observer.fetchval("SELECT pg_blocking_pids($1)", pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def first_blocked_by(observer: Any, blocker: int, pending: asyncio.Future[Any]) -> int:
    """The backend that waits for a lock of ``blocker`` (while ``pending`` runs)."""
    while not pending.done():
        found = await observer.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) LIMIT 1", blocker
        )
        if found is not None:
            return int(found)
        await asyncio.sleep(0.01)
    raise AssertionError("finished without waiting for the lock")


async def lead(store: PostgresLogStore, node: int, conn: Any) -> PostgresLog:
    """Claim t-0 for ``node`` and load it at the epoch won."""
    won = await database.claim(conn, node, [TP], TTL_MS)
    return await asyncio.get_running_loop().run_in_executor(None, store.reload, *TP, LogConfig(), won[TP])


async def held_commit(store: HeldCommitStore, log: PostgresLog, value: bytes) -> asyncio.Future[None]:
    """A commit of ``value`` whose transaction stays open until ``store.release``."""
    loop = asyncio.get_running_loop()
    append(log, value)
    store.hold_next = True
    commit = loop.run_in_executor(None, log.flush)
    await loop.run_in_executor(None, store.holding.wait)
    return commit


async def stored_values(url: str) -> list[int]:
    """The base offsets stored for t-0, as a new leader loads them."""
    conn = await connect(url)
    try:
        rows = await conn.fetch(
            "SELECT b.base_offset FROM log_batches AS b JOIN log_partitions AS p ON p.id = b.partition_id "
            "WHERE p.topic = $1 AND p.partition = $2 ORDER BY 1",
            *TP,
        )
        return [r["base_offset"] for r in rows]
    finally:
        await conn.close()


async def test_a_renewal_does_not_wait_for_a_commit_in_flight(old_leader: HeldCommitStore, postgres_url: str) -> None:
    conn, heart, observer = await connect(postgres_url), await connect(postgres_url), await connect(postgres_url)
    try:
        log = await lead(old_leader, 1, conn)
        commit = await held_commit(old_leader, log, b"in flight")
        renewal = asyncio.ensure_future(database.beat(heart, 1, LISTENERS, TTL_MS))
        waited = await blocked_by(observer, renewal, heart.get_server_pid(), old_leader.backend_pid)
        assert not waited, "the renewal waited for the commit's lock on the lease row"
        assert not commit.done()  # answered while the commit's transaction was still open
        assert renewal.result().renewed == {TP: 1}
        old_leader.release.set()
        await commit
        assert await stored_values(postgres_url) == [0]
    finally:
        old_leader.release.set()  # (a failed assertion must not leave the others waiting)
        for c in (conn, heart, observer):
            await c.close()


async def test_a_claim_waits_for_a_commit_in_flight_and_loads_it(
    old_leader: HeldCommitStore, postgres_url: str
) -> None:
    conn, claimer, observer = await connect(postgres_url), await connect(postgres_url), await connect(postgres_url)
    new_leader = PostgresLogStore(postgres_url, node_id=2, lazy=True)
    try:
        log = await lead(old_leader, 1, conn)
        append(log, b"acknowledged")
        await asyncio.get_running_loop().run_in_executor(None, log.flush)
        commit = await held_commit(old_leader, log, b"in flight")
        # The lease runs out while the commit holds its row: the expiry is no key, so
        # this does not wait either, and the row's new version keeps the commit's lock.
        await conn.execute("UPDATE partition_leases SET expires_ms = 0")
        claim = asyncio.ensure_future(database.claim(claimer, 2, [TP], TTL_MS))
        assert await blocked_by(observer, claim, claimer.get_server_pid(), old_leader.backend_pid)
        old_leader.release.set()
        await commit  # acknowledged: it must be in what the new leader loads
        assert await claim == {TP: 2}
        loaded = await asyncio.get_running_loop().run_in_executor(None, new_leader.reload, *TP, LogConfig(), 2)
        assert loaded.log_end_offset == 2
        assert await stored_values(postgres_url) == [0, 1]
    finally:
        old_leader.release.set()
        new_leader.close()
        for c in (conn, claimer, observer):
            await c.close()


async def test_a_commit_that_waited_for_a_claim_is_fenced_and_stores_nothing(
    old_leader: HeldCommitStore, postgres_url: str
) -> None:
    """The claim is this node's own, by a restarted process, while the old one (paused,
    say) still commits: the lease has not expired and the owner is the same, so only
    the epoch - read after the claim's lock went - tells the commit it lost the lease.
    (Another broker can only claim an expired lease, which the commit's expiry check
    already refuses, unless it read the lease just before it expired.)"""
    conn, claimer, observer = await connect(postgres_url), await connect(postgres_url), await connect(postgres_url)
    loop = asyncio.get_running_loop()
    try:
        log = await lead(old_leader, 1, conn)
        append(log, b"acknowledged")
        await loop.run_in_executor(None, log.flush)
        async with claimer.transaction():  # the claim's lock held until it commits
            assert await database.claim(claimer, 1, [TP], TTL_MS) == {TP: 2}
            append(log, b"after the claim")
            commit = loop.run_in_executor(None, log.flush)
            await first_blocked_by(observer, claimer.get_server_pid(), commit)
        with pytest.raises(LogFenced, match="epoch 1"):
            await commit
        assert await stored_values(postgres_url) == [0]
        assert await conn.fetchval("SELECT next_offset FROM log_partitions") == 1
    finally:
        for c in (conn, claimer, observer):
            await c.close()


async def test_brokers_first_claiming_the_same_partitions_at_once_win_each_exactly_once(
    old_leader: HeldCommitStore, postgres_url: str
) -> None:
    """Partitions no broker has held yet, claimed by four brokers at the same moment, over
    and over: each is won by exactly one, at epoch 1, and no claim fails (the epoch key is
    a second unique index, which an upsert on (topic, partition) would not arbitrate)."""
    claimers = [await connect(postgres_url) for _ in range(4)]
    try:
        for round_ in range(40):
            wanted = [(f"fresh-{round_}", p) for p in range(6)]
            results = await asyncio.gather(
                *(database.claim(c, node, wanted, TTL_MS) for node, c in enumerate(claimers, start=1))
            )
            won = [tp for result in results for tp in result]
            assert sorted(won) == sorted(wanted)
            assert all(epoch == 1 for result in results for epoch in result.values())
    finally:
        for c in claimers:
            await c.close()
