"""Committed offsets of a group (OffsetFetch / OffsetCommit) and the offset reset policy.

- :class:`GroupOffsets` reads and writes a group's committed offsets through
  its coordinator (a :class:`~.coordinator_locator.CoordinatorLocator`, shared with the
  membership). Commits go out one at a time, in call order, so an earlier
  commit can never land after a later one. A member commits with its
  generation and member id; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and
  UNKNOWN_MEMBER_ID mean the group moved on without this member's partitions:
  :class:`CommitFailedError` (the membership is told, so it rejoins).
  Coordinator moves and lost connections are retried with backoff until the
  caller's timeout. With the consumer group protocol (KIP-848) the
  "generation" is the member epoch (OffsetCommit v9, OffsetFetch v9 name the
  member and its epoch): STALE_MEMBER_EPOCH waits for the next heartbeat
  answer and retries with the new epoch, dropping partitions the member no
  longer owns; FENCED_MEMBER_EPOCH is a stale membership like UNKNOWN_MEMBER_ID.
- :func:`list_offsets` / :func:`reset_offsets` ask partition leaders for the
  earliest or latest offset (ListOffsets), used for ``auto_offset_reset`` when
  a partition has no committed offset or its position is out of range.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..protocol.apis.list_offsets import SPEC as LIST_OFFSETS
from ..protocol.apis.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsRequestTopic,
)
from ..protocol.apis.offset_commit import SPEC as OFFSET_COMMIT
from ..protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from ..protocol.apis.offset_fetch import SPEC as OFFSET_FETCH
from ..protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .assignors import TopicPartition
from .cluster import Cluster
from .connection import BrokerConnection, ConnectionClosed
from .consumer_config import ConsumerConfig
from .coordinator_locator import CoordinatorLocator
from .group_errors import FatalGroupError
from .membership_types import Generation
from .retry import Backoff
from .tasks import deadline

T = TypeVar("T")
# OffsetCommit/OffsetFetch v10 name topics by id; this client names them.
NAMED_TOPICS_MAX_VERSION = 9

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_GROUP_AUTHORIZATION_FAILED = 30
_TOPIC_AUTHORIZATION_FAILED = 29


# ---------------------------------------------------------------------------- data and errors


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the offset of the *next* record to consume."""

    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


class CommitFailedError(KafkaError):
    """The commit was refused because the group rebalanced without this member's partitions."""

    def __init__(self, code: int, group_id: str) -> None:
        super().__init__(
            code,
            f"commit for group {group_id!r} cannot be completed: the group has rebalanced and "
            f"assigned the partitions to another member ({error_name(code)}). This happens when "
            "the time between polls exceeds max_poll_interval_ms or a rebalance listener is slow; "
            "the records processed since the last commit will be consumed again by the new owner.",
        )


class NoOffsetForPartitionError(KafkaError):
    """auto_offset_reset is "none" and a partition has no committed offset (or is out of range)."""

    def __init__(
        self, partitions: Iterable[TopicPartition], why: str = "no committed offset"
    ) -> None:
        self.partitions = sorted(partitions)
        names = ", ".join(f"{t}-{p}" for t, p in self.partitions)
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{why} for {names} and auto_offset_reset is 'none': seek to an offset first",
        )


_STALE_MEMBERSHIP = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_MEMBER_EPOCH,
    }
)
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return out


class _RetryCommit(Exception):
    pass


class _StaleEpoch(Exception):
    """OffsetCommit answered STALE_MEMBER_EPOCH: the member has a newer epoch on the broker."""


NextGeneration = Callable[[int], Awaitable[Generation | None]]
"""``await next_generation(stale_epoch)``: the member's generation after its next heartbeat
answer (None when it is no longer in the group)."""
MemberIdentity = Callable[[], tuple[str, int] | None]
"""The (member id, member epoch) an OffsetFetch v9 names, None outside the group."""


# ---------------------------------------------------------------------------- committed offsets


