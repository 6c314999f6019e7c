"""DescribeConfigs (key 32). Served v1-4 (Kafka 4 dropped v0: KIP-896).

Resources: type 2 TOPIC (every topic config we honour, with its override or
default), type 32 GROUP (a consumer group's consumer.session.timeout.ms and
consumer.heartbeat.interval.ms: its override, source GROUP_CONFIG, or the
broker's group.consumer.* setting; any group id, existing or not, as Kafka)
and type 4 BROKER (this node's static settings, all read-only; the
name is the node id, or "" for the cluster-wide dynamic defaults, of which a
static broker has none). A null or empty configuration_keys means every
config; names we do not know are left out, as Kafka does. Other resource types
(8 BROKER_LOGGER, ...) are INVALID_REQUEST with a message; an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION, an illegal topic name INVALID_TOPIC_EXCEPTION, a
broker id other than this node's INVALID_REQUEST.

v1 answers config_source (a topic default taken from a broker setting changed
at start is STATIC_BROKER_CONFIG) and, with include_synonyms, the synonyms in
order of precedence: the topic override, then the broker-level value under
Kafka's name for it (e.g. log.retention.ms for retention.ms), static or default. v2 only
differs in throttling. v3 adds config_type and, with include_documentation,
documentation. v4 is flexible.
With an authorizer each resource needs DescribeConfigs (config_access.py).
"""

from __future__ import annotations

from dataclasses import fields

from ...protocol.apis.describe_configs import (
    SPEC,
    DescribeConfigsRequest,
    DescribeConfigsRequestResource,
    DescribeConfigsResponse,
    DescribeConfigsResponseConfig,
    DescribeConfigsResponseResult,
    DescribeConfigsResponseSynonym,
)
from ...protocol.errors import ErrorCode, KafkaError
from ..config import BrokerConfig
from ..request_context import RequestContext
from ..security.acl import Operation
from ..state import BrokerState
from ..topics import check_topic_name
from . import config_views
from .config_access import check_config_access
from .config_views import ConfigEntry

MIN_VERSION = 1
MAX_VERSION = 4

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32
RESOURCE_NAMES = {
    0: "UNKNOWN",
    1: "ANY",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}

