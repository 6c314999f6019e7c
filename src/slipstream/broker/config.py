"""Broker configuration: defaults, then a config file, then SLIPSTREAM_* env vars, then CLI flags.

Keys use Kafka's dotted names where Kafka has one (``num.partitions``,
``auto.create.topics.enable``...), so a Kafka user finds what they expect.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..coordinator.migration_policy import MigrationPolicy
from . import inter_broker
from .inter_broker import InterBrokerClient
from .listener_settings import (
    CLIENT_AUTH_MODES,
    OVERRIDABLE,
    ListenerSecurity,
    jaas_configs,
    mechanisms_of,
    resolve,
    split_key,
)
from .listeners import Listener, parse_advertised, parse_listeners

log = logging.getLogger(__name__)

DURABILITY_POLICIES = ("page-cache", "interval", "fsync")


STORAGE_KINDS = ("disk", "memory", "postgres")


@dataclass(frozen=True)
class BrokerConfig:
    """A broker's settings: defaults, then a config file, SLIPSTREAM_* variables and flags (``build``)."""

    host: str = "127.0.0.1"
    port: int = 9092
    # What clients are told to connect to; defaults to host/port (the real port when port is 0).
    advertised_host: str | None = None
    advertised_port: int | None = None
    data_dir: str = "./slipstream-data"
    # "disk", "memory" (nothing survives a restart) or "postgres" (logs and metadata in
    # the database at database_url; the data directory is then unused).
    storage: str = "disk"
    database_url: str | None = None
    node_id: int = 0
    # storage postgres runs a cluster: a broker is live while its heartbeat (every third
    # of this) is younger than this, and its partition leases last this long.
    cluster_broker_session_ms: int = 6000
    # storage postgres: a commit round that would start with the committer idle first
    # waits up to this long for a second durable write to share it (fewer, larger
    # commits for added acks=all latency, as a producer's linger.ms); 0: it starts at once.
    cluster_commit_wait_ms: int = 0
    auto_create_topics: bool = True
    default_partitions: int = 1
    socket_request_max_bytes: int = 100 * 1024 * 1024
    # Connection bounds (Kafka's names and defaults): total, per source IP, idle time.
    max_connections: int = 2147483647
    max_connections_per_ip: int = 2147483647
    connections_max_idle_ms: int = 600_000
    # KIP-368: a SASL session's lifetime; the client re-authenticates before it ends. 0: never ends.
    connections_max_reauth_ms: int = 0
    # Partitions one client id may create or delete per second (KIP-599); 0: no limit.
    controller_mutation_rate: int = 0
    message_max_bytes: int = 1024 * 1024 + 12  # Kafka's default max.message.bytes
    log_segment_bytes: int = 1 << 30
    log_segment_ms: int = 7 * 24 * 3600 * 1000
    log_retention_ms: int = 7 * 24 * 3600 * 1000
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 5 * 60 * 1000
    # How often the cleaner looks for compacted topics' partitions to clean.
    log_cleaner_backoff_ms: int = 15_000
    # page-cache: survive a process crash; interval: fsync every flush_interval_ms;
    # fsync: fsync (group commit) before acknowledging acks=-1 produces.
    durability: str = "page-cache"
    flush_interval_ms: int = 1000
    offsets_topic_partitions: int = 50
    group_initial_rebalance_delay_ms: int = 100
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_max_size: int = 2147483647
    # Consumer (KIP-848) groups; Kafka's names are group.consumer.* (same defaults).
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2147483647
    # Bounds of the per-group overrides (config resource GROUP), Kafka's defaults.
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    # Ours: settled consumer-group members' heartbeats per second, over all groups; a small
    # broker gives settled members a shorter interval (down to 500 ms) so a joining member
    # is noticed fast (see CoordinatorConfig). 0: always group.consumer.heartbeat.interval.ms.
    group_consumer_heartbeat_budget_per_sec: int = 200
    # Ours: reconciling consumer-group members' heartbeats per second, over all groups; while
    # more members change at once (a join storm), reconciled members skip the settle window
    # and the short interval stretches (see CoordinatorConfig). 0: no budget.
    group_consumer_reconciling_heartbeat_budget_per_sec: int = 1000
    # Comma-separated server-side assignors members may ask for; the first is the default.
    group_consumer_assignors: str = "uniform,range"
    # Online conversion of groups with members between the classic and the consumer
    # protocols: disabled, upgrade, downgrade or bidirectional (Kafka 4's default).
    group_consumer_migration_policy: str = "bidirectional"
    offsets_retention_minutes: int = 7 * 24 * 60
    # Ours: rebalance-history events kept per group (group.history.max.events; coordinator/history.py).
    group_history_max_events: int = 1_000
    offset_metadata_max_bytes: int = 4096
    # KIP-227 fetch sessions the broker keeps at once (0: every fetch is sessionless).
    max_incremental_fetch_session_cache_slots: int = 1000
    # The HTTP admin listener (/metrics, /healthz, /readyz, /api): off unless a port is
    # given (0 picks a free one); admin_host defaults to host.
    admin_port: int | None = None
    admin_host: str | None = None
    # Transactions (Kafka's names and defaults): the longest transaction.timeout.ms a
    # producer may ask for, how long an idle transactional id is remembered, and the
    # partitions of __transaction_state (created when the first transactional
    # producer arrives).
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_state_log_num_partitions: int = 50
    # Listeners (see listeners.py): empty means one PLAINTEXT listener on host:port.
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    # TLS of SSL/SASL_SSL listeners, PEM files (see security/tls.py).
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_cafile: str | None = None
    ssl_client_auth: str = "none"
    # SASL of SASL_PLAINTEXT/SASL_SSL listeners.
    sasl_enabled_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
    # "name:password,..." users created (for every SCRAM mechanism) when they have no credential yet.
    scram_bootstrap_users: str = ""
    # Authorization: "acl" switches on the ACL authorizer (security/authorizer.py); empty
    # (the default) allows everything. Kafka's authorizer.class.name is accepted as an
    # alias, with its StandardAuthorizer/AclAuthorizer class names meaning "acl".
    authorizer: str = ""
    # Principals allowed everything, ";"-separated as in Kafka ("User:admin;User:ops").
    super_users: str = ""
    # With the authorizer on: whether a resource no ACL names is open to everyone.
    allow_everyone_if_no_acl_found: bool = False
    # How this broker connects to its peers (inter_broker.py): the listener they are
    # reached on (default: the first), the SASL mechanism there (default: its first
    # enabled one) and the credentials, ours or in Kafka's listener.name.<l>.<mechanism>.
    # sasl.jaas.config; whether to check the peer's host name on TLS ("https": yes, "": no).
    inter_broker_listener_name: str = ""
    sasl_mechanism_inter_broker_protocol: str = ""
    inter_broker_sasl_username: str | None = None
    inter_broker_sasl_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"
    # listener.name.<LISTENER>.<setting> overrides of the TLS/SASL settings (listener_settings.py).
    listener_overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)

    def validate(self) -> BrokerConfig:
        for key in ("max_connections", "max_connections_per_ip", "connections_max_idle_ms"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key.replace('_', '.')} must be at least 1, got {getattr(self, key)}")
        if self.connections_max_reauth_ms < 0:
            raise ValueError(f"connections.max.reauth.ms must be 0 or more, got {self.connections_max_reauth_ms}")
        if self.storage not in STORAGE_KINDS:
            raise ValueError(f"storage must be one of {', '.join(STORAGE_KINDS)}, not {self.storage!r}")
        if self.storage == "postgres" and not self.database_url:
            raise ValueError("storage 'postgres' needs a database URL (database_url, --database-url)")
        if self.cluster_broker_session_ms < 300:
            raise ValueError(f"cluster.broker.session.ms must be at least 300, got {self.cluster_broker_session_ms}")
        if self.cluster_commit_wait_ms < 0:
            raise ValueError(f"cluster.commit.wait.ms must be 0 or more, got {self.cluster_commit_wait_ms}")
        if self.durability not in DURABILITY_POLICIES:
            raise ValueError(
                f"durability must be one of {', '.join(DURABILITY_POLICIES)}, not {self.durability!r}"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is out of range")
        if self.admin_port is not None and not 0 <= self.admin_port <= 65535:
            raise ValueError(f"admin port {self.admin_port} is out of range")
        if self.default_partitions < 1:
            raise ValueError("default partitions must be at least 1")
        if self.group_history_max_events < 1:
            raise ValueError("group.history.max.events must be >= 1")
        if self.transaction_state_log_num_partitions < 1:
            raise ValueError("transaction.state.log.num.partitions must be at least 1")
        if self.transaction_max_timeout_ms < 1 or self.transactional_id_expiration_ms < 1:
            raise ValueError("transaction.max.timeout.ms and transactional.id.expiration.ms must be positive")
        if self.group_consumer_heartbeat_budget_per_sec < 0:
            raise ValueError("group.consumer.heartbeat.budget.per.sec must be >= 0 (0: no budget)")
        if self.group_consumer_reconciling_heartbeat_budget_per_sec < 0:
            raise ValueError("group.consumer.reconciling.heartbeat.budget.per.sec must be >= 0 (0: no budget)")
        if not (
            self.group_consumer_min_session_timeout_ms
            <= self.group_consumer_session_timeout_ms
            <= self.group_consumer_max_session_timeout_ms
        ):
            raise ValueError(
                f"group.consumer.session.timeout.ms ({self.group_consumer_session_timeout_ms}) must be within "
                f"group.consumer.min/max.session.timeout.ms ({self.group_consumer_min_session_timeout_ms}-"
                f"{self.group_consumer_max_session_timeout_ms})"
            )
        if not (
            self.group_consumer_min_heartbeat_interval_ms
            <= self.group_consumer_heartbeat_interval_ms
            <= self.group_consumer_max_heartbeat_interval_ms
        ):
            raise ValueError(
                f"group.consumer.heartbeat.interval.ms ({self.group_consumer_heartbeat_interval_ms}) must be within "
                f"group.consumer.min/max.heartbeat.interval.ms ({self.group_consumer_min_heartbeat_interval_ms}-"
                f"{self.group_consumer_max_heartbeat_interval_ms})"
            )
        listeners = parse_listeners(self.listeners, self.listener_security_protocol_map, self.host, self.port)
        parse_advertised(self.advertised_listeners, listeners)
        if self.ssl_client_auth not in CLIENT_AUTH_MODES:
            raise ValueError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH_MODES)}, not {self.ssl_client_auth!r}")
        names = {lst.name for lst in listeners}
        for name in self.listener_overrides:
            if name not in names:
                raise ValueError(f"listener.name.{name.lower()}.*: {name!r} is not a listener ({', '.join(sorted(names))})")
        for lst in listeners:
            own = self.listener_security(lst)
            where = f"listener {lst.name}"
            if own.client_auth not in CLIENT_AUTH_MODES:
                raise ValueError(
                    f"ssl.client.auth of {where} must be one of {', '.join(CLIENT_AUTH_MODES)}, not {own.client_auth!r}"
                )
            if lst.uses_tls and not own.certfile:
                raise ValueError(
                    f"{where} ({lst.security_protocol}) needs ssl.certfile (or listener.name."
                    f"{lst.name.lower()}.ssl.certfile), and ssl.keyfile unless the key is in it"
                )
            bad = [m for m in own.mechanisms if m not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")]
            if bad:
                raise ValueError(
                    f"sasl.enabled.mechanisms of {where}: unsupported {', '.join(bad)} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
                )
            if lst.uses_sasl and not own.mechanisms:
                raise ValueError(f"{where} uses SASL and needs at least one mechanism in sasl.enabled.mechanisms")
        for name, overrides in self.listener_overrides.items():
            for mechanism in jaas_configs(overrides):
                if mechanism not in inter_broker.SASL_MECHANISMS:
                    raise ValueError(
                        f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config: unsupported mechanism "
                        f"{mechanism} ({', '.join(inter_broker.SASL_MECHANISMS)})"
                    )
        mechanism = self.sasl_mechanism_inter_broker_protocol.strip().upper()
        if mechanism and mechanism not in inter_broker.SASL_MECHANISMS:
            raise ValueError(
                f"sasl.mechanism.inter.broker.protocol must be one of {', '.join(inter_broker.SASL_MECHANISMS)}, "
                f"not {self.sasl_mechanism_inter_broker_protocol!r}"
            )
        inter_broker.inter_broker_listener(listeners, self.inter_broker_listener_name)
        if self.ssl_endpoint_identification_algorithm.strip().lower() not in ("https", ""):
            raise ValueError(
                "ssl.endpoint.identification.algorithm must be https (check peers' host names) or empty, "
                f"not {self.ssl_endpoint_identification_algorithm!r}"
            )
        if self.storage == "postgres":
            # Only a cluster's brokers connect to each other; check now, not at the first marker.
            self.inter_broker_client()
        if self.authorizer.strip().lower() not in ("", "none") and not self.uses_acl_authorizer:
            raise ValueError(f"authorizer must be empty (none) or 'acl', not {self.authorizer!r}")
        unknown = [a for a in self.consumer_group_assignors() if a not in ("uniform", "range")]
        if unknown or not self.consumer_group_assignors():
            raise ValueError(
                f"group.consumer.assignors must list assignors among uniform, range; got {self.group_consumer_assignors!r}"
            )
        MigrationPolicy.parse(self.group_consumer_migration_policy)
        return self

    @property
    def uses_acl_authorizer(self) -> bool:
        name = self.authorizer.strip()
        return name == "acl" or name.rsplit(".", 1)[-1] in _KAFKA_AUTHORIZER_CLASSES

    def sasl_mechanisms(self) -> tuple[str, ...]:
        return mechanisms_of(self.sasl_enabled_mechanisms)

    def listener_security(self, listener: Listener) -> ListenerSecurity:
        """The TLS/SASL settings ``listener`` runs with (its listener.name.* overrides applied)."""
        broker_wide = {name: getattr(self, name) for name in set(OVERRIDABLE.values())}
        return resolve(broker_wide, self.listener_overrides.get(listener.name, {}), listener)

    def inter_broker_client(self) -> InterBrokerClient:
        """How this broker connects to its peers (ValueError when the settings cannot work)."""
        listeners = parse_listeners(self.listeners, self.listener_security_protocol_map, self.host, self.port)
        listener = inter_broker.inter_broker_listener(listeners, self.inter_broker_listener_name)
        return inter_broker.resolve(
            listeners,
            listener_name=self.inter_broker_listener_name,
            security_of=self.listener_security,
            mechanism=self.sasl_mechanism_inter_broker_protocol,
            username=self.inter_broker_sasl_username,
            password=self.inter_broker_sasl_password,
            jaas_by_mechanism=jaas_configs(self.listener_overrides.get(listener.name, {})),
            endpoint_identification=self.ssl_endpoint_identification_algorithm,
        )

    @property
    def syncs_before_ack(self) -> bool:
        """Whether acks=all (and group/transaction writes) wait for the durability
        barrier: with fsync, and always with postgres, where an unflushed append is
        only in this process's memory."""
        return self.durability == "fsync" or self.storage == "postgres"

    @property
    def commit_round_wait_s(self) -> float:
        """How long an idle group committer's round waits for company: only over
        PostgreSQL, where a round is a transaction (on disk an fsync, which waits for none)."""
        return self.cluster_commit_wait_ms / 1000 if self.storage == "postgres" else 0.0

    def consumer_group_assignors(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.group_consumer_assignors.split(",") if a.strip())


# authorizer.class.name values that mean the ACL authorizer (Kafka's KRaft and ZooKeeper ones).
_KAFKA_AUTHORIZER_CLASSES = ("StandardAuthorizer", "AclAuthorizer")

# Kafka-style names accepted in files, env vars and --set, mapped to our fields.
ALIASES = {
    "listeners.host": "host",
    "advertised.host.name": "advertised_host",
    "advertised.port": "advertised_port",
    "log.dirs": "data_dir",
    "log.dir": "data_dir",
    "node.id": "node_id",
    "broker.id": "node_id",
    "auto.create.topics.enable": "auto_create_topics",
    "num.partitions": "default_partitions",
    "socket.request.max.bytes": "socket_request_max_bytes",
    "message.max.bytes": "message_max_bytes",
    "log.segment.bytes": "log_segment_bytes",
    "log.roll.ms": "log_segment_ms",
    "log.retention.ms": "log_retention_ms",
    "log.retention.bytes": "log_retention_bytes",
    "log.retention.check.interval.ms": "log_retention_check_interval_ms",
    "log.cleaner.backoff.ms": "log_cleaner_backoff_ms",
    "offsets.topic.num.partitions": "offsets_topic_partitions",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.max.size": "group_max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    # Kafka's PEM-file forms of its keystore/truststore settings.
    "ssl.keystore.location": "ssl_certfile",
    "ssl.truststore.location": "ssl_cafile",
    "authorizer.class.name": "authorizer",
}

_FIELDS = {f.name: f for f in fields(BrokerConfig)}


def _field_name(key: str) -> str:
    key = key.strip()
    if key in ALIASES:
        return ALIASES[key]
    name = key.replace(".", "_").replace("-", "_").lower()
    if name not in _FIELDS or name in ("extra", "listener_overrides"):
        raise ValueError(f"unknown config key {key!r}")
    return name


def _coerce(name: str, raw: Any) -> Any:
    kind = _FIELDS[name].type
    if isinstance(raw, str):
        text = raw.strip()
        if "bool" in str(kind):
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{name}: expected true or false, got {raw!r}")
        if "int" in str(kind):
            if text.lower() in ("", "none") and "None" in str(kind):
                return None
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{name}: expected an integer, got {raw!r}") from None
        return text
    return raw


def apply(config: BrokerConfig, settings: dict[str, Any]) -> BrokerConfig:
    changes: dict[str, Any] = {}
    overrides = {name: dict(values) for name, values in config.listener_overrides.items()}
    for key, raw in settings.items():
        per_listener = split_key(key.strip())
        if per_listener is not None:
            listener, name = per_listener
            overrides.setdefault(listener, {})[name] = str(raw).strip()
            continue
        name = _field_name(key)
        changes[name] = _coerce(name, raw)
    if overrides != config.listener_overrides:
        changes["listener_overrides"] = overrides
    return replace(config, **changes)


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file (flat keys) or a Java-style .properties file."""
    with open(path) as f:
        text = f.read()
    if os.fspath(path).endswith(".toml"):
        import tomllib  # here: most starts read no TOML, and each module loaded costs start time

        return dict(tomllib.loads(text))
    settings: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise ValueError(f"{path}:{number}: expected key=value, got {line!r}")
        key, value = line.split("=", 1)
        settings[key.strip()] = value.strip()
    return settings


def _is_setting(key: str) -> bool:
    try:
        _field_name(key)
    except ValueError:
        return False
    return True


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings from SLIPSTREAM_X variables (X names the setting, e.g. SLIPSTREAM_PORT).

    SLIPSTREAM_CONFIG names the config file itself. Other SLIPSTREAM_ variables that
    name no setting (a wrapper's SLIPSTREAM_HOME, a test harness's variables) are not
    ours to refuse: they are ignored, with one warning naming them.
    """
    env = os.environ if environ is None else environ
    found = {
        k[len("SLIPSTREAM_") :].lower(): v
        for k, v in env.items()
        if k.startswith("SLIPSTREAM_") and k != "SLIPSTREAM_CONFIG"
    }
    ignored = sorted(f"SLIPSTREAM_{k.upper()}" for k in found if not _is_setting(k))
    if ignored:
        log.warning("ignoring environment variables that name no broker setting: %s", ", ".join(ignored))
    return {k: v for k, v in found.items() if _is_setting(k)}


def build(
    file: str | None = None, env: Mapping[str, str] | None = None, flags: dict[str, Any] | None = None
) -> BrokerConfig:
    config = BrokerConfig()
    if file:
        config = apply(config, load_file(file))
    config = apply(config, from_env(env))
    if flags:
        config = apply(config, {k: v for k, v in flags.items() if v is not None})
    return config.validate()