class GroupOffsets:
    """Committed offsets of one group, through its coordinator.

    ``on_membership_error(code, (generation_id, member_id))`` is called when a
    commit answers that the membership is stale (GroupMembership.on_commit_error).
    Consumer protocol members also give ``next_generation`` (STALE_MEMBER_EPOCH
    retries) and ``member_identity`` (OffsetFetch v9).
    """

    def __init__(
        self,
        locator: CoordinatorLocator,
        config: ConsumerConfig,
        *,
        on_membership_error: Callable[[int, tuple[int, str]], None] | None = None,
        next_generation: NextGeneration | None = None,
        member_identity: MemberIdentity | None = None,
    ) -> None:
        self.locator = locator
        self.config = config
        self.group_id = locator.group_id
        self.on_membership_error = on_membership_error
        self.next_generation = next_generation
        self.member_identity = member_identity
        self._commit_lock = asyncio.Lock()
        self.commits_sent = 0

    async def fetch_committed(
        self, partitions: Iterable[TopicPartition], *, timeout_s: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offset of each partition (None: nothing committed)."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        timeout = self.config.request_timeout_ms / 1000.0 * 2 if timeout_s is None else timeout_s
        async with deadline(timeout, f"fetching the committed offsets of group {self.group_id!r}"):
            return await self._retrying("OffsetFetch", lambda conn: self._fetch_once(conn, wanted))

    async def _fetch_once(
        self, conn: BrokerConnection, wanted: list[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        version = conn.version_for(OFFSET_FETCH, NAMED_TOPICS_MAX_VERSION)
        by_topic = group_by_topic(wanted)
        identity = self.member_identity() if self.member_identity is not None else None
        member_id, member_epoch = identity if identity is not None else (None, -1)
        request = OffsetFetchRequest(
            group_id=self.group_id,
            topics=[
                OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ],
            groups=[
                OffsetFetchRequestGroup(
                    group_id=self.group_id,
                    member_id=member_id,
                    member_epoch=member_epoch,
                    topics=[
                        OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
            require_stable=True,
        )
        response: OffsetFetchResponse = await conn.request(OFFSET_FETCH, request, version=version)
        rows: list[tuple[str, int, int, str | None, int, int]] = []
        if version >= 8:
            for g in response.groups:
                self._check_top_level(g.error_code)
                for t in g.topics:
                    for p in t.partitions:
                        rows.append(
                            (
                                t.name,
                                p.partition_index,
                                p.committed_offset,
                                p.metadata,
                                p.committed_leader_epoch,
                                p.error_code,
                            )
                        )
        else:
            if version >= 2:
                self._check_top_level(response.error_code)
            for old in response.topics:
                for q in old.partitions:
                    rows.append(
                        (
                            old.name,
                            q.partition_index,
                            q.committed_offset,
                            q.metadata,
                            q.committed_leader_epoch,
                            q.error_code,
                        )
                    )
        out: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
        for topic, partition, offset, metadata, epoch, code in rows:
            tp = (topic, partition)
            if code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                raise _RetryCommit(f"{topic}-{partition} has a pending transactional commit")
            if code in _REDISCOVER or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                self._check_top_level(code)
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                log.debug(
                    "group %s: OffsetFetch: %s-%d does not exist", self.group_id, topic, partition
                )
                continue
            if code:
                raise KafkaError(
                    code, f"OffsetFetch for {topic}-{partition} in group {self.group_id!r} failed"
                )
            if tp in out and offset >= 0:
                out[tp] = OffsetAndMetadata(offset, metadata, epoch)
        return out

    def _check_top_level(self, code: int) -> None:
        if code == ErrorCode.NONE:
            return
        if code in _REDISCOVER:
            self.locator.mark_unknown(f"OffsetFetch: {error_name(code)}")
            raise _RetryCommit(error_name(code))
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise _RetryCommit(error_name(code))
        if code in (ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID) and (
            self.member_identity is not None
        ):
            # The member epoch moved on (or the member is rejoining): ask again with the new one.
            raise _RetryCommit(error_name(code))
        if code == _GROUP_AUTHORIZATION_FAILED:
            raise FatalGroupError(
                code, f"not authorized to read the offsets of group {self.group_id!r}"
            )
        raise KafkaError(code, f"OffsetFetch for group {self.group_id!r} failed")

    async def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        generation: Generation | None = None,
        *,
        timeout_s: float | None = None,
    ) -> None:
        """Commit ``offsets`` (the next offset to consume per partition), in call order.

        ``generation`` is the member's current generation (None: a commit
        outside group management, generation -1). Raises CommitFailedError when
        the group rebalanced, KafkaError for other failures, TimeoutError when
        retriable failures outlast ``timeout_s`` (default: twice the request timeout).
        """
        if not offsets:
            return
        normalized = {
            tp: (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)))
            for tp, o in offsets.items()
        }
        for (topic, partition), om in normalized.items():
            if om.offset < 0:
                raise ValueError(
                    f"cannot commit negative offset {om.offset} for {topic}-{partition}"
                )
        timeout = self.config.request_timeout_ms / 1000.0 * 2 if timeout_s is None else timeout_s
        async with deadline(timeout, f"committing offsets of group {self.group_id!r}"), self._commit_lock:
            while True:
                try:
                    await self._retrying(
                        "OffsetCommit",
                        functools.partial(
                            self._commit_once, offsets=normalized, generation=generation
                        ),
                    )
                    return
                except _StaleEpoch:
                    assert generation is not None
                    generation, normalized = await self._after_stale_epoch(generation, normalized)
                    if not normalized:
                        return

    async def _after_stale_epoch(
        self, generation: Generation, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[Generation, dict[TopicPartition, OffsetAndMetadata]]:
        """The newer generation to retry with and what of ``offsets`` it still owns."""
        fresh = None
        if self.next_generation is not None:
            fresh = await self.next_generation(generation.generation_id)
        if fresh is None:
            raise CommitFailedError(ErrorCode.STALE_MEMBER_EPOCH, self.group_id)
        owned = set(fresh.assignment)
        kept = {tp: om for tp, om in offsets.items() if tp in owned}
        dropped = sorted(set(offsets) - set(kept))
        if dropped:
            log.info(
                "group %s: not retrying the commit of %s: no longer owned at epoch %d",
                self.group_id,
                dropped,
                fresh.generation_id,
            )
        return fresh, kept

    async def _retrying(self, what: str, once: Callable[[BrokerConnection], Awaitable[T]]) -> T:
        """Run ``once`` on the coordinator's connection until it succeeds or fails for good.

        Connection failures and retriable errors rediscover the coordinator and back
        off; CommitFailedError, fatal group errors and other errors are raised.
        """
        attempt = 0
        while True:
            try:
                return await once(await self.locator.connection())
            except _RetryCommit as exc:
                reason = str(exc)
            except (ConnectionClosed, OSError) as exc:
                self.locator.mark_unknown(str(exc))
                reason = str(exc)
            except CommitFailedError:
                raise
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, FatalGroupError):
                    raise
                self.locator.mark_unknown(str(exc))
                reason = str(exc)
            delay = self.config.retry_backoff().delay_s(attempt)
            attempt += 1
            log.debug("group %s: %s retry in %.3fs: %s", self.group_id, what, delay, reason)
            await asyncio.sleep(delay)

    async def _commit_once(
        self,
        conn: BrokerConnection,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        generation: Generation | None,
    ) -> None:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), om in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=om.offset,
                    committed_leader_epoch=om.leader_epoch,
                    committed_metadata=om.metadata if om.metadata is not None else "",
                )
            )
        if generation is not None:
            gen_id, member_id, instance_id = (
                generation.generation_id,
                generation.member_id,
                generation.group_instance_id,
            )
        else:
            gen_id, member_id, instance_id = -1, "", None
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=gen_id,
            member_id=member_id,
            group_instance_id=instance_id,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        self.commits_sent += 1
        response: OffsetCommitResponse = await conn.request(OFFSET_COMMIT, request, max_version=NAMED_TOPICS_MAX_VERSION)
        retry: str | None = None
        for t in response.topics:
            for p in t.partitions:
                code = p.error_code
                if code == ErrorCode.NONE:
                    continue
                where = f"{t.name}-{p.partition_index}"
                if code == ErrorCode.STALE_MEMBER_EPOCH and generation is not None:
                    raise _StaleEpoch(where)
                if code in _STALE_MEMBERSHIP:
                    if self.on_membership_error is not None and generation is not None:
                        self.on_membership_error(code, (gen_id, member_id))
                    raise CommitFailedError(code, self.group_id)
                if code == ErrorCode.FENCED_INSTANCE_ID:
                    raise FatalGroupError(
                        code,
                        f"commit for group {self.group_id!r}: group instance "
                        f"id {instance_id!r} was fenced by another consumer",
                    )
                if code in _REDISCOVER:
                    self.locator.mark_unknown(f"OffsetCommit: {error_name(code)}")
                    retry = error_name(code)
                elif code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT):
                    retry = error_name(code)
                elif code == _GROUP_AUTHORIZATION_FAILED:
                    raise FatalGroupError(
                        code, f"not authorized to commit for group {self.group_id!r}"
                    )
                elif code == ErrorCode.OFFSET_METADATA_TOO_LARGE:
                    raise KafkaError(
                        code, f"commit metadata for {where} is larger than the broker allows"
                    )
                else:
                    raise KafkaError(
                        code, f"OffsetCommit for {where} in group {self.group_id!r} failed"
                    )
        if retry is not None:
            raise _RetryCommit(retry)


