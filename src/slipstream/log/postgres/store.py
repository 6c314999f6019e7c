"""PostgresLogStore: partition logs whose durable home is a PostgreSQL database.

First slice of the postgres backend (issue 16), for a single broker:

* Each partition's log is also held in memory, in the memory backend's segments, so
  reads, timestamp lookups and compaction planning stay synchronous and as fast as
  the memory log. The database is the durable store, and the only one: a broker
  started on an empty data directory loads every partition from it.
* ``append`` assigns offsets in memory and queues the batch bytes as they arrived
  (with base/last offset, segment base and max timestamp). ``flush`` - the broker's
  durability barrier, run by the group committer on a worker thread - commits
  everything queued by every partition in ONE transaction (group commit). The
  broker answers acks=all only after that commit (see broker/appends.py).
* Guard against two writers: the transaction moves each partition's
  ``next_offset`` from the value this store last committed, and fails if the row
  holds anything else (``LogFenced``); batches are also unique on
  (partition, base offset). A fenced log stops accepting commits. A commit whose
  answer was lost with its connection (the database restarting) is retried; when the
  database already holds exactly its batches it goes on from there (``_reconciled``)
  instead of taking itself for fenced.
* DeleteRecords, retention, compaction and topic deletion first commit what is
  queued, then change the rows in their own transaction (compaction rewrites the
  cleaned segments' rows in one transaction).
* Broker metadata documents (topics, group configs, cluster id, producer-id blocks)
  live in ``broker_metadata`` (see ``metadata()``), so nothing needed at start is
  only in the data directory.
* Idempotent-producer state needs nothing of its own: the broker rebuilds it from the
  stored batches' headers (``PartitionProducerState.rebuild`` over ``batch_headers()``)
  when a partition is first used, and those are the batches loaded from the database.
  Consumer offsets and transaction state are the ``__consumer_offsets`` and
  ``__transaction_state`` logs, stored like any other.

Known limits: each log must fit in memory; reads may return batches appended but
not yet committed (acks=0/1 writes, or acks=all ones whose commit is in flight) - a
cluster broker serves reads only up to ``committed_end``.

In a cluster (``node_id`` given, see broker/cluster/): offsets are assigned by the
partition's leader, which loads the partition (``reload``) when it takes the lease and
keeps only an empty placeholder (``unload``) when it gives it up; every commit and
direct change checks the lease (owner, epoch, expiry) in its own transaction, with the
lease row locked FOR KEY SHARE, so a deposed leader cannot write: a claim moves the epoch,
a key column (schema version 6), so it waits for a check in flight, and a check that
waited for a claim finds the new epoch. The heartbeat's renewal changes only the expiry
and never waits for a commit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from slipstream.log.api import AbortedTxn, LogConfig, LogFenced
from slipstream.log.memory import MemoryLog, MemorySegment
from slipstream.log.postgres.metadata import PostgresMetadata
from slipstream.log.postgres.runner import DatabaseThread
from slipstream.log.postgres.schema import NOW_MS, migrate
from slipstream.log.segmented import Buffer, Segment, SegmentedLog
from slipstream.protocol.record_batch import BatchHeader, parse_header

_BATCH_COLUMNS = ["partition_id", "base_offset", "last_offset", "segment_base", "max_timestamp", "data"]
_ABORTED_COLUMNS = [
    "partition_id", "segment_base", "producer_id", "first_offset", "last_offset", "last_stable_offset",
]  # fmt: skip
# Commits with more batch bytes than this stream them (COPY) instead of one statement:
# measured on a 2-core host, one statement is faster up to a few hundred KiB.
STATEMENT_COMMIT_BYTES = 512 * 1024

_log = logging.getLogger(__name__)

BatchRow = tuple[int, int, int, int, int, bytes]
AbortedRow = tuple[int, int, int, int, int, int]


class PartitionFenced(LogFenced, OSError):
    """The LogFenced this store raises. Also an OSError, as every failed write of a
    storage is: the group and transaction coordinators, which answer an OSError from
    their log with a retriable error (clients look for the coordinator again), then do
    so for a lost lease too, instead of failing the request."""


class _Fenced(Exception):
    """A commit found logs fenced (marked on them): retried without them."""


class _Stale(Exception):
    """A commit found partitions whose next offset moved since this store's last
    commit it heard of: either an earlier commit stored them after all (its answer was
    lost with the connection) or another broker wrote them."""

    def __init__(self, partition_ids: set[int]) -> None:
        super().__init__(partition_ids)
        self.partition_ids = partition_ids


class PostgresLog(MemoryLog):
    """A memory log whose appends are queued for the store's next commit."""

    def __init__(
        self,
        store: PostgresLogStore,
        partition_id: int,
        config: LogConfig,
        segments: list[Segment],
        log_start_offset: int,
        topic: str = "",
        partition: int = -1,
    ) -> None:
        SegmentedLog.__init__(self, config, segments, log_start_offset)
        self._store = store
        self.partition_id = partition_id
        self.topic = topic
        self.partition = partition
        # In a cluster: the epoch of this broker's lease on the partition, checked by
        # every commit (-1: no lease check, a store used without a cluster).
        self.lease_epoch = -1
        self._lock = threading.Lock()  # appends (loop) vs. commit taking them (worker)
        self._batch_rows: list[BatchRow] = []
        self._aborted_rows: list[AbortedRow] = []
        self._committed_end = self.log_end_offset
        # Writes queued (batches and aborted txns, a running count), taken by the commit
        # in flight, committed: a group-commit round skips this log's flush when a commit
        # for another log already took the round's writes (api.SharedCommitLog).
        self._queued_writes = 0
        self._taken_writes = 0
        self._committed_writes = 0
        self.fenced: str | None = None

    # -- queueing -------------------------------------------------------------------

    def _write(self, batch: Buffer, header: BatchHeader, now_ms: int | None) -> None:
        super()._write(batch, header, now_ms)
        active = self._segments[-1]
        assert isinstance(active, MemorySegment)
        row = (
            self.partition_id,
            header.base_offset,
            header.last_offset,
            active.base_offset,
            header.max_timestamp,
            active.last_batch(),
        )
        with self._lock:
            self._batch_rows.append(row)
            self._queued_writes += 1
        self._store.mark_dirty(self)

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        super().add_aborted_txn(txn)
        row = (
            self.partition_id,
            self._segments[-1].base_offset,
            txn.producer_id,
            txn.first_offset,
            txn.last_offset,
            txn.last_stable_offset,
        )
        with self._lock:
            self._aborted_rows.append(row)
            self._queued_writes += 1
        self._store.mark_dirty(self)

    def take_pending(self) -> tuple[list[BatchRow], list[AbortedRow], int, int, int]:
        """(batch rows, aborted rows, expected next offset, new next offset, log start)."""
        with self._lock:
            batches, self._batch_rows = self._batch_rows, []
            aborted, self._aborted_rows = self._aborted_rows, []
            self._taken_writes = self._queued_writes
            new_end = batches[-1][2] + 1 if batches else self._committed_end
            return batches, aborted, self._committed_end, new_end, self._log_start

    def committed(self, new_end: int) -> None:
        self._committed_end = new_end

    def taken_committed(self) -> None:
        """The commit that took this log's pending writes succeeded."""
        self._committed_writes = self._taken_writes

    @property
    def queued_writes(self) -> int:
        return self._queued_writes

    @property
    def committed_writes(self) -> int:
        return self._committed_writes

    @property
    def committed_end(self) -> int:
        """The end of what is stored in the database: a cluster serves reads below it only
        (what is past it dies with this broker)."""
        return self._committed_end

    def requeue(self, batches: list[BatchRow], aborted: list[AbortedRow]) -> None:
        """A failed commit: put its rows back in front, for the next one to retry."""
        with self._lock:
            self._batch_rows[:0] = batches
            self._aborted_rows[:0] = aborted

    # -- durability and changes made straight in the database -------------------------

    def flush(self) -> None:
        self._store.commit()
        if self.fenced:
            raise PartitionFenced(self.fenced)

    def _persist_log_start(self) -> None:
        self._store.commit()
        self._store.set_log_start(self.partition_id, self._log_start, self)

    def _delete_leading(self, count: int) -> int:
        deleted = super()._delete_leading(count)
        if deleted:
            self._store.commit()
            self._store.delete_below(self.partition_id, self._segments[0].base_offset, self._log_start, self)
        return deleted

    def replace_segments(self, old: Sequence[Segment], new: Segment) -> None:
        if self.find_segments(old) is None or new.base_offset != old[0].base_offset:
            raise ValueError("replace_segments needs consecutive closed segments of this log")
        assert isinstance(new, MemorySegment)
        self._store.commit()
        rows = [
            (self.partition_id, h.base_offset, h.last_offset, new.base_offset, h.max_timestamp, b)
            for b in new.batches()
            for h in (parse_header(b),)
        ]
        self._store.rewrite_segments(self.partition_id, [s.base_offset for s in old], new.base_offset, rows, self)
        super().replace_segments(old, new)

    def close(self) -> None:
        pass  # the store commits and closes once for all its logs

    def delete(self) -> None:
        super().delete()


