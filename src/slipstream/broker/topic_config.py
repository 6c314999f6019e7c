"""Per-topic configs: the keys we honour, their defaults from the broker config, validation."""

from __future__ import annotations

from dataclasses import dataclass

from ..log.api import LogConfig
from .config import BrokerConfig


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: str  # "long", "int", "string", "list"
    doc: str
    choices: tuple[str, ...] = ()


TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey("retention.ms", "long", "How long to keep log segments (-1: forever)."),
        ConfigKey("retention.bytes", "long", "Maximum partition size before old segments are deleted (-1: no limit)."),
        ConfigKey("segment.bytes", "int", "Segment file size at which the log rolls."),
        ConfigKey("segment.ms", "long", "Age at which the active segment rolls."),
        ConfigKey("cleanup.policy", "list", "delete, compact, or both.", ("delete", "compact")),
        ConfigKey(
            "message.timestamp.type",
            "string",
            "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
            ("CreateTime", "LogAppendTime"),
        ),
        ConfigKey("max.message.bytes", "int", "Largest record batch the topic accepts."),
        ConfigKey("min.insync.replicas", "int", "Accepted for compatibility; a single node is always in sync."),
        ConfigKey("delete.retention.ms", "long", "How long tombstones survive compaction."),
    )
}


class InvalidConfig(ValueError):
    pass


def validate(name: str, value: str | None) -> None:
    key = TOPIC_CONFIG_KEYS.get(name)
    if key is None:
        raise InvalidConfig(f"unknown topic config {name!r}")
    if value is None:
        return
    if key.kind in ("long", "int"):
        try:
            number = int(value)
        except ValueError:
            raise InvalidConfig(f"{name} must be an integer, got {value!r}") from None
        if number < -1:
            raise InvalidConfig(f"{name} must be >= -1, got {number}")
        if name in ("segment.bytes", "max.message.bytes") and number < 1:
            raise InvalidConfig(f"{name} must be positive, got {number}")
    elif key.kind == "list":
        items = [x.strip() for x in value.split(",") if x.strip()]
        bad = [x for x in items if x not in key.choices]
        if bad or not items:
            raise InvalidConfig(f"{name} must be a list of {', '.join(key.choices)}, got {value!r}")
    elif key.choices and value not in key.choices:
        raise InvalidConfig(f"{name} must be one of {', '.join(key.choices)}, got {value!r}")


def defaults(broker: BrokerConfig) -> dict[str, str]:
    return {
        "retention.ms": str(broker.log_retention_ms),
        "retention.bytes": str(broker.log_retention_bytes),
        "segment.bytes": str(broker.log_segment_bytes),
        "segment.ms": str(broker.log_segment_ms),
        "cleanup.policy": "delete",
        "message.timestamp.type": "CreateTime",
        "max.message.bytes": str(broker.message_max_bytes),
        "min.insync.replicas": "1",
        "delete.retention.ms": str(24 * 3600 * 1000),
    }


def effective(broker: BrokerConfig, overrides: dict[str, str]) -> dict[str, str]:
    merged = defaults(broker)
    merged.update(overrides)
    return merged


def log_config(values: dict[str, str]) -> LogConfig:
    return LogConfig(
        segment_bytes=int(values["segment.bytes"]),
        segment_ms=int(values["segment.ms"]),
        retention_ms=int(values["retention.ms"]),
        retention_bytes=int(values["retention.bytes"]),
    )
