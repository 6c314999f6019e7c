"""Config entries as DescribeConfigs / CreateTopics present them (value, source, read-only)."""

from __future__ import annotations

from dataclasses import dataclass

from ..group_configs import GROUP_CONFIG_KEYS
from ..state import BrokerState
from ..topic_config import TOPIC_CONFIG_KEYS, defaults
from ..topics import Topic

# Kafka's ConfigSource values.
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8

# Kafka's ConfigType values (DescribeConfigs v3+).
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    config_type: int
    documentation: str


def topic_entries(state: BrokerState, topic: Topic) -> list[ConfigEntry]:
    base = defaults(state.config)
    out = []
    for name, key in sorted(TOPIC_CONFIG_KEYS.items()):
        if name in topic.configs:
            value, source = topic.configs[name], SOURCE_DYNAMIC_TOPIC
        else:
            value, source = base[name], SOURCE_DEFAULT
        out.append(ConfigEntry(name, value, source, False, CONFIG_TYPES.get(key.kind, 2), key.doc))
    return out


def group_entries(state: BrokerState, group_id: str) -> list[ConfigEntry]:
    """A consumer group's configs: its override (GROUP_CONFIG) or the broker's setting."""
    configs = state.group_configs
    overrides = configs.overrides(group_id)
    out = []
    for name, value in sorted(configs.defaults().items()):
        if name in overrides:
            value, source = overrides[name], SOURCE_GROUP
        else:
            source = SOURCE_STATIC_BROKER
        out.append(ConfigEntry(name, value, source, False, CONFIG_TYPES["int"], GROUP_CONFIG_KEYS[name].doc))
    return out


def broker_entries(state: BrokerState) -> list[ConfigEntry]:
    c = state.config
    values = {
        "broker.id": (str(c.node_id), "int"),
        "node.id": (str(c.node_id), "int"),
        "log.dirs": (c.data_dir, "string"),
        "auto.create.topics.enable": (str(c.auto_create_topics).lower(), "boolean"),
        "num.partitions": (str(c.default_partitions), "int"),
        "message.max.bytes": (str(c.message_max_bytes), "int"),
        "socket.request.max.bytes": (str(c.socket_request_max_bytes), "int"),
        "log.segment.bytes": (str(c.log_segment_bytes), "int"),
        "log.retention.ms": (str(c.log_retention_ms), "long"),
        "log.retention.bytes": (str(c.log_retention_bytes), "long"),
        "offsets.topic.num.partitions": (str(c.offsets_topic_partitions), "int"),
        "offsets.retention.minutes": (str(c.offsets_retention_minutes), "int"),
        "group.initial.rebalance.delay.ms": (str(c.group_initial_rebalance_delay_ms), "int"),
        "group.min.session.timeout.ms": (str(c.group_min_session_timeout_ms), "int"),
        "group.max.session.timeout.ms": (str(c.group_max_session_timeout_ms), "int"),
        "group.max.size": (str(c.group_max_size), "int"),
        "group.consumer.session.timeout.ms": (str(c.group_consumer_session_timeout_ms), "int"),
        "group.consumer.heartbeat.interval.ms": (str(c.group_consumer_heartbeat_interval_ms), "int"),
        "group.consumer.max.size": (str(c.group_consumer_max_size), "int"),
        "group.consumer.heartbeat.budget.per.sec": (str(c.group_consumer_heartbeat_budget_per_sec), "int"),
        "group.consumer.reconciling.heartbeat.budget.per.sec": (
            str(c.group_consumer_reconciling_heartbeat_budget_per_sec),
            "int",
        ),
        "group.consumer.assignors": (c.group_consumer_assignors, "list"),
        "group.consumer.migration.policy": (c.group_consumer_migration_policy, "string"),
        "group.history.max.events": (str(c.group_history_max_events), "int"),
    }
    return [
        ConfigEntry(name, value, SOURCE_STATIC_BROKER, True, CONFIG_TYPES[kind], "")
        for name, (value, kind) in sorted(values.items())
    ]
