"""Options of the ``slipstream`` data source, offset JSON and offset-range planning.

Pure Python (no pyspark, no sockets) so it can be unit-tested and used from the
driver, the streaming-source runner process and the executors alike.

Option names follow Spark's Kafka source, so a job can move to
``format("kafka")`` on a real cluster unchanged:

- ``kafka.bootstrap.servers`` (or ``bootstrap.servers``)
- exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern``
  (a regular expression matched against whole topic names) or ``assign``
  (JSON ``{"topic": [0, 1]}``)
- ``startingOffsets``: ``earliest`` | ``latest`` | JSON ``{"topic": {"0": 23}}``
  (-2 earliest, -1 latest) | ``group`` (the committed offsets of ``group.id``;
  partitions without one use ``startingOffsetsFallback``)
- ``startingTimestamp`` (ms, all partitions) / ``startingOffsetsByTimestamp``
  (JSON ``{"topic": {"0": ms}}``); they win over ``startingOffsets``
- ``endingOffsets`` (batch): ``latest`` | JSON; ``endingTimestamp`` /
  ``endingOffsetsByTimestamp``
- ``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss``,
  ``includeHeaders`` (default false, as Spark's Kafka source)
- ``group.id`` (or ``kafka.group.id``): the consumer group that progress is
  committed to after each completed micro-batch
- ``kafka.isolation.level``: ``read_uncommitted`` (default, as Spark's Kafka
  source) | ``read_committed``: reads stop at the last stable offset (the first
  offset of a transaction still open) and aborted transactions' records are dropped
- security, as Spark passes them to Kafka: ``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config`` (the username and password of
  a PlainLoginModule/ScramLoginModule line) or ``kafka.sasl.username`` /
  ``kafka.sasl.password``, ``kafka.ssl.truststore.location`` (PEM CA file; or
  ``kafka.ssl.cafile``), ``kafka.ssl.keystore.location`` / ``kafka.ssl.certfile``,
  ``kafka.ssl.keyfile``, ``kafka.ssl.key.password``,
  ``kafka.ssl.endpoint.identification.algorithm`` (empty: no host name check)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..client.security import PLAINTEXT, ClientSecurity

EARLIEST = -2
LATEST = -1

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]


class OptionError(ValueError):
    """A data source option is missing, unknown or malformed."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {value!r}")