# ---------------------------------------------------------------------------- ListOffsets / reset


async def list_offsets(
    cluster: Cluster,
    targets: Mapping[TopicPartition, int],
    *,
    isolation_level: int = 0,
    retry_backoff_ms: int = 100,
    retry_backoff_max_ms: int = 1000,
    timeout_s: float = 30.0,
) -> dict[TopicPartition, tuple[int, int]]:
    """(offset, timestamp) per partition for a ListOffsets target (-2 earliest, -1 latest, or a time).

    Asks each partition's leader; NOT_LEADER_OR_FOLLOWER and friends refresh
    the metadata and retry with backoff until ``timeout_s``.
    """
    remaining = dict(targets)
    out: dict[TopicPartition, tuple[int, int]] = {}
    attempt = 0
    async with deadline(timeout_s, f"listing offsets of {len(remaining)} partition(s)"):
        while remaining:
            failed: dict[TopicPartition, int] = {}
            refresh = False
            by_leader: dict[int, list[TopicPartition]] = {}
            topics = sorted({t for t, _ in remaining})
            missing = [t for t in topics if t not in cluster.topics]
            if missing:
                await cluster.refresh_metadata(missing)
            for tp in sorted(remaining):
                info = cluster.topics.get(tp[0])
                leader = -1 if info is None else info.leaders.get(tp[1], -1)
                if info is None or tp[1] not in info.leaders:
                    failed[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif leader < 0:
                    failed[tp] = ErrorCode.LEADER_NOT_AVAILABLE
                else:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                try:
                    conn = await cluster.connection(leader)
                    request = ListOffsetsRequest(
                        replica_id=-1,
                        # v10+: how long the broker may wait on tiered storage.
                        timeout_ms=int(conn.request_timeout_s * 1000),
                        isolation_level=isolation_level,
                        topics=[
                            ListOffsetsRequestTopic(
                                name=topic,
                                partitions=[
                                    ListOffsetsRequestPartition(
                                        partition_index=p, timestamp=remaining[(topic, p)]
                                    )
                                    for p in parts
                                ],
                            )
                            for topic, parts in group_by_topic(tps).items()
                        ],
                    )
                    response = await conn.request(LIST_OFFSETS, request)
                except (ConnectionClosed, OSError, KafkaError) as exc:
                    if isinstance(exc, KafkaError) and not exc.retriable:
                        raise
                    for tp in tps:
                        failed[tp] = ErrorCode.NETWORK_EXCEPTION
                    refresh = True
                    continue
                for t in response.topics:
                    for p in t.partitions:
                        tp = (t.name, p.partition_index)
                        if tp not in remaining:
                            continue
                        if p.error_code == ErrorCode.NONE:
                            offset = p.offset
                            if offset < 0 and p.old_style_offsets:
                                offset = p.old_style_offsets[0]
                            out[tp] = (offset, p.timestamp)
                            del remaining[tp]
                        elif is_retriable(p.error_code):
                            failed[tp] = p.error_code
                            refresh = True
                        else:
                            raise KafkaError(
                                p.error_code, f"ListOffsets for {tp[0]}-{tp[1]} failed"
                            )
            if not remaining:
                break
            if refresh or failed:
                try:
                    await cluster.refresh_metadata(sorted({t for t, _ in remaining}))
                except (ConnectionClosed, OSError, KafkaError) as exc:
                    log.debug("metadata refresh for ListOffsets failed: %s", exc)
            delay = Backoff(retry_backoff_ms, retry_backoff_max_ms).delay_s(attempt)
            attempt += 1
            log.debug(
                "ListOffsets retry in %.3fs for %s (%s)",
                delay,
                sorted(remaining),
                {f"{t}-{p}": error_name(c) for (t, p), c in failed.items()},
            )
            await asyncio.sleep(delay)
    return out


def reset_timestamp(policy: str) -> int:
    if policy == "earliest":
        return EARLIEST_TIMESTAMP
    if policy == "latest":
        return LATEST_TIMESTAMP
    raise ValueError(f"offset reset policy must be 'earliest' or 'latest', got {policy!r}")


async def reset_offsets(
    cluster: Cluster,
    policies: Mapping[TopicPartition, str],
    config: ConsumerConfig,
    *,
    timeout_s: float | None = None,
) -> dict[TopicPartition, int]:
    """The position each partition resets to under its policy ("earliest" / "latest").

    A partition whose policy is "none" raises NoOffsetForPartitionError (naming all such).
    """
    none = [tp for tp, policy in policies.items() if policy == "none"]
    if none:
        raise NoOffsetForPartitionError(none)
    targets = {tp: reset_timestamp(policy) for tp, policy in policies.items()}
    result = await list_offsets(
        cluster,
        targets,
        isolation_level=config.isolation_level_code,
        retry_backoff_ms=config.retry_backoff_ms,
        retry_backoff_max_ms=config.retry_backoff_max_ms,
        timeout_s=config.request_timeout_ms / 1000.0 if timeout_s is None else timeout_s,
    )
    return {tp: offset for tp, (offset, _ts) in result.items()}
