"""Fetch (key 1). Served v4-18 (v17 and v18 add follower-only request fields).

Long-polls up to max_wait_ms until min_bytes are available, woken by appends.
Limits: the response holds at most max_bytes (v3+) and each partition at most
partition_max_bytes, except that the first batch of the first non-empty partition
is always returned whole so a consumer can progress past a large batch.
Fetch sessions (v7+, KIP-227, see broker/fetch_sessions.py): epoch 0 opens one,
later epochs send and answer only what changed; a full cache answers sessionless.
v13+ names topics by topic_id. Batches go out exactly as stored, as buffers
straight from the log; on a connection that sends file regions (plaintext, server.py)
an answer of at least REGION_ANSWER_MIN_BYTES sends a disk log's batches as regions of
their segment files, never read into Python unless the answer must stop inside them
(high watermark, LSO).
Transactions (v4+): last_stable_offset is the partition's LSO (first offset of the
earliest open transaction, else the high watermark). isolation_level=1
(read_committed) returns only batches below the LSO, and the aborted transactions
(producer id, first offset) that overlap [fetch offset, LSO), an empty list when
none; read_uncommitted gets null there, as from Kafka.
In a cluster, a partition's leader answers a current_leader_epoch (v9+) older than its
lease's with FENCED_LEADER_EPOCH and a newer one with UNKNOWN_LEADER_EPOCH (KIP-320).
Another broker answers NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and that
leader's endpoint on the request's listener (node_endpoints, v16+, KIP-951); no hint when
the leader has no listener of that name.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import cast

from ...log.api import OffsetOutOfRange
from ...protocol.apis.fetch import (
    SPEC,
    FetchRequest,
    FetchRequestPartition,
    FetchRequestTopic,
    FetchResponse,
    FetchResponseAbortedTransaction,
    FetchResponseLeaderIdAndEpoch,
    FetchResponseNodeEndpoint,
    FetchResponsePartition,
    FetchResponseTopic,
)
from ...protocol.errors import ErrorCode
from ...protocol.file_region import FileRegion
from ..fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, FetchSession, PartitionKey
from ..listeners import PLAINTEXT
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from ..topics import Topic

MIN_VERSION = 4
MAX_VERSION = 18

_NO_LIMIT = 0x7FFFFFFF
_ZERO_ID = uuid.UUID(int=0)
READ_COMMITTED = 1
# A batch's base offset, length field and (after 11 bytes) last offset delta.
_BATCH_SPAN = struct.Struct(">qi11xi")
_LOG_OVERHEAD = 12
# Below this many bytes of batches an answer is read into memory after all: measured on
# loopback, splicing a 1 MiB answer saved nothing over reading and copying it (its
# buffers are reused), while from 2 MiB the copy cost 3-6 times the splice (fresh
# buffers for every answer).
REGION_ANSWER_MIN_BYTES = 2 << 20


async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    state = ctx.state
    version = ctx.api_version
    session: FetchSession | None = None
    incremental = False
    topics = request.topics
    if version >= 7:
        sessions = state.fetch_sessions
        now = state.clock()
        if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if request.session_id != 0:
                sessions.remove(request.session_id)
            if request.session_epoch == INITIAL_EPOCH:
                session = sessions.create(now, uses_topic_ids=version >= 13)
                if session is not None:
                    _update_session(session, request, version)
        else:
            session = sessions.get(request.session_id, now)
            if session is None:
                return _error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            if request.session_epoch != session.next_epoch:
                return _error(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            if session.uses_topic_ids != (version >= 13):
                return _error(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
            _update_session(session, request, version)
            topics = _session_topics(session, version)
            incremental = True
    readable = _read_check(ctx, request, version)
    max_wait_s = max(0, request.max_wait_ms) / 1000
    deadline = state.clock() / 1000 + max_wait_s
    woken = True  # False once a wait ends without an append (timeout, or the client left)
    while True:
        responses, size, keys, failed = _read_all(
            state, topics, request.max_bytes, version, request.isolation_level == READ_COMMITTED, readable,
            ctx.listener,
            ctx.file_regions,
        )
        remaining = deadline - state.clock() / 1000
        if size >= request.min_bytes or failed or remaining <= 0 or not keys or not woken:
            break
        woken = await state.notifier.wait(keys, remaining)
    if ctx.file_regions and size < REGION_ANSWER_MIN_BYTES:
        _read_regions_in(responses)
    state.metrics.fetched_response(responses, state.topics.by_id)
    if session is None:
        return FetchResponse(
            error_code=0, session_id=0, responses=responses, node_endpoints=_leader_endpoints(ctx, responses)
        )
    if incremental:  # answered in the session: the client's next request uses the next epoch
        session.advance_epoch()
    reported = _report(session, responses, version, incremental)
    return FetchResponse(
        error_code=0, session_id=session.id, responses=reported, node_endpoints=_leader_endpoints(ctx, reported)
    )


def _leader_endpoints(ctx: RequestContext, responses: list[FetchResponseTopic]) -> list[FetchResponseNodeEndpoint]:
    """KIP-951 (v16+): the endpoint of every leader named in a current_leader hint."""
    cluster = ctx.state.cluster
    if cluster is None or ctx.api_version < 16:
        return []
    found: dict[int, FetchResponseNodeEndpoint] = {}
    for topic in responses:
        for part in topic.partitions:
            if part.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:  # the only answers with a hint
                continue
            leader = part.current_leader.leader_id if part.current_leader is not None else -1
            if leader >= 0 and leader not in found:
                endpoint = cluster.endpoint(leader, ctx.listener)
                if endpoint is not None:
                    found[leader] = FetchResponseNodeEndpoint(node_id=leader, host=endpoint[0], port=endpoint[1])
    return list(found.values())


def _read_check(ctx: RequestContext, request: FetchRequest, version: int) -> Callable[[str], bool] | None:
    """Who may read what: consumers need Read on each topic; a follower's fetch (replica id
    >= 0) needs ClusterAction on the cluster, for every topic at once (Kafka's rules).
    None: no authorizer, everything is readable."""
    if not ctx.authorizing:
        return None
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    if replica_id >= 0:
        follower_allowed = ctx.authorized_cluster(Operation.CLUSTER_ACTION)
        return lambda _topic: follower_allowed
    return lambda topic: ctx.topic_allowed(Operation.READ, topic)


def _error(code: int) -> FetchResponse:
    return FetchResponse(error_code=code, session_id=0, responses=[])


def _key(topic: FetchRequestTopic, version: int) -> str | uuid.UUID:
    return topic.topic_id if version >= 13 else topic.topic


def _update_session(session: FetchSession, request: FetchRequest, version: int) -> None:
    for topic in request.topics:
        key = _key(topic, version)
        for part in topic.partitions:
            session.upsert((key, part.partition), part.fetch_offset, part.partition_max_bytes)
    for gone in request.forgotten_topics_data:
        key = gone.topic_id if version >= 13 else gone.topic
        session.forget((key, p) for p in gone.partitions)


def _session_topics(session: FetchSession, version: int) -> list[FetchRequestTopic]:
    """The session's partitions as a full request would list them, in the session's order."""
    topics: list[FetchRequestTopic] = []
    for (key, partition), cached in session.partitions.items():
        if not topics or _key(topics[-1], version) != key:
            if isinstance(key, uuid.UUID):
                topics.append(FetchRequestTopic(topic="", topic_id=key))
            else:
                topics.append(FetchRequestTopic(topic=key, topic_id=_ZERO_ID))
        topics[-1].partitions.append(
            FetchRequestPartition(
                partition=partition,
                fetch_offset=cached.fetch_offset,
                partition_max_bytes=cached.max_bytes,
            )
        )
    return topics


def _report(
    session: FetchSession, responses: list[FetchResponseTopic], version: int, incremental: bool
) -> list[FetchResponseTopic]:
    """Record what the client is told; an incremental response keeps only what changed."""
    out: list[FetchResponseTopic] = []
    for topic in responses:
        key: str | uuid.UUID = topic.topic_id if version >= 13 else topic.topic
        kept = []
        for part in topic.partitions:
            pkey: PartitionKey = (key, part.partition_index)
            if pkey not in session.partitions:
                continue
            changed = session.must_report(
                pkey,
                has_records=bool(part.records),
                error=part.error_code,
                high_watermark=part.high_watermark,
                log_start_offset=part.log_start_offset,
            )
            if changed or not incremental:
                kept.append(part)
        if kept:
            topic.partitions = kept
            out.append(topic)
    return out


Chunks = list[bytes | memoryview | FileRegion]


def _read_regions_in(responses: list[FetchResponseTopic]) -> None:
    for topic in responses:
        for part in topic.partitions:
            records = part.records
            if records.__class__ is list:
                part.records = [c.read() if isinstance(c, FileRegion) else c for c in cast(Chunks, records)]


def _cut_at(chunks: Chunks, end_offset: int) -> tuple[Chunks, int]:
    """The batches of ``chunks`` that end below ``end_offset`` (read_committed stops at
    the LSO), and their size."""
    kept: Chunks = []
    size = 0
    for chunk in chunks:
        if isinstance(chunk, FileRegion):  # looked inside: read it (rare: an open transaction, a cluster)
            chunk = chunk.read()
        position, length = 0, len(chunk)
        while position < length:
            base_offset, batch_length, last_delta = _BATCH_SPAN.unpack_from(chunk, position)
            if base_offset + last_delta >= end_offset:
                if position:
                    kept.append(memoryview(chunk)[:position])
                    size += position
                return kept, size
            position += batch_length + _LOG_OVERHEAD
        kept.append(chunk)
        size += length
    return kept, size


def _read_all(
    state: BrokerState,
    wanted_topics: list[FetchRequestTopic],
    max_bytes: int,
    version: int,
    read_committed: bool,
    readable: Callable[[str], bool] | None = None,
    listener: str = PLAINTEXT,
    file_regions: bool = False,
) -> tuple[list[FetchResponseTopic], int, list[tuple[str, int]], bool]:
    budget = max_bytes if max_bytes > 0 else _NO_LIMIT
    total = 0
    keys: list[tuple[str, int]] = []
    failed = False
    topics: list[FetchResponseTopic] = []
    for wanted in wanted_topics:
        topic: Topic | None
        if version >= 13:
            topic = state.topics.by_id.get(wanted.topic_id)
            missing_code = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = state.topics.get(wanted.topic)
            missing_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        out = FetchResponseTopic(topic=wanted.topic, topic_id=wanted.topic_id)
        # Not allowed: every partition says so and nothing of the log is read (an unknown
        # topic id stays UNKNOWN_TOPIC_ID; a name is refused whether or not it exists).
        denied = readable is not None and (topic is not None or version < 13) and not readable(
            topic.name if topic is not None else wanted.topic
        )
        for part in wanted.partitions:
            resp = FetchResponsePartition(
                partition_index=part.partition,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                preferred_read_replica=-1,
                aborted_transactions=None,
                records=b"",
            )
            out.partitions.append(resp)
            if denied:
                resp.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            plog = None
            if topic is not None and 0 <= part.partition < len(topic.partitions):
                plog = topic.partitions[part.partition]
            if plog is None or topic is None:
                resp.error_code = missing_code
                failed = True
                continue
            if state.not_leader(topic.name, part.partition):
                resp.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                if version >= 12 and state.cluster is not None:
                    found = state.cluster.leader(topic.name, part.partition)
                    if found is not None and state.cluster.endpoint(found[0], listener) is not None:
                        resp.current_leader = FetchResponseLeaderIdAndEpoch(leader_id=found[0], leader_epoch=found[1])
                failed = True
                continue
            if state.cluster is not None and (
                fenced := state.cluster.epoch_error(topic.name, part.partition, part.current_leader_epoch)
            ):
                resp.error_code = fenced
                failed = True
                continue
            keys.append((topic.name, part.partition))
            hwm = state.high_watermark(plog)
            lso = state.last_stable_offset(topic.name, part.partition, plog)
            resp.high_watermark, resp.last_stable_offset = hwm, lso
            resp.log_start_offset = plog.log_start_offset
            if read_committed:
                resp.aborted_transactions = []
            limit = min(part.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                continue
            try:
                read = plog.read_regions if file_regions else plog.read
                result = read(part.fetch_offset, max(limit, 0), min_one_batch=total == 0)
            except OffsetOutOfRange:
                resp.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                failed = True
                continue
            chunks = cast(Chunks, result.chunks)  # a list of bytes only is as good
            size = result.size
            if size and hwm < result.log_end_offset:  # a cluster serves committed batches only
                chunks, size = _cut_at(chunks, hwm)
            if read_committed and size:
                if lso < result.log_end_offset:
                    chunks, size = _cut_at(chunks, lso)
                if size:
                    resp.aborted_transactions = [
                        FetchResponseAbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                        for txn in plog.aborted_txns(part.fetch_offset, lso)
                    ]
            if size:
                resp.records = chunks
                total += size
            resp.log_start_offset = result.log_start_offset
        topics.append(out)
    return topics, total, keys, failed



__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