def _int(value: str, name: str, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {value!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, not {n}")
    return n


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``kind`` is earliest | latest | json | group | timestamp."""

    kind: str
    offsets: OffsetMap = field(default_factory=dict)  # json: per partition, -2/-1 allowed
    timestamp: int | None = None  # timestamp: one for all partitions
    timestamps: OffsetMap = field(default_factory=dict)  # timestamp: per partition
    fallback: str = "latest"  # group: for partitions without a committed offset


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    client_id: str = "slipstream-spark"
    fetch_max_bytes: int = 8 * 1024 * 1024
    request_timeout_s: float = 30.0
    isolation_level: int = 0  # 1: read_committed
    security: ClientSecurity = PLAINTEXT

    def matches(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assign)

    @property
    def subscription(self) -> str:
        if self.subscribe:
            return "subscribe=" + ",".join(self.subscribe)
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        return "assign=" + offsets_to_json({tp: 0 for tp in self.assign})


def bootstrap_of(options: Mapping[str, str]) -> str:
    opts = _lower(options)
    bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    return bootstrap


_JAAS_VALUE = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def security_of(options: Mapping[str, str]) -> ClientSecurity:
    """TLS/SASL settings from ``kafka.``-prefixed options (Spark's Kafka source names)."""
    opts = _lower(options)
    settings: dict[str, str] = {}
    for key, value in opts.items():
        name = key[len("kafka."):] if key.startswith("kafka.") else key
        if name.startswith(("security.", "sasl.", "ssl.")):
            settings[name] = value
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas:
        for field_name, value in _JAAS_VALUE.findall(jaas):
            settings.setdefault(f"sasl.{field_name}", value.replace('\\"', '"'))
    try:
        return ClientSecurity.from_config(settings)
    except (TypeError, ValueError) as exc:
        raise OptionError(f"security options: {exc}") from None


def group_of(options: Mapping[str, str]) -> str | None:
    opts = _lower(options)
    return opts.get("group.id") or opts.get("kafka.group.id") or None


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate the reader options; ``streaming`` picks the defaults and the allowed values."""
    opts = _lower(options)
    bootstrap = bootstrap_of(opts)
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern or assign must be given"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if chosen[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option subscribe names no topic")
    elif chosen[0] == "subscribepattern":
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern {pattern!r} is not a valid pattern: {exc}") from None
    else:
        assign = tuple(sorted(_parse_assign(opts["assign"])))
        if not assign:
            raise OptionError("option assign names no partition")

    group_id = group_of(opts)
    fallback = opts.get("startingoffsetsfallback", "latest" if streaming else "earliest").strip().lower()
    if fallback not in ("earliest", "latest"):
        raise OptionError(f"option startingOffsetsFallback must be earliest or latest, not {fallback!r}")
    starting = _parse_spec(
        opts,
        "startingoffsets",
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        default="latest" if streaming else "earliest",
        fallback=fallback,
    )
    if starting.kind == "group" and not group_id:
        raise OptionError("startingOffsets=group needs the option group.id")
    if not streaming and starting.kind == "latest":
        raise OptionError("startingOffsets=latest is not allowed for a batch query")
    if not streaming and starting.kind == "json" and any(o == LATEST for o in starting.offsets.values()):
        raise OptionError("startingOffsets: -1 (latest) is not allowed for a batch query")
    ending = _parse_spec(opts, "endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp", default="latest")
    if streaming and any(k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")):
        raise OptionError("endingOffsets / endingTimestamp are for batch queries only")
    if ending.kind == "earliest" or any(o == EARLIEST for o in ending.offsets.values()):
        raise OptionError("endingOffsets=earliest (-2) is not allowed")
    if ending.kind == "group":
        raise OptionError("endingOffsets=group is not supported")

    max_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = _int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger", 1)
    min_per_trigger = None
    if "minoffsetspertrigger" in opts:
        min_per_trigger = _int(opts["minoffsetspertrigger"], "minOffsetsPerTrigger", 1)
    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = _int(opts["minpartitions"], "minPartitions", 1)
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise OptionError(
            f"option kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}"
        )
    return SourceOptions(
        bootstrap=bootstrap,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        min_partitions=min_partitions,
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        group_id=group_id,
        client_id=opts.get("kafka.client.id") or opts.get("client.id") or "slipstream-spark",
        fetch_max_bytes=_int(opts.get("fetch.max.bytes", str(8 * 1024 * 1024)), "fetch.max.bytes", 1024),
        request_timeout_s=_int(opts.get("kafka.request.timeout.ms", "30000"), "kafka.request.timeout.ms", 1) / 1000,
        isolation_level=ISOLATION_LEVELS[isolation],
        security=security_of(opts),
    )


def _parse_assign(text: str) -> set[TopicPartition]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f'option assign must be JSON like {{"topic": [0, 1]}}: {exc}') from None
    if not isinstance(data, dict):
        raise OptionError('option assign must be a JSON object like {"topic": [0, 1]}')
    out: set[TopicPartition] = set()
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
            raise OptionError(f"option assign: topic {topic!r} needs a list of partition numbers")
        out.update((str(topic), p) for p in parts)
    return out


def _parse_spec(
    opts: dict[str, str], name: str, ts_name: str, ts_json_name: str, *, default: str, fallback: str = "latest"
) -> OffsetSpec:
    if ts_json_name in opts:
        stamps = offsets_from_json(opts[ts_json_name], what=ts_json_name)
        if any(v < 0 for v in stamps.values()):
            raise OptionError(f"option {ts_json_name}: timestamps must be >= 0")
        return OffsetSpec("timestamp", timestamps=stamps)
    if ts_name in opts:
        return OffsetSpec("timestamp", timestamp=_int(opts[ts_name], ts_name, 0))
    value = opts.get(name, default).strip()
    if value.lower() in ("earliest", "latest", "group"):
        return OffsetSpec(value.lower(), fallback=fallback)
    offsets = offsets_from_json(value, what=name)
    if any(o < EARLIEST for o in offsets.values()):
        raise OptionError(f"option {name}: offsets must be >= 0, or -2 (earliest) / -1 (latest)")
    return OffsetSpec("json", offsets=offsets)


# ---------------------------------------------------------------------------- offset JSON


def offsets_from_json(text: str | Mapping[str, Any], *, what: str = "offsets") -> OffsetMap:
    """``{"topic": {"0": 23}}`` (a string or an already-parsed dict) -> {(topic, 0): 23}."""
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OptionError(
                f'{what} must be earliest, latest or JSON like {{"topic": {{"0": 23}}}}: {exc}'
            ) from None
    else:
        data = text
    if not isinstance(data, dict):
        raise OptionError(f'{what} must be a JSON object like {{"topic": {{"0": 23}}}}')
    out: OffsetMap = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"{what}: topic {topic!r} needs an object of partition -> offset")
        for partition, offset in parts.items():
            try:
                p = int(partition)
            except ValueError:
                raise OptionError(f"{what}: {topic!r} has partition {partition!r}, not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise OptionError(f"{what}: offset of {topic}-{p} must be an integer, not {offset!r}")
            out[(str(topic), p)] = offset
    return out


def offsets_to_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(topic, 0): 23} -> {"topic": {"0": 23}}, sorted (Spark compares offsets as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(offsets_to_dict(offsets), separators=(",", ":"))


# ---------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def plan_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], min_partitions: int | None
) -> list[OffsetRange]:
    """One range per partition with data, split (as Spark's KafkaOffsetRangeCalculator does)
    so that there are about ``min_partitions`` of them when there are fewer partitions."""
    ranges = [
        OffsetRange(tp[0], tp[1], start[tp], end[tp]) for tp in sorted(end) if tp in start and end[tp] > start[tp]
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    ideal = total / min_partitions
    out = []
    for r in ranges:
        parts = max(round(r.size / ideal), 1)
        remaining = r.size
        pos = r.start
        for i in range(parts):
            this = remaining // (parts - i)
            remaining -= this
            stop = min(pos + this, r.end)
            if stop > pos:
                out.append(OffsetRange(r.topic, r.partition, pos, stop))
            pos = stop
    return out


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> OffsetMap:
    """End offsets advancing at most ``limit`` records in total, shared in proportion to each
    partition's backlog (largest remainders first, so the total is exactly min(limit, backlog))."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * size / total for tp, size in backlog.items()}
    take = {tp: int(share) for tp, share in shares.items()}
    left = limit - sum(take.values())
    by_fraction = sorted(backlog, key=lambda tp: (-(shares[tp] - take[tp]), tp))
    for tp in by_fraction:
        if left <= 0:
            break
        if take[tp] < backlog[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + take[tp] for tp in latest}


def describe_offsets(offsets: Iterable[tuple[TopicPartition, int]]) -> str:
    return ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(offsets))
