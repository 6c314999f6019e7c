"""This broker's part in the cluster: heartbeat, renew, claim and hand over leases.

Every ``session / 3`` ms (timed by ``renewal.RenewalSchedule``): record the heartbeat,
renew the leases held (a lease the database no longer gives back is lost: the partition
stops being served at once), read the registry and the leases, let ``assignment.plan``
say what to claim and what to hand over, and carry that out. Gaining a partition loads
it from the database (the copy held while it was another broker's leader is stale);
losing one commits what it queued and keeps an empty placeholder. ``__consumer_offsets``
partitions also load or unload their groups in the group coordinator,
``__transaction_state`` partitions their transactions in the transaction coordinator.
Topics, ACLs and SCRAM credentials changed through other brokers are read back from the
database every heartbeat.

Loads and unloads are *moves*, carried out one at a time, in the order decided, by a
task of their own (``_carry_out_moves``): a heartbeat decides and claims, then returns,
so loading many gained partitions never holds the next renewal back. A partition
claimed but not yet served is ``loading``: renewed with the others, neither claimed
again nor handed over meanwhile, and dropped unserved if its lease lapses before its
load ends. A partition lost or handed over stops being served at once, when decided;
its unload follows as a move.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from ...coordinator import OFFSETS_TOPIC
from ...coordinator.transactions import TRANSACTION_STATE_TOPIC
from ...log.postgres.runner import keep_session
from ..listeners import PLAINTEXT
from ..security import acl_store
from ..security.credentials import FILE_NAME as CREDENTIALS_FILE
from . import database
from .assignment import ListenerEndpoint, TopicPartition, live_brokers, plan
from .renewal import RenewalSchedule, beat_interval_ms
from .view import ClusterView

if TYPE_CHECKING:
    from ..groups import GroupCoordinatorAdapter
    from ..state import BrokerState
    from ..transactions import TransactionCoordinatorAdapter

log = logging.getLogger(__name__)

Move = Callable[[], Awaitable[None]]


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClusterMember:
    def __init__(
        self, state: BrokerState, store: Any, database_url: str, view: ClusterView,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:  # fmt: skip
        self.state = state
        self.store = store  # PostgresLogStore
        self.view = view
        self.groups: GroupCoordinatorAdapter | None = None
        self.transactions: TransactionCoordinatorAdapter | None = None
        self._url = database_url
        self._pool: Any = None
        self._task: asyncio.Task[None] | None = None
        self.session_ms = state.config.cluster_broker_session_ms
        # Every connect and statement of the heartbeat but the renewal gives up after this:
        # a database that hangs (cut off, not refusing) fails the heartbeat, and
        # _check_session then stops serving partitions whose leases may be another broker's
        # by now. The renewal may take until the leases would expire (see renewal.py).
        self._timeout_s = max(beat_interval_ms(self.session_ms) / 1000, 1.0)
        self._clock = clock  # monotonic, ms: the renewal timing
        self.renewal = RenewalSchedule(self.session_ms, idle_timeout_ms=int(self._timeout_s * 1000))
        self._tick_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        # Loads and unloads decided by heartbeats, carried out in order by ``_mover``
        # (started with the first).
        self._moves: asyncio.Queue[Move] = asyncio.Queue()
        self._mover: asyncio.Task[None] | None = None
        # Claimed (lease epoch) but not yet served: a load queued or running.
        self.loading: dict[TopicPartition, int] = {}
        self._listener: Any = None  # the connection LISTENing on database.CHANNEL

    async def start(
        self, groups: GroupCoordinatorAdapter, transactions: TransactionCoordinatorAdapter | None = None
    ) -> None:
        import asyncpg

        self.groups = groups
        self.transactions = transactions
        self._pool = await asyncpg.create_pool(
            self._url, min_size=1, max_size=2, timeout=self._timeout_s, command_timeout=self._timeout_s,
            reset=keep_session,
        )
        await self._listen()
        await self.tick()
        await self._moves.join()  # the broker starts serving with its first partitions loaded
        async with self._pool.acquire() as conn:
            await database.notify(conn, "joined")  # live brokers hand partitions over now
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _listen(self) -> None:
        """(Re)open the LISTEN connection; a failure only means waking at the interval."""
        import asyncpg

        if self._listener is not None and not self._listener.is_closed():
            return
        try:
            self._listener = await asyncpg.connect(self._url, timeout=self._timeout_s)
            await self._listener.add_listener(database.CHANNEL, lambda *_: self._wake.set())
        except Exception as exc:
            log.warning("cannot listen for cluster changes (waking every %.1fs instead): %s", self.renewal.interval_ms / 1000, exc)
            self._listener = None

    async def stop(self) -> None:
        """Hand every lease over and leave the registry, so others take over at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._pool is None:
            return
        try:
            async with self._tick_lock:
                await self._moves.join()  # loads in flight end served, then handed over
                self._give_up(dict(self.view.held), release=True)
                await self._moves.join()
                async with self._pool.acquire() as conn:
                    await database.leave(conn, self.view.node_id)
        except Exception as exc:
            log.warning("leaving the cluster cleanly failed (leases will expire): %s", exc)
        if self._mover is not None:
            self._mover.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._mover
            self._mover = None
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None
        await self._pool.close()
        self._pool = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.renewal.wait_ms(self._clock()) / 1000)
            self._wake.clear()
            try:
                await self._listen()
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cluster heartbeat failed: %s", exc)
                self._check_session()

    def _check_session(self) -> None:
        """No renewal for a whole session: our leases may be another's by now, so stop
        serving them (their commits would be refused anyway)."""
        if (self.view.held or self.loading) and self.renewal.expired(self._clock()):
            given_up = len(self.view.held) + len(self.loading)
            log.warning("no heartbeat for %d ms: giving up %d partitions", self.session_ms, given_up)
            self.loading.clear()  # their loads end unserved
            self._give_up(dict(self.view.held), release=False)

    async def tick(self) -> None:
        async with self._tick_lock:
            await self._tick()

    async def _tick(self) -> None:
        view, me = self.view, self.view.node_id
        async with self._pool.acquire() as conn:
            sent = self._clock()
            try:
                beat = await database.beat(
                    conn, me, self._listeners(), self.session_ms, timeout_s=self.renewal.timeout_ms(sent) / 1000
                )
            except Exception:
                self.renewal.failed(self._clock())
                raise
            self.renewal.renewed(sent)
            now, rows, leases = beat.now_ms, beat.brokers, beat.leases
            lost = {tp: e for tp, e in view.held.items() if beat.renewed.get(tp) != e}
            if lost:
                log.warning("lost the lease of %d partitions: %s", len(lost), sorted(lost)[:10])
                self._give_up(lost, release=False)
            for tp, epoch in list(self.loading.items()):
                if beat.renewed.get(tp) != epoch:
                    del self.loading[tp]  # its load ends unserved
            await self._refresh_topics()
            await self._refresh_security()
            live = live_brokers(rows, now, self.session_ms)
            partitions = [
                (topic.name, index) for topic in list(self.state.topics.topics.values())
                for index in range(len(topic.partitions))
            ]
            decided = plan(me, partitions, [b.node_id for b in live], leases, {**view.held, **self.loading}, now)
            # One still loading is handed over by a later heartbeat, once served.
            handed = {tp: view.held[tp] for tp in decided.release if tp in view.held}
            if handed:
                self._give_up(handed, release=True)
            if decided.claim:
                won = await database.claim(conn, me, decided.claim, self.session_ms)
                if won:
                    self.loading.update(won)
                    self._queue(partial(self._load, won))
                    leases = await database.leases(conn)
            view.now_ms, view.live, view.leases = now, live, leases

    def _listeners(self) -> list[ListenerEndpoint]:
        """This broker's advertised listeners, the primary one first (as configured)."""
        advertised = self.state.advertised
        if not advertised:  # not started through listeners (tests): the one endpoint
            return [ListenerEndpoint(PLAINTEXT, self.state.advertised_host, self.state.advertised_port)]
        return [ListenerEndpoint(name, host, port) for name, (host, port) in advertised.items()]

    def _queue(self, move: Move) -> None:
        self._moves.put_nowait(move)
        if self._mover is None:
            self._mover = asyncio.get_running_loop().create_task(self._carry_out_moves())

    async def _carry_out_moves(self) -> None:
        """The mover: each load or unload in the order decided, one at a time."""
        while True:
            move = await self._moves.get()
            try:
                await move()
            except Exception as exc:  # what is left of it is decided again by a heartbeat
                log.warning("moving partitions failed: %s", exc)
            finally:
                self._moves.task_done()

    async def _load(self, won: dict[TopicPartition, int]) -> None:
        """A move: load and serve the partitions ``won`` that are still ``loading`` at
        that epoch. One whose load fails is no longer ``loading``: a later heartbeat
        claims it again (the others are served meanwhile)."""
        offsets: list[int] = []
        transactions: dict[int, int] = {}
        count = 0
        for (name, index), epoch in sorted(won.items()):
            try:
                served = await self._load_one(name, index, epoch)
            except Exception as exc:
                log.warning("%s-%d: loading failed (claimed again later): %s", name, index, exc)
                served = False
            finally:
                if self.loading.get((name, index)) == epoch:
                    del self.loading[(name, index)]
            count += served
            if served and name == OFFSETS_TOPIC:
                offsets.append(index)
            elif served and name == TRANSACTION_STATE_TOPIC:
                transactions[index] = epoch
        if count:
            log.info("now leading %d partitions (%d of %s)", count, len(offsets), OFFSETS_TOPIC)
        if offsets and self.groups is not None:
            await self.groups.load_partitions(offsets)
        if transactions and self.transactions is not None:
            # After the groups: markers re-sent at load find their pending offsets loaded.
            await self.transactions.load_partitions(transactions)

    async def _load_one(self, name: str, index: int, epoch: int) -> bool:
        """Load one partition and serve it if it is still ``loading`` at ``epoch`` once
        loaded (its lease may lapse meanwhile: the copy is dropped at once)."""
        if self.loading.get((name, index)) != epoch:  # its lease lapsed while queued
            return False
        topic = self.state.topics.get(name)
        if topic is None or index >= len(topic.partitions):
            return False
        loop = asyncio.get_running_loop()
        config = self.state.topic_log_config(name)
        plog = await loop.run_in_executor(None, self.store.reload, name, index, config, epoch)
        topic = self.state.topics.get(name)
        if topic is None or index >= len(topic.partitions):
            return False  # deleted meanwhile
        if self.loading.get((name, index)) != epoch:
            plog = await loop.run_in_executor(None, self.store.unload, name, index, config)
            topic.partitions[index] = plog
            return False
        topic.partitions[index] = plog
        self.state.producer_states.pop((name, index), None)
        self.view.held[(name, index)] = epoch
        return True

    def _give_up(self, lost: dict[TopicPartition, int], *, release: bool) -> None:
        """Stop serving ``lost`` now; their unload follows as a move.

        A lease lost (not handed over) may be another broker's already, so the groups and
        transactions of lost coordinator partitions stop being coordinated here at once,
        not when the unload's turn comes (it may wait behind loads). A partition handed
        over keeps its lease until its unload has committed what it queued."""
        if not lost:
            return
        for tp in lost:
            self.view.held.pop(tp, None)
        if not release:
            offsets = [index for name, index in lost if name == OFFSETS_TOPIC]
            if offsets and self.groups is not None:
                self.groups.stop_coordinating(offsets)
            transactions = [index for name, index in lost if name == TRANSACTION_STATE_TOPIC]
            if transactions and self.transactions is not None:
                self.transactions.stop_coordinating(transactions)
        self._queue(partial(self._unload, lost, release=release))

    async def _unload(self, lost: dict[TopicPartition, int], *, release: bool) -> None:
        """A move: commit what ``lost`` queued, keep placeholders of them, and hand the
        leases over if ``release``."""
        offsets = [index for name, index in lost if name == OFFSETS_TOPIC]
        if offsets and self.groups is not None:
            await self.groups.unload_partitions(offsets)
        transactions = [index for name, index in lost if name == TRANSACTION_STATE_TOPIC]
        if transactions and self.transactions is not None:
            await self.transactions.unload_partitions(transactions)
        loop = asyncio.get_running_loop()
        for name, index in lost:
            topic = self.state.topics.get(name)
            if topic is None or index >= len(topic.partitions):
                continue
            config = self.state.topic_log_config(name)
            try:
                plog = await loop.run_in_executor(None, self.store.unload, name, index, config)
            except Exception as exc:  # fenced: what it queued was never acknowledged
                log.info("%s-%d: dropping writes this broker may no longer make: %s", name, index, exc)
                plog = await loop.run_in_executor(None, self.store.unload, name, index, config)
            topic.partitions[index] = plog
            self.state.producer_states.pop((name, index), None)
        if release and self._pool is not None:
            async with self._pool.acquire() as conn:
                await database.release(conn, self.view.node_id, lost)
        log.info("gave up %d partitions (%s)", len(lost), "handed over" if release else "lease lost")

    async def _refresh_security(self) -> None:
        """ACLs and SCRAM credentials changed through other brokers. Each change is
        applied to the stored document before the handler answers; a document read while this
        broker changed its own set is skipped (it may predate the change) until the next
        heartbeat."""
        loop = asyncio.get_running_loop()
        authorizer = self.state.authorizer
        acl_metadata = self.state.acl_store.metadata
        if authorizer is not None and acl_metadata is not None:
            before = authorizer.bindings()
            text = await loop.run_in_executor(None, acl_metadata.load, acl_store.FILE_NAME)
            if text is not None and authorizer.bindings() == before:
                authorizer.hold_exactly(acl_store.parse(text))
        credentials = self.state.credentials
        if credentials.metadata is not None:
            before_doc = credentials.document()
            text = await loop.run_in_executor(None, credentials.metadata.load, CREDENTIALS_FILE)
            if text is not None and text != before_doc and credentials.document() == before_doc:
                credentials.replace(text)

    async def _refresh_topics(self) -> None:
        """Topics created, grown or deleted through other brokers."""
        topics = self.state.topics
        text = await asyncio.get_running_loop().run_in_executor(None, topics.fetch_document)
        if text is not None and topics.apply_document(text):
            for tp in [tp for tp in self.view.held if self.state.topics.partition(*tp) is None]:
                self.view.held.pop(tp, None)
