"""Per-topic configs: every key Kafka defines, its type, range and default, and validation."""

from __future__ import annotations

from dataclasses import dataclass

from ..log.api import LogConfig
from .config import BrokerConfig

LONG_MAX = str((1 << 63) - 1)
_NOT_ACTED_ON = " Accepted and reported; a single-node broker does not act on it."


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """A topic config Kafka defines: its type, description, allowed values, default and bounds."""

    name: str
    kind: str  # "long", "int", "double", "boolean", "string", "list"
    doc: str
    choices: tuple[str, ...] = ()
    default: str = ""
    low: float | None = None  # inclusive bounds, as Kafka's ConfigDef ranges
    high: float | None = None


def _key(name: str, kind: str, default: str, doc: str, *, low: float | None = None,
         high: float | None = None, choices: tuple[str, ...] = (), acted_on: bool = True) -> ConfigKey:
    return ConfigKey(name, kind, doc if acted_on else doc + _NOT_ACTED_ON, choices, default, low, high)


# Every topic config Kafka 3.9/4.x defines, with its type, range and default (defaults
# that follow a broker setting are filled in by ``defaults``). Unknown names are refused.
TOPIC_CONFIG_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _key("cleanup.policy", "list", "delete", "delete, compact, or both.", choices=("delete", "compact")),
        _key("compression.type", "string", "producer",
             "Codec of stored batches: producer keeps what the producer sent (zero-copy); any other "
             "codec recompresses batches that differ (at the codec's default level).",
             choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        _key("compression.gzip.level", "int", "-1", "gzip level for compression.type=gzip.", low=-1, high=9,
             acted_on=False),
        _key("compression.lz4.level", "int", "9", "lz4 level for compression.type=lz4.", low=1, high=17,
             acted_on=False),
        _key("compression.zstd.level", "int", "3", "zstd level for compression.type=zstd.", low=-131072, high=22,
             acted_on=False),
        _key("delete.retention.ms", "long", str(24 * 3600 * 1000), "How long tombstones survive compaction.",
             low=0),
        _key("file.delete.delay.ms", "long", "60000", "Delay before a deleted segment's files are removed.",
             low=0, acted_on=False),
        _key("flush.messages", "long", LONG_MAX, "Messages between forced fsyncs.", low=1, acted_on=False),
        _key("flush.ms", "long", LONG_MAX, "Time between forced fsyncs.", low=0, acted_on=False),
        _key("follower.replication.throttled.replicas", "list", "", "Replicas throttled on followers.",
             acted_on=False),
        _key("index.interval.bytes", "int", "4096", "Bytes between offset index entries.", low=0, acted_on=False),
        _key("leader.replication.throttled.replicas", "list", "", "Replicas throttled on the leader.",
             acted_on=False),
        _key("local.retention.bytes", "long", "-2", "Local retention with tiered storage (-2: retention.bytes).",
             low=-2, acted_on=False),
        _key("local.retention.ms", "long", "-2", "Local retention with tiered storage (-2: retention.ms).",
             low=-2, acted_on=False),
        _key("max.compaction.lag.ms", "long", LONG_MAX, "Longest a record may stay uncompacted.", low=1),
        _key("max.message.bytes", "int", "1048588", "Largest record batch the topic accepts.", low=0),
        _key("message.timestamp.after.max.ms", "long", LONG_MAX,
             "How far in the future a CreateTime timestamp may be (else INVALID_TIMESTAMP).", low=0),
        _key("message.timestamp.before.max.ms", "long", LONG_MAX,
             "How far in the past a CreateTime timestamp may be (else INVALID_TIMESTAMP).", low=0),
        _key("message.timestamp.type", "string", "CreateTime",
             "CreateTime keeps the producer's timestamps; LogAppendTime stamps the broker's.",
             choices=("CreateTime", "LogAppendTime")),
        _key("min.cleanable.dirty.ratio", "double", "0.5", "Dirty share of a log before it is cleaned.",
             low=0, high=1),
        _key("min.compaction.lag.ms", "long", "0", "Shortest time a record stays uncompacted.", low=0),
        _key("min.insync.replicas", "int", "1",
             "Replicas that must acknowledge acks=all; with one replica, above 1 refuses acks=all "
             "(NOT_ENOUGH_REPLICAS).", low=1),
        _key("preallocate", "boolean", "false", "Preallocate segment files.", acted_on=False),
        _key("remote.log.copy.disable", "boolean", "false", "Stop copying to tiered storage.", acted_on=False),
        _key("remote.log.delete.on.disable", "boolean", "false", "Delete tiered data when disabling it.",
             acted_on=False),
        _key("remote.storage.enable", "boolean", "false", "Tiered storage.", acted_on=False),
        _key("retention.bytes", "long", "-1", "Maximum partition size before old segments are deleted (-1: no limit).",
             low=-1),
        _key("retention.ms", "long", "604800000", "How long to keep log segments (-1: forever).", low=-1),
        _key("segment.bytes", "int", "1073741824", "Segment file size at which the log rolls.", low=1),
        _key("segment.index.bytes", "int", "10485760", "Maximum offset index size of a segment.", low=4,
             acted_on=False),
        _key("segment.jitter.ms", "long", "0", "Random jitter subtracted from segment.ms.", low=0,
             acted_on=False),
        _key("segment.ms", "long", "604800000", "Age at which the active segment rolls.", low=1),
        _key("unclean.leader.election.enable", "boolean", "false", "Let an out-of-sync replica lead.",
             acted_on=False),
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
    if key.kind in ("long", "int", "double"):
        number: float
        try:
            number = float(value) if key.kind == "double" else int(value)
        except ValueError:
            what = "a number" if key.kind == "double" else "an integer"
            raise InvalidConfig(f"{name} must be {what}, got {value!r}") from None
        if key.kind == "int" and not -(1 << 31) <= number < (1 << 31):
            raise InvalidConfig(f"{name} must fit in a 32-bit integer, got {value}")
        if key.low is not None and number < key.low:
            raise InvalidConfig(f"{name} must be >= {key.low:g}, got {value}")
        if key.high is not None and number > key.high:
            raise InvalidConfig(f"{name} must be <= {key.high:g}, got {value}")
    elif key.kind == "boolean":
        if value.strip().lower() not in ("true", "false"):
            raise InvalidConfig(f"{name} must be true or false, got {value!r}")
    elif key.kind == "list":
        items = [x.strip() for x in value.split(",") if x.strip()]
        if key.choices:
            bad = [x for x in items if x not in key.choices]
            if bad or not items:
                raise InvalidConfig(f"{name} must be a list of {', '.join(key.choices)}, got {value!r}")
    elif key.choices and value not in key.choices:
        raise InvalidConfig(f"{name} must be one of {', '.join(key.choices)}, got {value!r}")


def defaults(broker: BrokerConfig) -> dict[str, str]:
    """Every topic config's value when the topic does not override it."""
    values = {name: key.default for name, key in TOPIC_CONFIG_KEYS.items()}
    values.update(
        {
            "retention.ms": str(broker.log_retention_ms),
            "retention.bytes": str(broker.log_retention_bytes),
            "segment.bytes": str(broker.log_segment_bytes),
            "segment.ms": str(broker.log_segment_ms),
            "max.message.bytes": str(broker.message_max_bytes),
        }
    )
    return values


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
