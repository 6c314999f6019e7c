"""A group's committed offsets over the wire: read (OffsetFetch), change while the group is
Empty (standalone OffsetCommit), delete (OffsetDelete), and the lag behind the log end."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..protocol.apis.offset_commit import SPEC as OFFSET_COMMIT
from ..protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from ..protocol.apis.offset_delete import SPEC as OFFSET_DELETE
from ..protocol.apis.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from ..protocol.apis.offset_fetch import SPEC as OFFSET_FETCH
from ..protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from ..protocol.errors import ErrorCode, KafkaError, info
from .connection import BrokerConnection, UnsupportedApi
from .group_admin import MemberDescription, describe_groups
from .group_coordinators import COORDINATOR_RETRIABLE, GroupAnswers, GroupCoordinators, group_error
from .log_offsets_admin import LATEST, TopicPartition, log_offsets
from .offsets import NAMED_TOPICS_MAX_VERSION
from .topic_admin import describe_topic


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    # None: the group has no committed offset for the partition.
    committed: int | None
    # None: the log end offset could not be read (e.g. the topic was deleted).
    log_end: int | None
    # log_end - committed, None when either is unknown.
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None


async def list_committed_offsets(
    coordinators: GroupCoordinators, group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, CommittedOffset]:
    """OffsetFetch: the group's committed offsets (all of them when ``partitions`` is None).

    Partitions without a committed offset are left out of the answer.
    """
    wanted = None if partitions is None else sorted(set(partitions))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in wanted or []:
        by_topic.setdefault(topic, []).append(partition)

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        version = conn.version_for(OFFSET_FETCH, NAMED_TOPICS_MAX_VERSION)
        if wanted is None and version < 2:
            raise UnsupportedApi(f"{conn.address} serves OffsetFetch v{version}: fetching all offsets needs v2")
        if version >= 8:
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        group_id=group_id,
                        topics=None
                        if wanted is None
                        else [OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                    )
                ],
                require_stable=False,
            )
            response = await conn.request(OFFSET_FETCH, request, version=version)
            group = next((g for g in response.groups if g.group_id == group_id), None)
            if group is None:
                return {group_id: (ErrorCode.UNKNOWN_SERVER_ERROR, None)}
            return {group_id: (group.error_code, group.topics)}
        request = OffsetFetchRequest(
            group_id=group_id,
            topics=None
            if wanted is None
            else [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
        )
        response = await conn.request(OFFSET_FETCH, request, version=version)
        code = response.error_code if version >= 2 else 0
        if not code:
            # Before v2 a group-level error is repeated on every partition.
            codes = {p.error_code for t in response.topics for p in t.partitions}
            if len(codes) == 1 and codes & COORDINATOR_RETRIABLE:
                code = codes.pop()
        return {group_id: (code, response.topics)}

    code, topics, _ = (await coordinators.per_group([group_id], "OffsetFetch", send))[group_id]
    if code:
        raise group_error(group_id, code, "OffsetFetch")
    out: dict[TopicPartition, CommittedOffset] = {}
    for t in topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaError(
                    p.error_code,
                    f"OffsetFetch for group {group_id!r}, {t.name}-{p.partition_index}: {info(p.error_code).message}",
                )
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1)
                )
    return dict(sorted(out.items()))


async def alter_committed_offsets(
    coordinators: GroupCoordinators, group_id: str, offsets: Mapping[TopicPartition, int], *, metadata: str = ""
) -> None:
    """Standalone OffsetCommit (generation -1, no member): Kafka takes it only while the
    group has no members (Empty, or unknown: then a group is created for the offsets)."""
    if not offsets:
        return
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        if offset < 0:
            raise ValueError(f"offset for {topic}-{partition} must be >= 0, not {offset}")
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    request = OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        response = await conn.request(OFFSET_COMMIT, request, max_version=NAMED_TOPICS_MAX_VERSION)
        codes = {p.error_code for t in response.topics for p in t.partitions}
        retriable = codes & COORDINATOR_RETRIABLE
        return {group_id: (min(retriable) if retriable else 0, response)}

    _, response, _ = (await coordinators.per_group([group_id], "OffsetCommit", send))[group_id]
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise group_error(group_id, p.error_code, f"OffsetCommit of {t.name}-{p.partition_index}")


async def delete_committed_offsets(
    coordinators: GroupCoordinators, group_id: str, topic: str, partitions: Iterable[int] | None = None
) -> None:
    """OffsetDelete for ``topic`` (all its partitions when ``partitions`` is None).

    Kafka refuses (GROUP_SUBSCRIBED_TO_TOPIC) while a live consumer group subscribes to it.
    """
    if partitions is None:
        parts = sorted((await describe_topic(coordinators.cluster, topic)).leaders)
    else:
        parts = sorted(set(partitions))
    request = OffsetDeleteRequest(
        group_id=group_id,
        topics=[
            OffsetDeleteRequestTopic(
                name=topic, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in parts]
            )
        ],
    )

    async def send(conn: BrokerConnection, batch: list[str]) -> GroupAnswers:
        response = await conn.request(OFFSET_DELETE, request)
        return {group_id: (response.error_code, response)}

    code, response, _ = (await coordinators.per_group([group_id], "OffsetDelete", send))[group_id]
    if code:
        raise group_error(group_id, code, "OffsetDelete")
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise group_error(group_id, p.error_code, f"OffsetDelete of {t.name}-{p.partition_index}")


async def group_lag(coordinators: GroupCoordinators, group_id: str) -> list[PartitionLag]:
    """Per partition the group has a committed offset for or has assigned: committed offset,
    log end offset (ListOffsets latest), lag and owner, sorted by topic and partition."""
    (description,) = await describe_groups(coordinators, [group_id])
    committed = await list_committed_offsets(coordinators, group_id)
    owners: dict[TopicPartition, MemberDescription] = {}
    for member in description.members:
        for topic, parts in member.assignment.items():
            for partition in parts:
                owners[(topic, partition)] = member
    tps = sorted(set(committed) | set(owners))
    ends = (
        await log_offsets(
            coordinators.cluster, tps, LATEST, isolation_level=0, backoff=coordinators.new_backoff()
        )
        if tps
        else {}
    )
    out = []
    for tp in tps:
        c = committed.get(tp)
        end = ends.get(tp)
        log_end = end if isinstance(end, int) and end >= 0 else None
        offset = c.offset if c is not None else None
        owner = owners.get(tp)
        out.append(
            PartitionLag(
                topic=tp[0],
                partition=tp[1],
                committed=offset,
                log_end=log_end,
                lag=log_end - offset if log_end is not None and offset is not None else None,
                member_id=owner.member_id if owner else None,
                client_id=owner.client_id if owner else None,
                host=owner.host if owner else None,
            )
        )
    return out
