"""Topics over the wire: create, delete, list and describe them, read their configs."""

from __future__ import annotations

from ..protocol.apis.create_topics import SPEC as CREATE_TOPICS
from ..protocol.apis.create_topics import (
    CreateTopicsRequest,
    CreateTopicsRequestConfig,
    CreateTopicsRequestTopic,
)
from ..protocol.apis.delete_topics import SPEC as DELETE_TOPICS
from ..protocol.apis.delete_topics import DeleteTopicsRequest, DeleteTopicsRequestTopic
from ..protocol.apis.describe_configs import SPEC as DESCRIBE_CONFIGS
from ..protocol.apis.describe_configs import DescribeConfigsRequest, DescribeConfigsRequestResource
from ..protocol.errors import KafkaError
from .cluster import Cluster, TopicInfo

RESOURCE_TOPIC = 2


async def create_topic(
    cluster: Cluster, name: str, partitions: int = -1, replication_factor: int = -1,
    configs: dict[str, str] | None = None, *, timeout_ms: int = 30000,
) -> None:
    conn = await cluster.controller_connection()
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


async def delete_topic(cluster: Cluster, name: str, *, timeout_ms: int = 30000) -> None:
    conn = await cluster.controller_connection()
    request = DeleteTopicsRequest(
        topics=[DeleteTopicsRequestTopic(name=name)], topic_names=[name], timeout_ms=timeout_ms
    )
    response = await conn.request(DELETE_TOPICS, request)
    for topic in response.responses:
        if topic.error_code:
            raise KafkaError(topic.error_code, topic.error_message)


async def list_topics(cluster: Cluster, *, include_internal: bool = False) -> list[TopicInfo]:
    topics = await cluster.refresh_metadata(None)
    return sorted(
        (t for t in topics.values() if include_internal or not t.is_internal), key=lambda t: t.name
    )


async def describe_topic(cluster: Cluster, name: str) -> TopicInfo:
    topics = await cluster.refresh_metadata([name])
    info = topics.get(name)
    if info is None or info.error_code:
        raise KafkaError(info.error_code if info else 3, f"topic {name!r}: cannot describe")
    return info


async def topic_configs(cluster: Cluster, name: str) -> dict[str, str | None]:
    conn = await cluster.any_connection()
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
