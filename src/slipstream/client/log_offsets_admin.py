"""Log offsets over the wire (ListOffsets): earliest, latest or by time, routed to the leaders."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..protocol.apis.list_offsets import SPEC as LIST_OFFSETS
from ..protocol.apis.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsRequestTopic,
)
from ..protocol.errors import ErrorCode, KafkaError, info
from .cluster import Cluster
from .connection import ConnectionClosed
from .retry import DeadlineBackoff
from .topic_admin import describe_topic

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]

_LEADER_RETRIABLE = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    partition: int
    leader: int
    earliest: int
    latest: int


async def list_offsets(
    cluster: Cluster, topic: str, partitions: list[int], timestamp: int
) -> dict[int, tuple[int, int]]:
    """partition -> (offset, timestamp) for a ListOffsets spec (-1 latest, -2 earliest, or a time)."""
    out: dict[int, tuple[int, int]] = {}
    by_leader: dict[int, list[int]] = {}
    topic_info = cluster.topics.get(topic) or (await describe_topic(cluster, topic))
    for p in partitions:
        by_leader.setdefault(topic_info.leaders.get(p, -1), []).append(p)
    for leader, parts in by_leader.items():
        conn = await cluster.connection(leader)
        request = ListOffsetsRequest(
            replica_id=-1,
            # v10+: how long the broker may wait on tiered storage.
            timeout_ms=int(conn.request_timeout_s * 1000),
            topics=[
                ListOffsetsRequestTopic(
                    name=topic,
                    partitions=[ListOffsetsRequestPartition(partition_index=p, timestamp=timestamp) for p in parts],
                )
            ],
        )
        response = await conn.request(LIST_OFFSETS, request)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaError(p.error_code, f"ListOffsets {topic}-{p.partition_index}")
                out[p.partition_index] = (p.offset, p.timestamp)
    return out


async def partition_offsets(cluster: Cluster, name: str) -> list[PartitionOffsets]:
    topic_info = await describe_topic(cluster, name)
    parts = sorted(topic_info.leaders)
    earliest = await list_offsets(cluster, name, parts, EARLIEST)
    latest = await list_offsets(cluster, name, parts, LATEST)
    return [PartitionOffsets(p, topic_info.leaders[p], earliest[p][0], latest[p][0]) for p in parts]


async def log_offsets(
    cluster: Cluster,
    partitions: Iterable[TopicPartition],
    timestamp: int,
    *,
    isolation_level: int,
    backoff: DeadlineBackoff,
) -> dict[TopicPartition, int | KafkaError]:
    """ListOffsets for many partitions at once, routed to their leaders.

    Partitions that fail are answered with their KafkaError, not raised. Leader
    changes are retried after a metadata refresh, waiting on ``backoff``.
    """
    todo = sorted(set(partitions))
    out: dict[TopicPartition, int | KafkaError] = {}
    refresh = True
    while todo:
        topics = sorted({t for t, _ in todo})
        if refresh or any(t not in cluster.topics for t in topics):
            await cluster.refresh_metadata(topics)
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in todo:
            topic_info = cluster.topics.get(topic)
            if topic_info is None:
                out[(topic, partition)] = KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
                )
                continue
            leader = topic_info.leaders.get(partition)
            if leader is None:
                out[(topic, partition)] = KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} has no partition {partition}"
                )
                continue
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        retry: list[TopicPartition] = []
        last: KafkaError | None = None
        for leader, parts in by_leader.items():
            wanted = [(t, p) for t, ps in parts.items() for p in ps]
            try:
                if leader < 0:
                    raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, "no leader")
                conn = await cluster.connection(leader)
                response = await conn.request(
                    LIST_OFFSETS,
                    ListOffsetsRequest(
                        replica_id=-1,
                        # v10+: how long the broker may wait on tiered storage.
                        timeout_ms=int(conn.request_timeout_s * 1000),
                        isolation_level=isolation_level,
                        topics=[
                            ListOffsetsRequestTopic(
                                name=t,
                                partitions=[
                                    ListOffsetsRequestPartition(
                                        partition_index=p, timestamp=timestamp, max_num_offsets=1
                                    )
                                    for p in ps
                                ],
                            )
                            for t, ps in parts.items()
                        ],
                    ),
                )
            except (KafkaError, ConnectionClosed, OSError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.NETWORK_EXCEPTION
                if code in _LEADER_RETRIABLE or code == ErrorCode.NETWORK_EXCEPTION:
                    retry.extend(wanted)
                    last = KafkaError(code, f"ListOffsets to broker {leader}: {exc}")
                    continue
                raise
            answered = set()
            for t in response.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    answered.add(tp)
                    if p.error_code in _LEADER_RETRIABLE:
                        retry.append(tp)
                        last = KafkaError(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                    elif p.error_code:
                        out[tp] = KafkaError(
                            p.error_code, f"ListOffsets {t.name}-{p.partition_index}: {info(p.error_code).message}"
                        )
                    elif p.offset == -1 and p.old_style_offsets:  # v0
                        out[tp] = p.old_style_offsets[0]
                    else:
                        out[tp] = p.offset
            for tp in wanted:
                if tp not in answered:
                    out[tp] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets: no answer for {tp[0]}-{tp[1]}")
        todo = sorted(set(retry))
        refresh = True
        if todo:
            assert last is not None
            await backoff.wait(last)
    return out
