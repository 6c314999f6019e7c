"""Blocking helpers over Slipstream's asyncio client for the data source.

Spark calls the data source from plain threads and processes (the driver, the
streaming-source runner, executors), and pickles reader objects to executors.
So nothing here is kept between calls: each driver-side call opens a Cluster,
does its work with ``asyncio.run`` and closes it; an executor's range fetch owns a
private event loop for the life of one generator.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..client.admin import Admin
from ..client.cluster import Cluster
from ..client.connection import ConnectionClosed
from ..client.log_offsets_admin import EARLIEST, LATEST
from ..client.security import PLAINTEXT, ClientSecurity
from ..protocol.apis.fetch import SPEC as FETCH
from ..protocol.apis.fetch import FetchRequest, FetchRequestPartition, FetchRequestTopic
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import CONTROL_ABORT, Record, iter_batches
from .options import OffsetMap, SourceOptions, TopicPartition, describe_offsets

log = logging.getLogger(__name__)

T = TypeVar("T")

_LEADER_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        9,  # REPLICA_NOT_AVAILABLE
        74,  # FENCED_LEADER_EPOCH
        75,  # UNKNOWN_LEADER_EPOCH
    }
)


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, DeleteRecords, a deleted topic)."""


def data_loss_message(topic: str, partition: int, wanted: int, detail: str) -> str:
    return (
        f"data loss on {topic}-{partition}: offset {wanted} was requested but {detail}. "
        "Set failOnDataLoss=false to skip the missing records and continue."
    )


def retention_loss_message(topic: str, partition: int, wanted: int, earliest: int) -> str:
    return data_loss_message(
        topic,
        partition,
        wanted,
        f"the log now starts at offset {earliest}: records [{wanted}, {earliest}) of {topic}-{partition} "
        "were deleted by retention or DeleteRecords before they were read",
    )


def run(
    bootstrap: str, fn: Callable[[Admin], Awaitable[T]], *, client_id: str, timeout_s: float = 30.0,
    security: ClientSecurity = PLAINTEXT,
) -> T:
    """Run ``fn(admin)`` against a fresh connection, closing it afterwards."""

    async def main() -> T:
        cluster = Cluster(bootstrap, client_id=client_id, request_timeout_s=timeout_s, security=security)
        try:
            return await fn(Admin(cluster, retry_timeout_s=timeout_s))
        finally:
            await cluster.close()

    return asyncio.run(main())


# ---------------------------------------------------------------------------- driver side


