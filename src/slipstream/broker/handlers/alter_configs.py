"""AlterConfigs (key 33). Served v0-2.

The legacy, non-incremental API: for a TOPIC (type 2) the given configs replace
the topic's whole override set; a config left out, or given with a null value,
reverts to its default. Every value is validated first (INVALID_CONFIG names the
bad key or value, including unknown keys); ``validate_only`` stops there.

BROKER resources (type 4) are refused with INVALID_REQUEST: this broker's
settings are static, set when it starts (CLI flags, config file, environment).
An empty change list for this node is accepted as the no-op it is. Other
resource types, a resource named twice, or a config named twice within one
resource are INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.

v1 only differs in throttling; v2 is flexible.
With an authorizer each resource needs AlterConfigs (config_access.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from ...protocol.apis.alter_configs import (
    SPEC,
    AlterConfigsRequest,
    AlterConfigsRequestResource,
    AlterConfigsResponse,
    AlterConfigsResponseResource,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..internal_topics import refuse_config_change
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from ..topics import Topic, check_topic_name
from .config_access import check_config_access
from .describe_configs import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    check_broker_id,
    unsupported_resource,
)

MIN_VERSION = 0
MAX_VERSION = 2

STATIC_BROKER_MESSAGE = (
    "broker configs are static; set them when the broker starts "
    "(slipstream serve flags, config file or SLIPSTREAM_* environment variables)"
)


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = alter_each(
        request.resources,
        AlterConfigsResponseResource,
        lambda resource: _checked_alter(ctx, resource, request.validate_only),
    )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _checked_alter(ctx: RequestContext, resource: AlterConfigsRequestResource, validate_only: bool) -> None:
    check_config_access(ctx, resource.resource_type, resource.resource_name, Operation.ALTER_CONFIGS)
    _alter(ctx.state, resource, validate_only)


def _alter(state: BrokerState, resource: AlterConfigsRequestResource, validate_only: bool) -> None:
    check_duplicate_keys(c.name for c in resource.configs)
    if resource.resource_type == RESOURCE_TOPIC:
        topic = lookup_topic(state, resource.resource_name)
        overrides = {c.name: c.value for c in resource.configs if c.value is not None}
        state.topics.set_configs(topic.name, overrides, validate_only=validate_only)
    elif resource.resource_type == RESOURCE_BROKER:
        refuse_broker_change(state, resource.resource_name, bool(resource.configs))
    else:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, unsupported_resource(resource.resource_type, "AlterConfigs")
        )


# ---------------------------------------------------------------- shared with
# IncrementalAlterConfigs


class _Resource(Protocol):
    resource_type: int
    resource_name: str


R = TypeVar("R", bound=_Resource)
Out = TypeVar("Out")


def alter_each(
    resources: Sequence[R], result: Callable[..., Out], alter: Callable[[R], None]
) -> list[Out]:
    """Apply ``alter`` to each resource; a KafkaError becomes that resource's error only."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    results = []
    for resource in resources:
        code, message = ErrorCode.NONE, None
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, _duplicate_resource_message(resource))
            alter(resource)
        except KafkaError as exc:
            code, message = exc.code, exc.message
        results.append(
            result(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return results


def _duplicate_resource_message(resource: _Resource) -> str:
    return (
        f"resource {resource.resource_name!r} (type {resource.resource_type}) appears more than "
        "once in the request; each resource may appear at most once"
    )


def check_duplicate_keys(names: Iterable[str]) -> None:
    repeated = sorted(name for name, n in Counter(names).items() if n > 1)
    if repeated:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"config key(s) {', '.join(repeated)} given more than once for one resource",
        )


def lookup_topic(state: BrokerState, name: str) -> Topic:
    check_topic_name(name)
    topic = state.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
    refuse_config_change(name)
    return topic


def refuse_broker_change(state: BrokerState, name: str, has_changes: bool) -> None:
    if name != "":
        check_broker_id(state, name)
    if has_changes:
        raise KafkaError(ErrorCode.INVALID_REQUEST, STATIC_BROKER_MESSAGE)


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
