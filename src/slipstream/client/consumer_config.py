"""Configuration shared by the consumers (runtime, membership, offsets, fetcher) and their facades.

Names and defaults follow the Java consumer (``session.timeout.ms`` ->
``session_timeout_ms``) so settings carry over; ``max_processing_time_ms`` and
``partition_buffer_bytes`` are the two knobs of our own (sarama's
``Consumer.MaxProcessingTime`` and the per-partition read-ahead limit). The memory
bound these settings give the fetcher: docs/architecture/fetcher.md, "Memory bound".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from .assignors import DEFAULT_ASSIGNORS, Assignor, get_assignor
from .retry import Backoff
from .security import ClientSecurity

OffsetResetPolicy = Literal["earliest", "latest", "none"]
IsolationLevel = Literal["read_uncommitted", "read_committed"]
GroupProtocol = Literal["classic", "consumer"]

# The classic-protocol defaults: with group_protocol="consumer" these settings belong to
# the broker (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms) or to
# its assignors, so a value other than the default was set on purpose and cannot be honoured.
_DEFAULT_SESSION_TIMEOUT_MS = 45000
_DEFAULT_HEARTBEAT_INTERVAL_MS = 3000


@dataclass(slots=True)
class ConsumerConfig:
    bootstrap_servers: str | list[str] = "127.0.0.1:9092"
    client_id: str = "slipstream"
    group_id: str | None = None

    # ---- group membership
    group_protocol: GroupProtocol = "classic"
    """"classic" (JoinGroup/SyncGroup, client-side assignors) or "consumer" (KIP-848:
    ConsumerGroupHeartbeat, the broker assigns; needs Kafka 4.0+ or Slipstream)."""
    group_remote_assignor: str | None = None
    """group_protocol="consumer" only: the broker-side assignor to ask for ("uniform",
    "range"); None lets the broker choose its default."""
    group_instance_id: str | None = None
    """Static membership (KIP-345): a restart within the session timeout keeps the assignment."""
    # ---- classic protocol only (the broker owns them with group_protocol="consumer")
    session_timeout_ms: int = _DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = _DEFAULT_HEARTBEAT_INTERVAL_MS
    max_poll_interval_ms: int = 300000
    rebalance_timeout_ms: int | None = None
    """How long the coordinator waits for members to rejoin; defaults to ``max_poll_interval_ms``."""
    partition_assignment_strategy: Sequence[str | Assignor] = field(
        default_factory=lambda: list(DEFAULT_ASSIGNORS)
    )
    """Assignors in preference order (protocol names or instances). Default: range, cooperative-sticky."""
    client_rack: str | None = None
    metadata_max_age_ms: int = 300000
    """How often the group leader re-reads the subscribed topics' partition counts (a change rejoins)."""

    # ---- requests and retries
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000

    # ---- offsets
    auto_offset_reset: OffsetResetPolicy = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000

    # ---- fetching
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 1048576
    partition_buffer_bytes: int | None = None
    """Stop fetching a partition once this much of it is buffered; default ``max_partition_fetch_bytes``."""
    max_processing_time_ms: int = 100
    """A partition whose buffered data has not been drained for this long is not fetched until it is."""
    isolation_level: IsolationLevel = "read_uncommitted"
    check_crcs: bool = True
    max_poll_records: int = 500
    # ---- security (see client/security.py; Kafka's names)
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    def security(self) -> ClientSecurity:
        return ClientSecurity.of(self)

    def retry_backoff(self) -> Backoff:
        """``retry_backoff_ms`` doubling up to ``retry_backoff_max_ms``, with 20% jitter."""
        return Backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)

    # ---- what the application sees
    key_deserializer: Callable[[bytes | None], Any] | None = None
    value_deserializer: Callable[[bytes | None], Any] | None = None
    """Applied to each message handed out (see ``slipstream.client.serde``)."""
    statistics_callback: Callable[[Any], None] | None = None
    """Called with a ConsumerStatistics every ``statistics_interval_ms``, from poll
    (ConsumerGroup: from a claim's ``messages()`` as records arrive)."""
    statistics_interval_ms: int = 5000

    def validate(self) -> ConsumerConfig:
        self.security()  # raises ValueError on a bad combination
        """Check the settings; raises ValueError naming the first bad one. Returns self."""
        self._validate_group_protocol()

        def positive(name: str) -> None:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

        for name in (
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "max_poll_interval_ms",
            "request_timeout_ms",
            "metadata_max_age_ms",
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "max_poll_records",
            "auto_commit_interval_ms",
        ):
            positive(name)
        for name in (
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "fetch_min_bytes",
            "fetch_max_wait_ms",
            "max_processing_time_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if self.rebalance_timeout_ms is not None and self.rebalance_timeout_ms <= 0:
            raise ValueError(
                f"rebalance_timeout_ms must be positive, got {self.rebalance_timeout_ms}"
            )
        if self.partition_buffer_bytes is not None and self.partition_buffer_bytes < 0:
            raise ValueError(
                f"partition_buffer_bytes must not be negative, got {self.partition_buffer_bytes}"
            )
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {self.auto_offset_reset!r}"
            )
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                "isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"got {self.isolation_level!r}"
            )
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ValueError("group_instance_id must be a non-empty string or None")
        if self.group_id is not None and not self.group_id:
            raise ValueError("group_id must be a non-empty string or None")
        if not self.partition_assignment_strategy:
            raise ValueError("partition_assignment_strategy needs at least one assignor")
        self.assignors()  # unknown names fail here
        return self

    def _validate_group_protocol(self) -> None:
        """Refuse settings the chosen group protocol cannot honour (the Java client does too)."""
        if self.group_protocol not in ("classic", "consumer"):
            raise ValueError(
                f"group_protocol must be 'classic' or 'consumer', got {self.group_protocol!r}"
            )
        if self.group_protocol == "classic":
            if self.group_remote_assignor is not None:
                raise ValueError(
                    "group_remote_assignor is only supported with group_protocol='consumer'"
                )
            return
        # Settings left at their defaults are fine: only a deliberate value is refused.
        owned_by_broker = {
            "session_timeout_ms": (self.session_timeout_ms, _DEFAULT_SESSION_TIMEOUT_MS),
            "heartbeat_interval_ms": (self.heartbeat_interval_ms, _DEFAULT_HEARTBEAT_INTERVAL_MS),
        }
        for name, (value, default) in owned_by_broker.items():
            if value != default:
                raise ValueError(
                    f"{name} is not supported with group_protocol='consumer': the broker sets it "
                    f"(group.consumer.{name[:-3].replace('_', '.')}.ms); remove the setting"
                )
        if [a if isinstance(a, str) else a.name for a in self.partition_assignment_strategy] != list(
            DEFAULT_ASSIGNORS
        ):
            raise ValueError(
                "partition_assignment_strategy is not supported with group_protocol='consumer': "
                "the broker assigns partitions; choose its assignor with group_remote_assignor"
            )
        if self.group_remote_assignor is not None and not self.group_remote_assignor.strip():
            raise ValueError("group_remote_assignor must be a non-empty assignor name or None")

    def assignors(self) -> list[Assignor]:
        """The configured assignors as instances, in preference order."""
        out: list[Assignor] = []
        for a in self.partition_assignment_strategy:
            out.append(get_assignor(a) if isinstance(a, str) else a)
        names = [a.name for a in out]
        if len(set(names)) != len(names):
            raise ValueError(f"partition_assignment_strategy names an assignor twice: {names}")
        return out

    @property
    def effective_rebalance_timeout_ms(self) -> int:
        return (
            self.max_poll_interval_ms
            if self.rebalance_timeout_ms is None
            else self.rebalance_timeout_ms
        )

    @property
    def effective_partition_buffer_bytes(self) -> int:
        if self.partition_buffer_bytes is None:
            return self.max_partition_fetch_bytes
        return self.partition_buffer_bytes

    @property
    def isolation_level_code(self) -> int:
        return 1 if self.isolation_level == "read_committed" else 0


def consumer_config_from(
    bootstrap_servers: str | list[str],
    group_id: str | None,
    settings: Mapping[str, Any],
    base: ConsumerConfig | None = None,
) -> ConsumerConfig:
    """A validated ConsumerConfig: keyword ``settings`` over ``base`` (or the defaults);
    TypeError names unknown settings."""
    known = {f.name for f in fields(ConsumerConfig)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"unknown consumer setting(s): {', '.join(unknown)}")
    return replace(
        base or ConsumerConfig(), bootstrap_servers=bootstrap_servers, group_id=group_id, **settings
    ).validate()