async def resolve_partitions(admin: Admin, opts: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription covers now (topics that do not exist have none)."""
    cluster = admin.cluster
    if opts.pattern is not None:
        topics = await cluster.refresh_metadata(None)
        regex = re.compile(opts.pattern)
        infos = [t for n, t in topics.items() if not t.is_internal and not t.error_code and regex.fullmatch(n)]
        return sorted((t.name, p) for t in infos for p in t.leaders)
    if opts.subscribe:
        topics = await cluster.refresh_metadata(list(opts.subscribe))
        return sorted((t.name, p) for t in topics.values() if not t.error_code for p in t.leaders)
    wanted = sorted({t for t, _ in opts.assign})
    topics = await cluster.refresh_metadata(wanted)
    return sorted(tp for tp in opts.assign if tp[0] in topics and tp[1] in topics[tp[0]].leaders)


async def log_offsets(admin: Admin, tps: list[TopicPartition], when: int, isolation_level: int = 0) -> OffsetMap:
    """ListOffsets for every partition; raises the first partition error. With
    ``isolation_level=1`` (read_committed) latest is the last stable offset."""
    if not tps:
        return {}
    answers = await admin.log_offsets(tps, when, isolation_level=isolation_level)
    out: OffsetMap = {}
    for tp in tps:
        value = answers.get(tp)
        if isinstance(value, KafkaError):
            raise KafkaError(value.code, f"ListOffsets for {tp[0]}-{tp[1]}: {value.message}")
        if value is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets: no answer for {tp[0]}-{tp[1]}")
        out[tp] = value
    return out


async def offsets_for_times(
    admin: Admin, stamps: Mapping[TopicPartition, int], isolation_level: int = 0
) -> OffsetMap:
    """First offset at or after each timestamp; the latest offset where no record is that new."""
    out: OffsetMap = {}
    by_ts: dict[int, list[TopicPartition]] = {}
    for tp, ts in stamps.items():
        by_ts.setdefault(ts, []).append(tp)
    latest = await log_offsets(admin, sorted(stamps), LATEST, isolation_level)
    for ts, tps in by_ts.items():
        found = await log_offsets(admin, sorted(tps), ts, isolation_level)
        for tp in tps:
            out[tp] = found[tp] if found[tp] >= 0 else latest[tp]
    return out


async def committed_offsets(admin: Admin, group_id: str, tps: list[TopicPartition]) -> OffsetMap:
    if not tps:
        return {}
    committed = await admin.list_committed_offsets(group_id, tps)
    return {tp: c.offset for tp, c in committed.items()}


async def commit_offsets(admin: Admin, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Standalone OffsetCommit (generation -1) of ``offsets`` to ``group_id``."""
    await admin.alter_committed_offsets(group_id, dict(offsets), metadata="slipstream-spark")


def commit_offsets_sync(
    bootstrap: str, group_id: str, offsets: Mapping[TopicPartition, int], *, client_id: str = "slipstream-spark",
    security: ClientSecurity = PLAINTEXT,
) -> None:
    if offsets:
        run(bootstrap, lambda admin: commit_offsets(admin, group_id, offsets), client_id=client_id, security=security)


# ---------------------------------------------------------------------------- executor side


class RangeFetcher:
    """Fetch exactly the records of ``topic-partition`` in [start, end), chunk by chunk.

    Owns a private event loop and one connection to the partition's leader; both
    are released when the iterator is exhausted or closed. Control records are
    skipped, gaps (compaction, transaction markers) are normal; offsets below the
    log start are data loss, handled per ``fail_on_data_loss``.

    ``read_committed``: fetches with isolation level 1 (the broker answers up to the
    last stable offset, which bounds the planned ``end``) and drops the records of
    aborted transactions, using each answer's aborted-transactions list as Kafka's
    consumers do: a producer's batches are aborted from the first offset the list
    gives for it until its ABORT marker.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        start: int,
        end: int,
        *,
        fail_on_data_loss: bool = True,
        client_id: str = "slipstream-spark",
        max_bytes: int = 8 * 1024 * 1024,
        timeout_s: float = 30.0,
        read_committed: bool = False,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.fail_on_data_loss = fail_on_data_loss
        self.client_id = client_id
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.read_committed = read_committed
        self.skipped = 0  # records lost to retention when failOnDataLoss=false

    def __iter__(self) -> Iterator[list[Record]]:
        if self.end <= self.start:
            return
        loop = asyncio.new_event_loop()
        cluster = Cluster(
            self.bootstrap, client_id=self.client_id, request_timeout_s=self.timeout_s, security=self.security
        )
        try:
            yield from self._chunks(loop, cluster)
        finally:
            loop.run_until_complete(cluster.close())
            loop.close()

    def _lost(self, wanted: int, detail: str) -> None:
        message = data_loss_message(self.topic, self.partition, wanted, detail)
        if self.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("%s", message)

    def _lost_to_retention(self, wanted: int, earliest: int) -> None:
        message = retention_loss_message(self.topic, self.partition, wanted, earliest)
        if self.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("%s", message)

    def _chunks(self, loop: asyncio.AbstractEventLoop, cluster: Cluster) -> Iterator[list[Record]]:
        pos = self.start
        partition_max = self.max_bytes
        retries = 0
        deadline = time.monotonic() + self.timeout_s
        while pos < self.end:
            try:
                part = loop.run_until_complete(self._fetch(cluster, pos, partition_max))
            except (KafkaError, ConnectionClosed, OSError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    self._lost(pos, "the topic or partition no longer exists")
                    return
                if code not in _LEADER_RETRIABLE or time.monotonic() > deadline:
                    raise
                retries += 1
                time.sleep(min(0.05 * 2**retries, 1.0))
                cluster.topics.pop(self.topic, None)
                continue
            code = part.error_code
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                earliest = loop.run_until_complete(self._offset(cluster, EARLIEST))
                latest = loop.run_until_complete(self._offset(cluster, LATEST))
                if pos < earliest:
                    self._lost_to_retention(pos, earliest)
                    self.skipped += min(earliest, self.end) - pos
                    pos = earliest
                    continue
                if pos > latest:
                    self._lost(pos, f"the log ends at offset {latest}: it was truncated or recreated")
                    return
                continue  # the log moved under us: ask again
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self._lost(pos, "the topic or partition no longer exists")
                return
            if code in _LEADER_RETRIABLE:
                if time.monotonic() > deadline:
                    raise KafkaError(code, f"fetch {self.topic}-{self.partition} at {pos}")
                retries += 1
                time.sleep(min(0.05 * 2**retries, 1.0))
                cluster.topics.pop(self.topic, None)
                continue
            if code:
                raise KafkaError(code, f"fetch {self.topic}-{self.partition} at offset {pos} failed")
            log_start = part.log_start_offset
            if log_start is not None and log_start > pos:
                self._lost_to_retention(pos, log_start)
                self.skipped += min(log_start, self.end) - pos
                pos = log_start
                if pos >= self.end:
                    return
            data = part.records
            if isinstance(data, list):
                data = b"".join(bytes(b) for b in data)
            chunk: list[Record] = []
            advanced = False
            aborted = self._aborted_of(part)
            aborted_producers: set[int] = set()
            for header, records in iter_batches(data or b""):
                if aborted is not None and header.producer_id >= 0:
                    while aborted and aborted[0][0] <= header.last_offset:
                        aborted_producers.add(aborted.pop(0)[1])
                    if header.is_control:
                        if records and records[0].control_type == CONTROL_ABORT:
                            aborted_producers.discard(header.producer_id)
                    elif header.is_transactional and header.producer_id in aborted_producers:
                        records = []  # an aborted transaction's batch: skipped, offsets still advance
                if header.next_offset <= pos:
                    continue
                advanced = True
                if not header.is_control:
                    for record in records:
                        if record.offset < pos:
                            continue
                        if record.offset >= self.end:
                            break
                        chunk.append(record)
                pos = max(pos, min(header.next_offset, self.end))
                if pos >= self.end:
                    break
            if chunk:
                deadline = time.monotonic() + self.timeout_s
                retries = 0
                yield chunk
                continue
            if advanced:
                continue
            if data:
                # Only a partial batch came back: it is larger than the fetch size.
                partition_max *= 2
                if partition_max > 256 * 1024 * 1024:
                    raise KafkaError(
                        ErrorCode.RECORD_LIST_TOO_LARGE,
                        f"a batch of {self.topic}-{self.partition} at offset {pos} exceeds 256 MiB",
                    )
                continue
            if part.high_watermark <= pos:
                self._lost(pos, f"the log ends at offset {part.high_watermark}, before the planned end {self.end}")
                return
            if time.monotonic() > deadline:
                raise KafkaError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"no records from {self.topic}-{self.partition} at offset {pos} "
                    f"(high watermark {part.high_watermark}) within {self.timeout_s}s",
                )

    def _aborted_of(self, part: Any) -> list[tuple[int, int]] | None:
        """(first offset, producer id) of the aborted transactions in a read_committed
        answer, sorted; None when reading uncommitted."""
        if not self.read_committed:
            return None
        return sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or ())

    async def _fetch(self, cluster: Cluster, pos: int, partition_max: int) -> Any:
        conn = await cluster.leader_connection(self.topic, self.partition)
        topic_id = cluster.topics[self.topic].topic_id
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=max(partition_max, 1024 * 1024),
            isolation_level=1 if self.read_committed else 0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequestTopic(
                    topic=self.topic,
                    topic_id=topic_id,
                    partitions=[
                        FetchRequestPartition(partition=self.partition, fetch_offset=pos, partition_max_bytes=partition_max)
                    ],
                )
            ],
            forgotten_topics_data=[],
        )
        response = await conn.request(FETCH, request)
        if response.error_code:
            raise KafkaError(response.error_code, f"fetch {self.topic}-{self.partition} failed")
        for t in response.responses:
            for p in t.partitions:
                if p.partition_index == self.partition:
                    return p
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"fetch answer lacks {self.topic}-{self.partition}")

    async def _offset(self, cluster: Cluster, when: int) -> int:
        return (await log_offsets(Admin(cluster), [(self.topic, self.partition)], when))[(self.topic, self.partition)]


__all__ = [
    "DataLossError",
    "RangeFetcher",
    "commit_offsets",
    "commit_offsets_sync",
    "committed_offsets",
    "data_loss_message",
    "describe_offsets",
    "log_offsets",
    "offsets_for_times",
    "resolve_partitions",
    "retention_loss_message",
    "run",
]
