"""IncrementalAlterConfigs (key 44). Served v0-1.

Changes only the configs it names (KIP-339), merged into the topic's existing
overrides, each with its own config_operation:

- 0 SET: override with the given value.
- 1 DELETE: drop the override (back to the default); the value is ignored.
- 2 APPEND / 3 SUBTRACT: add / remove items of a list config (cleanup.policy),
  starting from its current value (override or default); APPEND skips items
  already present.

Operations apply in request order; the resulting override set is validated as
a whole (INVALID_CONFIG names the key or value: unknown keys, bad values, a null
value for SET/APPEND/SUBTRACT, APPEND/SUBTRACT on a non-list config) and
``validate_only`` stops there. An unknown config_operation, a resource named
twice, a key named twice within one resource, or a resource type other than
TOPIC/BROKER/GROUP is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
BROKER resources are refused (INVALID_REQUEST): broker settings are static.
GROUP resources (a consumer group's consumer.session.timeout.ms and
consumer.heartbeat.interval.ms, within Kafka's group.consumer.min/max bounds)
take SET and DELETE; the new values apply from each member's next heartbeat.

v1 is v0 in the flexible encoding. With an authorizer each resource needs AlterConfigs
(config_access.py).
"""

from __future__ import annotations

from ...protocol.apis.incremental_alter_configs import (
    SPEC,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsRequestConfig,
    IncrementalAlterConfigsRequestResource,
    IncrementalAlterConfigsResponse,
    IncrementalAlterConfigsResponseResource,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..group_configs import GROUP_CONFIG_KEYS
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from ..topic_config import TOPIC_CONFIG_KEYS
from ..topics import Topic
from .alter_configs import (
    alter_each,
    check_duplicate_keys,
    lookup_topic,
    refuse_broker_change,
)
from .config_access import check_config_access
from .describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    check_group_id,
    unsupported_resource,
)

MIN_VERSION = 0
MAX_VERSION = 1

SET = 0
DELETE = 1
APPEND = 2
SUBTRACT = 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = alter_each(
        request.resources,
        IncrementalAlterConfigsResponseResource,
        lambda resource: _checked_alter(ctx, resource, request.validate_only),
    )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _checked_alter(ctx: RequestContext, resource: IncrementalAlterConfigsRequestResource, validate_only: bool) -> None:
    check_config_access(ctx, resource.resource_type, resource.resource_name, Operation.ALTER_CONFIGS)
    _alter(ctx.state, resource, validate_only)


def _alter(
    state: BrokerState, resource: IncrementalAlterConfigsRequestResource, validate_only: bool
) -> None:
    check_duplicate_keys(c.name for c in resource.configs)
    for change in resource.configs:
        if change.config_operation not in OPERATION_NAMES:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"unknown config_operation {change.config_operation} for {change.name!r} "
                "(0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)",
            )
    if resource.resource_type == RESOURCE_TOPIC:
        topic = lookup_topic(state, resource.resource_name)
        overrides = merged_overrides(state, topic, resource.configs)
        state.topics.set_configs(topic.name, overrides, validate_only=validate_only)
    elif resource.resource_type == RESOURCE_BROKER:
        refuse_broker_change(state, resource.resource_name, bool(resource.configs))
    elif resource.resource_type == RESOURCE_GROUP:
        check_group_id(resource.resource_name)
        overrides = merged_group_overrides(state, resource.resource_name, resource.configs)
        state.group_configs.set(resource.resource_name, overrides, validate_only=validate_only)
    else:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            unsupported_resource(resource.resource_type, "IncrementalAlterConfigs"),
        )


def merged_group_overrides(
    state: BrokerState, group_id: str, changes: list[IncrementalAlterConfigsRequestConfig]
) -> dict[str, str]:
    """The group's override set after ``changes`` (SET and DELETE only: no list configs)."""
    overrides = state.group_configs.overrides(group_id)
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        if name not in GROUP_CONFIG_KEYS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown group config {name!r}")
        if op == DELETE:
            overrides.pop(name, None)
        elif op != SET:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"cannot {OPERATION_NAMES[op]} to {name}: it is not a list config")
        elif value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"SET of {name} needs a value (null given); use DELETE to remove it")
        else:
            overrides[name] = value
    return overrides


def merged_overrides(
    state: BrokerState, topic: Topic, changes: list[IncrementalAlterConfigsRequestConfig]
) -> dict[str, str]:
    """The topic's override set after applying ``changes`` in order (not yet validated)."""
    overrides = dict(topic.configs)
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        key = TOPIC_CONFIG_KEYS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"unknown topic config {name!r}")
        if op == DELETE:
            overrides.pop(name, None)
            continue
        if value is None:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"{OPERATION_NAMES[op]} of {name} needs a value (null given); use DELETE to remove it",
            )
        if op == SET:
            overrides[name] = value
            continue
        if key.kind != "list":
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"cannot {OPERATION_NAMES[op]} to {name}: it is not a list config",
            )
        current = overrides.get(name)
        if current is None:
            current = state.topics.effective_configs(topic)[name]
        items = [x.strip() for x in current.split(",") if x.strip()]
        given = [x.strip() for x in value.split(",") if x.strip()]
        if op == APPEND:
            items.extend(x for x in dict.fromkeys(given) if x not in items)
        else:
            items = [x for x in items if x not in given]
        overrides[name] = ",".join(items)
    return overrides


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
