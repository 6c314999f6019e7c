"""Admin operations over the wire: topics, configs, offsets. Works against any Kafka broker."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.apis.create_topics import (
    SPEC as CREATE_TOPICS,
)
from ..protocol.apis.create_topics import (
    CreateTopicsRequest,
    CreateTopicsRequestConfig,
    CreateTopicsRequestTopic,
)
from ..protocol.apis.delete_topics import (
    SPEC as DELETE_TOPICS,
)
from ..protocol.apis.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsRequestTopic,
)
from ..protocol.apis.describe_configs import (
    SPEC as DESCRIBE_CONFIGS,
)
from ..protocol.apis.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsRequestResource,
)
from ..protocol.apis.list_offsets import (
    SPEC as LIST_OFFSETS,
)
from ..protocol.apis.list_offsets import (
    ListOffsetsRequest,
    ListOffsetsRequestPartition,
    ListOffsetsRequestTopic,
)
from ..protocol.errors import KafkaError
from .cluster import Cluster, TopicInfo

EARLIEST = -2
LATEST = -1
RESOURCE_TOPIC = 2


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    partition: int
    leader: int
    earliest: int
    latest: int


class Admin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1,
        configs: dict[str, str] | None = None, *, timeout_ms: int = 30000,
    ) -> None:
        conn = await self.cluster.controller_connection()
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequestTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=[CreateTopicsRequestConfig(name=k, value=v) for k, v in (configs or {}).items()],
                )
            ],
            timeout_ms=timeout_ms,
        )
        response = await conn.request(CREATE_TOPICS, request)
        for topic in response.topics:
            if topic.error_code:
                raise KafkaError(topic.error_code, topic.error_message)

    async def delete_topic(self, name: str, *, timeout_ms: int = 30000) -> None:
        conn = await self.cluster.controller_connection()
        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequestTopic(name=name)], topic_names=[name], timeout_ms=timeout_ms
        )
        response = await conn.request(DELETE_TOPICS, request)
        for topic in response.responses:
            if topic.error_code:
                raise KafkaError(topic.error_code, topic.error_message)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        topics = await self.cluster.refresh_metadata(None)
        return sorted(
            (t for t in topics.values() if include_internal or not t.is_internal), key=lambda t: t.name
        )

    async def describe_topic(self, name: str) -> TopicInfo:
        topics = await self.cluster.refresh_metadata([name])
        info = topics.get(name)
        if info is None or info.error_code:
            raise KafkaError(info.error_code if info else 3, f"topic {name!r}: cannot describe")
        return info

    async def topic_configs(self, name: str) -> dict[str, str | None]:
        conn = await self.cluster.any_connection()
        request = DescribeConfigsRequest(
            resources=[DescribeConfigsRequestResource(resource_type=RESOURCE_TOPIC, resource_name=name, configuration_keys=None)]
        )
        response = await conn.request(DESCRIBE_CONFIGS, request)
        out: dict[str, str | None] = {}
        for result in response.results:
            if result.error_code:
                raise KafkaError(result.error_code, result.error_message)
            for entry in result.configs:
                out[entry.name] = entry.value
        return out

    async def list_offsets(self, topic: str, partitions: list[int], timestamp: int) -> dict[int, tuple[int, int]]:
        """partition -> (offset, timestamp) for a ListOffsets spec (-1 latest, -2 earliest, or a time)."""
        out: dict[int, tuple[int, int]] = {}
        by_leader: dict[int, list[int]] = {}
        info = self.cluster.topics.get(topic) or (await self.describe_topic(topic))
        for p in partitions:
            by_leader.setdefault(info.leaders.get(p, -1), []).append(p)
        for leader, parts in by_leader.items():
            conn = await self.cluster.connection(leader)
            request = ListOffsetsRequest(
                replica_id=-1,
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

    async def partition_offsets(self, name: str) -> list[PartitionOffsets]:
        info = await self.describe_topic(name)
        parts = sorted(info.leaders)
        earliest = await self.list_offsets(name, parts, EARLIEST)
        latest = await self.list_offsets(name, parts, LATEST)
        return [PartitionOffsets(p, info.leaders[p], earliest[p][0], latest[p][0]) for p in parts]
