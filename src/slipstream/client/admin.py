"""The admin client: one object for topics, configs, ACLs, log offsets and consumer groups.

Works against any Kafka-compatible broker: every request goes out at the highest
version both sides support. Each kind of operation is a module of its own;
:class:`Admin` holds the connections and the retry settings and hands them on:

- topic_admin.py: create, delete, list and describe topics, topic configs;
- log_offsets_admin.py: ListOffsets (earliest, latest, by time), routed to the leaders;
- group_coordinators.py: finding each group's coordinator and retrying there;
- group_admin.py: list, describe and delete groups;
- committed_offsets_admin.py: a group's committed offsets and its lag;
- acl_admin.py: ACLs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..protocol.acl_types import AclBinding
from ..protocol.errors import KafkaError
from . import (
    acl_admin,
    committed_offsets_admin,
    group_admin,
    log_offsets_admin,
    topic_admin,
)
from .acl_admin import AclBindingFilter
from .cluster import BrokerNode, Cluster, TopicInfo
from .committed_offsets_admin import CommittedOffset, PartitionLag
from .group_admin import ConsumerGroupDescription, GroupDescription, GroupListing
from .group_coordinators import GroupCoordinators
from .log_offsets_admin import LATEST, PartitionOffsets, TopicPartition
from .retry import DeadlineBackoff
from .security import ClientSecurity


class Admin:
    """Admin operations: ``Admin("host:9092")`` (or a list of servers), like every client.

    ::

        async with Admin("localhost:9092", client_id="ops") as admin:
            await admin.create_topic("orders", 3)

    Passing a :class:`Cluster` you made (the older form) still works; the admin then
    leaves closing it to you. Built from a bootstrap string, it owns its connections and
    ``close()`` (or leaving the ``async with``) closes them.

    Group calls retry coordinator errors with exponential backoff from
    ``retry_backoff_s`` up to ``retry_backoff_max_s``, for at most
    ``retry_timeout_s`` in all; then the last error is raised. ``clock`` and ``sleep``
    time those retries (tests pass a manual clock).
    """

    def __init__(
        self,
        bootstrap_servers: Cluster | str | list[str],
        *,
        client_id: str = "slipstream-admin",
        request_timeout_ms: float = 30_000,
        retry_backoff_s: float = 0.05,
        retry_backoff_max_s: float = 1.0,
        retry_timeout_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **security: Any,
    ) -> None:
        if isinstance(bootstrap_servers, Cluster):
            cluster = bootstrap_servers
            self._owns_cluster = False
        else:
            # security_protocol, sasl_mechanism, sasl_username, ... as for the producer.
            cluster = Cluster(
                bootstrap_servers, client_id=client_id, request_timeout_s=request_timeout_ms / 1000,
                security=ClientSecurity(**security),
            )
            self._owns_cluster = True
        self.cluster = cluster
        self.retry_backoff_s = retry_backoff_s
        self.retry_backoff_max_s = retry_backoff_max_s
        self.retry_timeout_s = retry_timeout_s
        self.clock = clock
        self.sleep = sleep
        self.group_coordinators = GroupCoordinators(cluster, self._backoff)
        """Where each group's requests go (FindCoordinator, cached per group)."""

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections, if this admin made them (not a Cluster passed in)."""
        if self._owns_cluster:
            await self.cluster.close()

    def _backoff(self) -> DeadlineBackoff:
        # Read at each retry loop's start, so settings changed after construction apply.
        return DeadlineBackoff(
            self.retry_backoff_s, self.retry_backoff_max_s, self.retry_timeout_s, clock=self.clock, sleep=self.sleep
        )

    # ------------------------------------------------------------------ ACLs (acl_admin.py)

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Create ACLs (needs Alter on the cluster); the first refused one raises."""
        await acl_admin.create_acls(self.cluster, bindings)

    async def describe_acls(self, acl_filter: AclBindingFilter = acl_admin.ANY_ACL) -> list[AclBinding]:
        """The ACLs matching the filter (every ACL by default; needs Describe on the cluster)."""
        return await acl_admin.describe_acls(self.cluster, acl_filter)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        """Delete the ACLs matching any filter (needs Alter on the cluster); returns them."""
        return await acl_admin.delete_acls(self.cluster, filters)

    # ------------------------------------------------------------------ topics (topic_admin.py)

    async def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, *, timeout_ms: int = 30000,
    ) -> None:
        await topic_admin.create_topic(
            self.cluster, name, partitions, replication_factor, configs, timeout_ms=timeout_ms
        )

    async def delete_topic(self, name: str, *, timeout_ms: int = 30000) -> None:
        await topic_admin.delete_topic(self.cluster, name, timeout_ms=timeout_ms)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        return await topic_admin.list_topics(self.cluster, include_internal=include_internal)

    async def describe_topic(self, name: str) -> TopicInfo:
        return await topic_admin.describe_topic(self.cluster, name)

    async def topic_configs(self, name: str) -> dict[str, str | None]:
        return await topic_admin.topic_configs(self.cluster, name)

    # ------------------------------------------------------------------ log offsets (log_offsets_admin.py)

    async def list_offsets(self, topic: str, partitions: list[int], timestamp: int) -> dict[int, tuple[int, int]]:
        """partition -> (offset, timestamp) for a ListOffsets spec (-1 latest, -2 earliest, or a time)."""
        return await log_offsets_admin.list_offsets(self.cluster, topic, partitions, timestamp)

    async def partition_offsets(self, name: str) -> list[PartitionOffsets]:
        return await log_offsets_admin.partition_offsets(self.cluster, name)

    async def log_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int = LATEST, *, isolation_level: int = 0
    ) -> dict[TopicPartition, int | KafkaError]:
        """ListOffsets for many partitions at once, routed to their leaders.

        ``timestamp``: LATEST (-1), EARLIEST (-2) or a time in ms (the first
        offset whose record timestamp is at or after it; -1 when none is).
        Partitions that fail are answered with their KafkaError, not raised.
        Leader changes are retried after a metadata refresh. ``isolation_level=1``
        (read_committed): LATEST is the last stable offset.
        """
        return await log_offsets_admin.log_offsets(
            self.cluster, partitions, timestamp, isolation_level=isolation_level, backoff=self._backoff()
        )

    # ------------------------------------------------------------------ groups (group_admin.py)

    async def find_coordinator(self, group_id: str) -> BrokerNode:
        """The broker coordinating ``group_id`` (FindCoordinator; cached until it stops answering)."""
        return (await self.group_coordinators.find([group_id]))[group_id]

    async def find_coordinators(self, group_ids: Iterable[str]) -> dict[str, BrokerNode]:
        """Coordinators of several groups: one batched request on v4+, one per group below."""
        return await self.group_coordinators.find(group_ids)

    async def list_groups(
        self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """Every group of every broker (ListGroups to each), sorted by id.

        ``states`` ("Stable", "Empty", ...) needs ListGroups v4 and ``types``
        ("classic", "consumer") v5 on the brokers; a broker without them raises
        UNSUPPORTED_VERSION rather than answering unfiltered.
        """
        return await group_admin.list_groups(self.cluster, self._backoff, states, types)

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        """DescribeGroups, in the order asked. A group the coordinator does not know is "Dead"."""
        return await group_admin.describe_groups(self.group_coordinators, group_ids)

    async def describe_group(self, group_id: str) -> GroupDescription:
        return (await self.describe_groups([group_id]))[0]

    async def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> list[ConsumerGroupDescription | None]:
        """ConsumerGroupDescribe, in the order asked: consumer (KIP-848) groups with their
        epochs and target assignments; None for a group that is not one (a classic group,
        or none at all). Raises UnsupportedApi when the coordinator does not serve it."""
        return await group_admin.describe_consumer_groups(self.group_coordinators, group_ids)

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """DeleteGroups: every group is tried; the first failure is then raised.

        Kafka deletes only Empty groups (NON_EMPTY_GROUP otherwise) and answers
        GROUP_ID_NOT_FOUND for a group it does not know.
        """
        await group_admin.delete_groups(self.group_coordinators, group_ids)

    # ------------------------------------------------------------------ committed offsets (committed_offsets_admin.py)

    async def list_committed_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """OffsetFetch: the group's committed offsets (all of them when ``partitions`` is None).

        Partitions without a committed offset are left out of the answer.
        """
        return await committed_offsets_admin.list_committed_offsets(self.group_coordinators, group_id, partitions)

    async def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, metadata: str = ""
    ) -> None:
        """Standalone OffsetCommit (generation -1, no member): Kafka takes it only while the
        group has no members (Empty, or unknown: then a group is created for the offsets)."""
        await committed_offsets_admin.alter_committed_offsets(
            self.group_coordinators, group_id, offsets, metadata=metadata
        )

    async def delete_committed_offsets(
        self, group_id: str, topic: str, partitions: Iterable[int] | None = None
    ) -> None:
        """OffsetDelete for ``topic`` (all its partitions when ``partitions`` is None).

        Kafka refuses (GROUP_SUBSCRIBED_TO_TOPIC) while a live consumer group subscribes to it.
        """
        await committed_offsets_admin.delete_committed_offsets(self.group_coordinators, group_id, topic, partitions)

    async def group_lag(self, group_id: str) -> list[PartitionLag]:
        """Per partition the group has a committed offset for or has assigned: committed offset,
        log end offset (ListOffsets latest), lag and owner, sorted by topic and partition."""
        return await committed_offsets_admin.group_lag(self.group_coordinators, group_id)
