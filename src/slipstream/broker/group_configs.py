"""Per-group configs (config resource type GROUP, Kafka 3.8+): overrides of the broker's
``group.consumer.*`` defaults for one consumer (KIP-848) group, persisted in the data dir.

Kafka's names and bounds: ``consumer.session.timeout.ms`` within
``group.consumer.min/max.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``
within ``group.consumer.min/max.heartbeat.interval.ms``; a group need not exist to
be configured (its config waits for it), as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..log.metadata import MetadataStore
from ..protocol.errors import ErrorCode, KafkaError
from .config import BrokerConfig

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """A per-group config a client may set (IncrementalAlterConfigs), with its description."""

    name: str
    doc: str


GROUP_CONFIG_KEYS = {
    SESSION_TIMEOUT: GroupConfigKey(
        SESSION_TIMEOUT, "The timeout to detect client failures when using the consumer group protocol."
    ),
    HEARTBEAT_INTERVAL: GroupConfigKey(
        HEARTBEAT_INTERVAL, "The heartbeat interval given to the members of a consumer group."
    ),
}


_DOCUMENT = "group_configs.json"

class GroupConfigs:
    def __init__(self, config: BrokerConfig, metadata: MetadataStore | None) -> None:
        self.config = config
        self._metadata = metadata
        self._overrides: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        text = self._metadata.load(_DOCUMENT) if self._metadata is not None else None
        if text is None:
            return
        import json  # (here, not at the top: a fresh broker has no document to read)

        saved = json.loads(text)
        self._overrides = {g: dict(c) for g, c in saved.get("groups", {}).items()}

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._overrides.get(group_id, {}))

    def overrides_setting(self, group_id: str, name: str) -> bool:
        overrides = self._overrides.get(group_id)
        return overrides is not None and name in overrides

    def defaults(self) -> dict[str, str]:
        c = self.config
        return {
            SESSION_TIMEOUT: str(c.group_consumer_session_timeout_ms),
            HEARTBEAT_INTERVAL: str(c.group_consumer_heartbeat_interval_ms),
        }

    def effective(self, group_id: str) -> dict[str, str]:
        return {**self.defaults(), **self._overrides.get(group_id, {})}

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, SESSION_TIMEOUT, self.config.group_consumer_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, HEARTBEAT_INTERVAL, self.config.group_consumer_heartbeat_interval_ms)

    def _setting(self, group_id: str, name: str, default: int) -> int:
        # Read on every ConsumerGroupHeartbeat: no merged dict of the group's settings.
        overrides = self._overrides.get(group_id)
        value = None if overrides is None else overrides.get(name)
        return default if value is None else int(value)

    def set(self, group_id: str, overrides: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace the group's overrides (validated as a whole first)."""
        for name, value in overrides.items():
            self.validate(name, value)
        effective = {**self.defaults(), **overrides}
        if int(effective[HEARTBEAT_INTERVAL]) >= int(effective[SESSION_TIMEOUT]):
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"{HEARTBEAT_INTERVAL} ({effective[HEARTBEAT_INTERVAL]}) must be lower than "
                f"{SESSION_TIMEOUT} ({effective[SESSION_TIMEOUT]})",
            )
        if validate_only:
            return
        if overrides:
            self._overrides[group_id] = dict(overrides)
        else:
            self._overrides.pop(group_id, None)
        self._save()

    def validate(self, name: str, value: str) -> None:
        c = self.config
        bounds = {
            SESSION_TIMEOUT: (
                c.group_consumer_min_session_timeout_ms,
                c.group_consumer_max_session_timeout_ms,
                "group.consumer.min.session.timeout.ms",
                "group.consumer.max.session.timeout.ms",
            ),
            HEARTBEAT_INTERVAL: (
                c.group_consumer_min_heartbeat_interval_ms,
                c.group_consumer_max_heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
        }
        if name not in bounds:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"unknown group config {name!r} (this broker knows {', '.join(sorted(GROUP_CONFIG_KEYS))})",
            )
        low, high, low_name, high_name = bounds[name]
        try:
            number = int(value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be an integer, got {value!r}") from None
        if not low <= number <= high:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"{name} must be between {low} ({low_name}) and {high} ({high_name}), got {number}",
            )

    def _save(self) -> None:
        import json  # (see load)

        if self._metadata is None:
            return
        self._metadata.save(_DOCUMENT, json.dumps({"groups": self._overrides}, indent=1, sort_keys=True))