class PostgresLogStore:
    """Partition logs in one PostgreSQL database (see the module docstring)."""

    def __init__(
        self, database_url: str, *, max_connections: int = 4, node_id: int | None = None, lazy: bool = False
    ) -> None:
        """``node_id``: this broker's id in a cluster (commits of logs with a lease epoch
        check the lease). ``lazy``: ``open`` reads no batches - a cluster broker loads a
        partition (``reload``) only when it becomes its leader."""
        self._db = DatabaseThread(database_url, max_connections=max_connections)
        self._db.with_connection(migrate)
        self.node_id = node_id
        self._lazy = lazy
        # A cluster's copy of a partition it does not lead: any commit of it is refused
        # (no lease has epoch 0), whatever code path appended to it.
        self._placeholder_epoch = -1 if node_id is None else 0
        self._logs: dict[tuple[str, int], PostgresLog] = {}
        self._dirty: set[PostgresLog] = set()
        self._dirty_lock = threading.Lock()
        self._commit_lock = threading.Lock()  # one commit at a time keeps offset order
        self._closed = False

    @property
    def database(self) -> DatabaseThread:
        return self._db

    def metadata(self) -> PostgresMetadata:
        return PostgresMetadata(self._db)

    # -- LogStore --------------------------------------------------------------------

    def open(self, topic: str, partition: int, config: LogConfig) -> PostgresLog:
        log = self._logs.get((topic, partition))
        if log is not None:
            log.update_config(config)
            return log
        if not topic or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}/{partition}")
        log = self._db.with_connection(lambda conn: self._load(conn, topic, partition, config, not self._lazy))
        self._logs[(topic, partition)] = log
        return log

    def reload(self, topic: str, partition: int, config: LogConfig, lease_epoch: int) -> PostgresLog:
        """A fresh copy of the partition from the database (a new leader taking over);
        anything the old copy still queued is dropped (its lease is gone)."""
        with self._commit_lock:
            self._discard(topic, partition)
            log = self._db.with_connection(lambda conn: self._load(conn, topic, partition, config, True))
            log.lease_epoch = lease_epoch
            self._logs[(topic, partition)] = log
            return log

    def unload(self, topic: str, partition: int, config: LogConfig) -> PostgresLog:
        """Commit what the partition queued, then keep only an empty placeholder of it
        (this broker stopped leading it). Raises LogFenced if the commit was refused."""
        old = self._logs.get((topic, partition))
        if old is None:
            return self.open(topic, partition, config)
        try:
            old.flush()
        except Exception as exc:  # fenced or unreachable: those writes were never acknowledged
            _log.warning("%s-%d: dropping writes not committed before giving it up: %s", topic, partition, exc)
        with self._commit_lock:
            self._discard(topic, partition)
            # No database read: this placeholder is never served (it may not be reachable).
            placeholder = PostgresLog(
                self, old.partition_id, config, [MemorySegment(old.log_end_offset)], old.log_start_offset,
                topic, partition,
            )
            placeholder.lease_epoch = self._placeholder_epoch
            self._logs[(topic, partition)] = placeholder
            return placeholder

    def _discard(self, topic: str, partition: int) -> None:
        old = self._logs.pop((topic, partition), None)
        if old is not None:
            with self._dirty_lock:
                self._dirty.discard(old)
            batches, aborted, *_ = old.take_pending()
            if batches or aborted:  # a waiter for these must not hear they were stored
                old.fenced = old.fenced or f"{topic}-{partition}: this broker no longer leads the partition"

    def reserve_producer_ids(self, count: int, floor: int = 0) -> int:
        """The first of ``count`` producer ids (none below ``floor``) that no other broker
        of the database will hand out."""
        return int(
            self._db.with_connection(
                lambda conn: conn.fetchval(
                    "INSERT INTO producer_id_blocks (next_id) VALUES ($2::bigint + $1::bigint) "
                    "ON CONFLICT (only_row) DO UPDATE SET "
                    "next_id = GREATEST(producer_id_blocks.next_id, $2::bigint) + $1::bigint "
                    "RETURNING next_id - $1::bigint",
                    count,
                    floor,
                )
            )
        )

    async def _load(
        self, conn: Any, topic: str, partition: int, config: LogConfig, read_batches: bool
    ) -> PostgresLog:
        row = await conn.fetchrow(
            "INSERT INTO log_partitions (topic, partition) VALUES ($1, $2) "
            "ON CONFLICT (topic, partition) DO UPDATE SET topic = EXCLUDED.topic "
            "RETURNING id, log_start_offset, next_offset",
            topic,
            partition,
        )
        partition_id, log_start, next_offset = row["id"], row["log_start_offset"], row["next_offset"]
        segments: list[MemorySegment] = []
        if not read_batches:
            segments.append(MemorySegment(next_offset))
            unloaded = PostgresLog(self, partition_id, config, list[Segment](segments), log_start, topic, partition)
            unloaded.lease_epoch = self._placeholder_epoch
            return unloaded
        async with conn.transaction():  # a cursor needs one
            async for batch in conn.cursor(
                "SELECT segment_base, data FROM log_batches WHERE partition_id = $1 ORDER BY base_offset",
                partition_id,
                prefetch=1000,
            ):
                if not segments or segments[-1].base_offset != batch["segment_base"]:
                    segments.append(MemorySegment(batch["segment_base"]))
                data = batch["data"]
                segments[-1].append(data, parse_header(data), None)
        if not segments or segments[-1].next_offset < next_offset:
            segments.append(MemorySegment(next_offset))
        bases = [s.base_offset for s in segments]
        for txn in await conn.fetch(
            "SELECT * FROM log_aborted_txns WHERE partition_id = $1 ORDER BY last_offset", partition_id
        ):
            owner = max((i for i, base in enumerate(bases) if base <= txn["segment_base"]), default=0)
            segments[owner].add_aborted(
                AbortedTxn(txn["producer_id"], txn["first_offset"], txn["last_offset"], txn["last_stable_offset"])
            )
        return PostgresLog(self, partition_id, config, list[Segment](segments), log_start, topic, partition)

    def remove(self, topic: str, partition: int) -> None:
        log = self._logs.pop((topic, partition), None)
        if log is not None:
            with self._dirty_lock:
                self._dirty.discard(log)
            log.take_pending()  # dropped with the partition
            log.delete()
        self._db.with_connection(
            lambda conn: conn.execute(
                "DELETE FROM log_partitions WHERE topic = $1 AND partition = $2", topic, partition
            )
        )

    def existing(self) -> list[tuple[str, int]]:
        rows = self._db.with_connection(
            lambda conn: conn.fetch("SELECT topic, partition FROM log_partitions ORDER BY topic, partition")
        )
        return [(r["topic"], r["partition"]) for r in rows]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.commit()
            fenced = [log.fenced for log in self._logs.values() if log.fenced]
            if fenced:
                raise PartitionFenced(fenced[0])
        finally:
            self._logs.clear()
            self._db.close()

    # -- group commit ------------------------------------------------------------------

    def mark_dirty(self, log: PostgresLog) -> None:
        with self._dirty_lock:
            self._dirty.add(log)

    def commit(self) -> None:
        """Store everything queued by every log in one transaction (blocking)."""
        with self._commit_lock:
            with self._dirty_lock:
                dirty, self._dirty = self._dirty, set()
            # A fenced log's rows are never written (its flush raises); the others go on.
            work = [(log, *log.take_pending()) for log in dirty if not log.fenced]
            while work:
                try:
                    self._db.with_connection(partial(self._store, work=work))
                except _Fenced:
                    work = [w for w in work if not w[0].fenced]  # the others retry at once
                    continue
                except _Stale as stale:
                    work = [self._reconciled(w) if w[0].partition_id in stale.partition_ids else w for w in work]
                    work = [w for w in work if not w[0].fenced]
                    continue
                except BaseException:
                    for log, batches, aborted, *_ in work:
                        log.requeue(batches, aborted)
                        self.mark_dirty(log)
                    raise
                for log, _, _, _, new_end, _ in work:
                    log.committed(new_end)
                    log.taken_committed()
                return

    async def _store(self, conn: Any, *, work: list[Any]) -> None:
        """One transaction, checked and written by ``slipstream_commit`` (schema version 4):
        up to STATEMENT_COMMIT_BYTES of batches in that one statement, one round trip - a
        small commit costs its trips to the database, each also waiting for both
        processes to be scheduled on a loaded host. Larger ones stream their batches with
        COPY after it, in its transaction, where bytes cost more than trips and one
        statement would first build one array value of all of them."""
        batches = [row for w in work for row in w[1]]
        if sum(len(row[5]) for row in batches) <= STATEMENT_COMMIT_BYTES:
            await self._checked_commit(conn, work, batches)
            return
        async with conn.transaction():
            await self._checked_commit(conn, work, [])
            await conn.copy_records_to_table("log_batches", records=batches, columns=_BATCH_COLUMNS)

    async def _checked_commit(self, conn: Any, work: list[Any], batches: list[BatchRow]) -> None:
        """``slipstream_commit``: the leases (locked FOR KEY SHARE till the transaction ends),
        each partition's expected next offset, then its move and the rows (``batches`` -
        none when the caller streams them - and every aborted-transaction row of
        ``work``). Raises _Fenced or _Stale, having written nothing."""
        logs: list[PostgresLog] = [w[0] for w in work]
        aborted = [row for w in work for row in w[2]]
        leased = [log for log in logs if log.lease_epoch >= 0]
        lost, stale = await conn.fetchrow(
            "SELECT lost_leases, stale_ids FROM slipstream_commit("
            "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
            self.node_id if self.node_id is not None else -1,
            [log.topic for log in leased],
            [log.partition for log in leased],
            [log.lease_epoch for log in leased],
            [log.partition_id for log in logs],
            [w[3] for w in work],
            [w[4] for w in work],
            [w[5] for w in work],
            *_columns(batches, len(_BATCH_COLUMNS)),
            *_columns(aborted, len(_ABORTED_COLUMNS)),
        )
        if lost:
            for index in lost:
                _mark_lease_lost(leased[index - 1])
            raise _Fenced()
        if stale:
            raise _Stale(set(stale))

    def _reconciled(self, work: tuple[Any, ...]) -> tuple[Any, ...]:
        """``work`` of a partition whose next offset in the database is not the one
        expected: without the batches an earlier commit stored after all (the database
        holds exactly them from the expected offset on, byte for byte), or, when the rows
        are anything else, its log fenced (another broker wrote the partition)."""
        log, batches, aborted, expected, new_end, log_start = work
        stored = self._db.with_connection(partial(self._stored_since, log.partition_id, expected, len(batches) + 1))
        landed = len(stored[1])
        if (
            stored[0] > expected
            and 0 < landed <= len(batches)
            and all(
                base == row[1] and bytes(data) == bytes(row[5]) for (base, data), row in zip(stored[1], batches[:landed], strict=True)
            )
            and batches[landed - 1][2] + 1 == stored[0]
        ):
            _log.info("%s-%d: a commit whose answer was lost had stored %d batches", log.topic, log.partition, landed)
            log.committed(stored[0])
            return log, batches[landed:], aborted, stored[0], new_end, log_start
        log.fenced = (
            f"partition id {log.partition_id} was written by another broker: "
            "its next offset in the database is not the one this broker committed"
        )
        return work

    @staticmethod
    async def _stored_since(
        partition_id: int, offset: int, limit: int, conn: Any
    ) -> tuple[int, list[tuple[int, bytes]]]:
        """(the partition's next offset in the database, its first ``limit`` batches from
        ``offset`` on)."""
        next_offset = await conn.fetchval("SELECT next_offset FROM log_partitions WHERE id = $1", partition_id)
        rows = await conn.fetch(
            "SELECT base_offset, data FROM log_batches WHERE partition_id = $1 AND base_offset >= $2 "
            "ORDER BY base_offset LIMIT $3",
            partition_id,
            offset,
            limit,
        )
        return int(next_offset if next_offset is not None else -1), [(r["base_offset"], r["data"]) for r in rows]

    async def _fence_lost_leases(self, conn: Any, logs: list[PostgresLog]) -> list[PostgresLog]:
        """In a transaction: the logs whose lease this broker no longer holds at their
        epoch (marked fenced). FOR KEY SHARE: a broker claiming one of the others' leases
        waits for this transaction, so the copy it then loads holds its changes; this
        broker's renewal of them does not."""
        leased = [log for log in logs if log.lease_epoch >= 0]
        if not leased:
            return []
        valid = await conn.fetch(
            "SELECT l.topic, l.partition FROM partition_leases AS l "
            "JOIN unnest($1::text[], $2::int[], $3::int[]) AS u(t, p, e) "
            "ON l.topic = u.t AND l.partition = u.p "
            f"WHERE l.owner = $4 AND l.epoch = u.e AND l.expires_ms > {NOW_MS} FOR KEY SHARE OF l",
            [log.topic for log in leased],
            [log.partition for log in leased],
            [log.lease_epoch for log in leased],
            self.node_id,
        )
        held = {(r["topic"], r["partition"]) for r in valid}
        lost = [log for log in leased if (log.topic, log.partition) not in held]
        for log in lost:
            _mark_lease_lost(log)
        return lost

    async def _check_lease(self, conn: Any, log: PostgresLog | None) -> None:
        if log is not None and await self._fence_lost_leases(conn, [log]):
            raise PartitionFenced(log.fenced)

    # -- direct changes (each checks the lease of ``log``, when given, in its transaction) --

    def _change(self, log: PostgresLog | None, statements: Callable[[Any], Awaitable[None]]) -> None:
        """Run ``statements`` in one transaction that first checks ``log``'s lease."""

        async def work(conn: Any) -> None:
            async with conn.transaction():
                await self._check_lease(conn, log)
                await statements(conn)

        self._db.with_connection(work)

    def set_log_start(self, partition_id: int, log_start: int, log: PostgresLog | None = None) -> None:
        async def statements(conn: Any) -> None:
            await _raise_log_start(conn, partition_id, log_start)

        self._change(log, statements)

    def delete_below(
        self, partition_id: int, first_segment_base: int, log_start: int, log: PostgresLog | None = None
    ) -> None:
        """Drop the rows of deleted leading segments and record the new log start."""

        async def statements(conn: Any) -> None:
            await _raise_log_start(conn, partition_id, log_start)
            for table in ("log_batches", "log_aborted_txns"):
                await conn.execute(
                    f"DELETE FROM {table} WHERE partition_id = $1 AND segment_base < $2",
                    partition_id,
                    first_segment_base,
                )

        self._change(log, statements)

    def rewrite_segments(
        self,
        partition_id: int,
        old_bases: list[int],
        new_base: int,
        rows: list[BatchRow],
        log: PostgresLog | None = None,
    ) -> None:
        """Compaction: the cleaned segment's rows replace the old segments' in one transaction."""

        async def statements(conn: Any) -> None:
            await conn.execute(
                "DELETE FROM log_batches WHERE partition_id = $1 AND segment_base = ANY($2::bigint[])",
                partition_id,
                old_bases,
            )
            await conn.execute(
                "UPDATE log_aborted_txns SET segment_base = $3 "
                "WHERE partition_id = $1 AND segment_base = ANY($2::bigint[])",
                partition_id,
                old_bases,
                new_base,
            )
            if rows:
                await conn.copy_records_to_table("log_batches", records=rows, columns=_BATCH_COLUMNS)

        self._change(log, statements)


async def _raise_log_start(conn: Any, partition_id: int, log_start: int) -> None:
    """The partition's log start becomes ``log_start`` unless it is already past it."""
    await conn.execute(
        "UPDATE log_partitions SET log_start_offset = GREATEST(log_start_offset, $2) WHERE id = $1",
        partition_id,
        log_start,
    )


def _mark_lease_lost(log: PostgresLog) -> None:
    log.fenced = (
        f"{log.topic}-{log.partition}: this broker's lease (epoch {log.lease_epoch}) "
        "has expired or passed to another broker"
    )


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as ``width`` column lists (the arrays of one statement's parameters)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]
