"""Produce (key 0). Served v3-13: magic 2 record batches only (Kafka 4 dropped v0-v2).

acks=0 gets no response at all; acks=1 and acks=-1 are answered after the append
(with the fsync durability policy, acks=-1 also waits for the group-commit fsync, one
for all the request's partitions).
v8+ carries error_message and record_errors: the index of each bad record in its
batch (keyless records to a compacted topic), so a client fails just those (KIP-467); v10+ tagged current_leader/node_endpoints
(sent with NOT_LEADER_OR_FOLLOWER, which only a cluster broker returns). v13 names
topics by id (an unknown id is UNKNOWN_TOPIC_ID). Transactional batches need the
request's transactional_id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka).
With an authorizer: a transactional id needs Write on it (else every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs Write (else
TOPIC_AUTHORIZATION_FAILED, whether or not it exists), checked before anything is read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from ...log.api import AppendInfo
from ...protocol.apis.produce import (
    SPEC,
    ProduceRequest,
    ProduceResponse,
    ProduceResponseBatchIndexAndErrorMessage,
    ProduceResponseLeaderIdAndEpoch,
    ProduceResponseNodeEndpoint,
    ProduceResponsePartition,
    ProduceResponseTopic,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..appends import InvalidRecords, start_append
from ..request_context import RequestContext
from ..security.acl import Operation, ResourceType

MIN_VERSION = 3
MAX_VERSION = 13
TOPIC_IDS_VERSION = 13

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    state = ctx.state
    acks = request.acks
    topics: list[ProduceResponseTopic] = []
    bad_acks = acks not in (0, 1, -1)
    transactional = request.transactional_id is not None
    by_id = state.topics.by_id if ctx.api_version >= TOPIC_IDS_VERSION else None
    endpoints: dict[int, ProduceResponseNodeEndpoint] = {}
    txn_denied = transactional and not ctx.authorized(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id or ""
    )
    # Every partition is appended before the first await (Produce is pipelined: see
    # server.PIPELINED_APIS), then they wait for the durability barrier together, so
    # they share one group commit (one fsync or database commit, not one per partition).
    appends: list[tuple[str, ProduceResponsePartition, Coroutine[Any, Any, AppendInfo]]] = []
    for topic_data in request.topic_data:
        partitions: list[ProduceResponsePartition] = []
        unknown_id = False
        if by_id is not None:
            found = by_id.get(topic_data.topic_id)
            if found is None:
                unknown_id = True
            else:
                topic_data.name = found.name
        write_denied = not unknown_id and not ctx.topic_allowed(Operation.WRITE, topic_data.name)
        for part in topic_data.partition_data:
            resp = ProduceResponsePartition(index=part.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            if txn_denied:
                resp.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                resp.error_message = f"Write on transactional id {request.transactional_id!r} is not allowed"
            elif unknown_id:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                resp.error_message = f"no topic has id {topic_data.topic_id}"
            elif write_denied:
                resp.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                resp.error_message = f"Write on topic {topic_data.name!r} is not allowed"
            elif bad_acks:
                resp.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                resp.error_message = f"acks must be 0, 1 or -1, got {acks}"
            elif part.records is None:
                resp.error_code = ErrorCode.INVALID_RECORD
                resp.error_message = "produce request carried no records"
            else:
                try:
                    appended = start_append(
                        state, topic_data.name, part.index, part.records, acks=acks, transactional=transactional
                    )
                except KafkaError as exc:
                    _refused(ctx, topic_data.name, resp, exc, endpoints)
                else:
                    appends.append((topic_data.name, resp, appended))
            partitions.append(resp)
        topics.append(
            ProduceResponseTopic(name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=partitions)
        )
    if len(appends) > 1 and acks == -1 and state.config.syncs_before_ack:
        outcomes = await asyncio.gather(*(append for _, _, append in appends), return_exceptions=True)
    else:
        outcomes = []
        for i, (_, _, append) in enumerate(appends):
            try:
                outcomes.append(await append)
            except KafkaError as exc:
                outcomes.append(exc)
            except BaseException:
                for _, _, unawaited in appends[i + 1 :]:
                    unawaited.close()
                raise
    for (topic, resp, _), outcome in zip(appends, outcomes, strict=True):
        if isinstance(outcome, AppendInfo):
            resp.base_offset = outcome.base_offset
            resp.log_append_time_ms = outcome.log_append_time_ms
            resp.log_start_offset = outcome.log_start_offset
        elif isinstance(outcome, KafkaError):
            _refused(ctx, topic, resp, outcome, endpoints)
        else:
            raise outcome
    if acks == 0:
        return None
    return ProduceResponse(responses=topics, node_endpoints=list(endpoints.values()))


def _refused(
    ctx: RequestContext,
    topic: str,
    resp: ProduceResponsePartition,
    exc: KafkaError,
    endpoints: dict[int, ProduceResponseNodeEndpoint],
) -> None:
    resp.error_code = exc.code
    resp.error_message = exc.message
    if isinstance(exc, InvalidRecords):
        resp.record_errors = [
            ProduceResponseBatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=why)
            for index, why in exc.record_errors
        ]
    if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and ctx.api_version >= 10:
        leader = _current_leader(ctx, topic, resp.index, endpoints)
        if leader is not None:
            resp.current_leader = leader
    if exc.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        log.info("produce to %s-%d rejected: %s", topic, resp.index, exc)


def _current_leader(
    ctx: RequestContext, topic: str, partition: int, endpoints: dict[int, ProduceResponseNodeEndpoint]
) -> ProduceResponseLeaderIdAndEpoch | None:
    """KIP-951: the partition's leader now, and its endpoint on the request's listener, so
    the client need not wait for a metadata refresh (no hint when the leader has no such
    listener: the client's metadata refresh then says LISTENER_NOT_FOUND)."""
    cluster = ctx.state.cluster
    found = None if cluster is None else cluster.leader(topic, partition)
    if cluster is None or found is None:
        return None
    endpoint = cluster.endpoint(found[0], ctx.listener)
    if endpoint is None:
        return None
    endpoints[found[0]] = ProduceResponseNodeEndpoint(node_id=found[0], host=endpoint[0], port=endpoint[1])
    return ProduceResponseLeaderIdAndEpoch(leader_id=found[0], leader_epoch=found[1])


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
