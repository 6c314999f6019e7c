"""Who may describe or alter a config resource (Kafka's checks for DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs): a topic's configs need DescribeConfigs /
AlterConfigs on the topic, a broker's on the cluster, a group's on the group. A refusal
is that resource's TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED."""

from __future__ import annotations

from ...protocol.errors import ErrorCode, KafkaError
from ..request_context import RequestContext
from ..security.acl import Operation

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32


def check_config_access(ctx: RequestContext, resource_type: int, name: str, operation: Operation) -> None:
    """Raise the resource's authorization error when ``operation`` is not allowed on it."""
    if not ctx.authorizing:
        return
    what = "DescribeConfigs" if operation == Operation.DESCRIBE_CONFIGS else "AlterConfigs"
    if resource_type == RESOURCE_TOPIC:
        if not ctx.topic_allowed(operation, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"{what} on topic {name!r} is not allowed")
    elif resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
        if not ctx.authorized_cluster(operation):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"{what} on the cluster is not allowed")
    elif resource_type == RESOURCE_GROUP and not ctx.group_allowed(operation, name):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, f"{what} on group {name!r} is not allowed")