# Topic config -> (Kafka's name of the broker setting that supplies its default, the
# BrokerConfig field holding it or None when this broker has no such setting, the
# built-in default used when it has none).
_BROKER_SYNONYMS: dict[str, tuple[str, str | None, str]] = {
    "retention.ms": ("log.retention.ms", "log_retention_ms", ""),
    "retention.bytes": ("log.retention.bytes", "log_retention_bytes", ""),
    "segment.bytes": ("log.segment.bytes", "log_segment_bytes", ""),
    "segment.ms": ("log.roll.ms", "log_segment_ms", ""),
    "max.message.bytes": ("message.max.bytes", "message_max_bytes", ""),
    "cleanup.policy": ("log.cleanup.policy", None, "delete"),
    "message.timestamp.type": ("log.message.timestamp.type", None, "CreateTime"),
    "min.insync.replicas": ("min.insync.replicas", None, "1"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", None, str(24 * 3600 * 1000)),
}

_FIELD_DEFAULTS: dict[str, object] = {f.name: f.default for f in fields(BrokerConfig)}


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        out = DescribeConfigsResponseResult(
            error_code=0,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        try:
            check_config_access(ctx, resource.resource_type, resource.resource_name, Operation.DESCRIBE_CONFIGS)
            entries, synonyms = _describe(ctx.state, resource)
        except KafkaError as exc:
            out.error_code = exc.code
            out.error_message = exc.message
            results.append(out)
            continue
        wanted = set(resource.configuration_keys or ())
        for entry in entries:
            if wanted and entry.name not in wanted:
                continue
            out.configs.append(
                _config(entry, synonyms, request.include_synonyms, request.include_documentation)
            )
        results.append(out)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


Synonyms = dict[str, list[DescribeConfigsResponseSynonym]]


def _describe(
    state: BrokerState, resource: DescribeConfigsRequestResource
) -> tuple[list[ConfigEntry], Synonyms]:
    kind = resource.resource_type
    name = resource.resource_name
    if kind == RESOURCE_TOPIC:
        check_topic_name(name)
        topic = state.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return _topic_entries(state, config_views.topic_entries(state, topic))
    if kind == RESOURCE_BROKER:
        if name == "":
            return [], {}  # cluster-wide dynamic defaults: a static broker has none
        check_broker_id(state, name)
        entries = config_views.broker_entries(state)
        return entries, {
            e.name: [
                DescribeConfigsResponseSynonym(
                    name=e.name, value=e.value, source=config_views.SOURCE_STATIC_BROKER
                )
            ]
            for e in entries
        }
    if kind == RESOURCE_GROUP:
        check_group_id(name)
        entries = config_views.group_entries(state, name)
        return entries, {e.name: [DescribeConfigsResponseSynonym(name=e.name, value=e.value, source=e.source)]
                         for e in entries}
    raise KafkaError(ErrorCode.INVALID_REQUEST, unsupported_resource(kind, "DescribeConfigs"))


def _topic_entries(
    state: BrokerState, entries: list[ConfigEntry]
) -> tuple[list[ConfigEntry], Synonyms]:
    """Topic entries with the source Kafka would give (a default coming from a broker
    setting changed at start is STATIC_BROKER_CONFIG) and their synonym chains."""
    out = []
    synonyms: Synonyms = {}
    for entry in entries:
        chain: list[DescribeConfigsResponseSynonym] = []
        if entry.source == config_views.SOURCE_DYNAMIC_TOPIC:
            chain.append(
                DescribeConfigsResponseSynonym(
                    name=entry.name, value=entry.value, source=config_views.SOURCE_DYNAMIC_TOPIC
                )
            )
        broker_chain = _broker_synonyms(state, entry.name)
        chain.extend(broker_chain)
        if entry.source == config_views.SOURCE_DEFAULT and broker_chain:
            entry = ConfigEntry(
                entry.name,
                entry.value,
                broker_chain[0].source,
                entry.read_only,
                entry.config_type,
                entry.documentation,
            )
        synonyms[entry.name] = chain
        out.append(entry)
    return out, synonyms


def _broker_synonyms(state: BrokerState, topic_key: str) -> list[DescribeConfigsResponseSynonym]:
    """The broker-level synonym in effect: the broker setting when it was changed at
    start (STATIC_BROKER_CONFIG), else its built-in default (DEFAULT_CONFIG). One entry
    only: Kafka's static and default synonyms have distinct names (log.retention.ms /
    log.retention.hours), ours would share one, and clients key synonyms by name."""
    found = _BROKER_SYNONYMS.get(topic_key)
    if found is None:
        return []
    broker_name, attr, value = found
    source = config_views.SOURCE_DEFAULT
    if attr is not None:
        current = getattr(state.config, attr)
        value = str(current)
        if current != _FIELD_DEFAULTS.get(attr):
            source = config_views.SOURCE_STATIC_BROKER
    return [DescribeConfigsResponseSynonym(name=broker_name, value=value, source=source)]


def _config(
    entry: ConfigEntry, synonyms: Synonyms, include_synonyms: bool, include_documentation: bool
) -> DescribeConfigsResponseConfig:
    return DescribeConfigsResponseConfig(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=False,
        synonyms=list(synonyms.get(entry.name, ())) if include_synonyms else [],
        config_type=entry.config_type,
        documentation=(entry.documentation or None) if include_documentation else None,
    )


def check_broker_id(state: BrokerState, name: str) -> None:
    """A BROKER resource names this node by its id; anything else is INVALID_REQUEST."""
    node = state.config.node_id
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"broker resource name must be a broker id (this broker is node {node}), got {name!r}",
        ) from None
    if broker_id != node:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"unexpected broker id {broker_id}: this cluster has only node {node}",
        )


def unsupported_resource(kind: int, api: str) -> str:
    label = RESOURCE_NAMES.get(kind, "unknown")
    return f"{api} does not support resource type {kind} ({label}); use 2 (TOPIC), 4 (BROKER) or 32 (GROUP)"


def check_group_id(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_GROUP_ID, "a GROUP config resource needs a group id")


__all__ = ["MAX_VERSION", "MIN_VERSION", "SPEC", "handle"]
