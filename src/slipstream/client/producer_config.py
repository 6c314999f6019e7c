"""Producer settings: Kafka's names with underscores (``linger.ms`` -> ``linger_ms``),
times in ms, sizes in bytes. ``validate()`` checks them and resolves what depends on
several of them (acks spelled "all", whether idempotence is on)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..protocol.record_batch import HEADER_SIZE
from .security import ClientSecurity
from .serde import Serializer

MAX_IDEMPOTENT_IN_FLIGHT = 5
INT32_MAX = 2**31 - 1
PARTITIONERS = ("murmur2_random", "murmur2", "random", "round_robin")

PartitionerFn = Callable[[str, bytes | None, int], int]
"""``fn(topic, key, partition_count) -> partition``."""


@dataclass(slots=True)
class ProducerConfig:
    """The producer's settings, as ``AIOProducer``/``Producer`` keywords:

    - ``acks``: -1/"all" (default), 1, or 0 (no acknowledgement: offsets are -1).
    - ``linger_ms`` (5), ``batch_size`` (16384): a partition's batch is sent when it is
      full or this long after its first record.
    - ``compression``: "none", "gzip", "snappy", "lz4" or "zstd" (per batch).
    - ``enable_idempotence``: default on when acks=-1 and max_in_flight <= 5 (as in the
      Java client); True insists (ValueError if the other settings contradict it).
    - ``max_in_flight`` (5): Produce requests in flight per broker.
    - ``retries`` (2**31-1), ``retry_backoff_ms`` (100) .. ``retry_backoff_max_ms``
      (1000, exponential with jitter), bounded by ``delivery_timeout_ms`` (120000), the
      time a record may take from ``send`` to its acknowledgement or failure.
    - ``request_timeout_ms`` (30000): per request; a timeout drops the connection.
    - ``buffer_memory`` (32 MiB) with ``max_block_ms`` (60000): see ``send``.
    - ``partitioner``: "murmur2_random" (default: murmur2 of the key like the Java
      client, sticky for records without a key), "murmur2" (null keys hash like b""),
      "random", "round_robin", or ``fn(topic, key, partition_count) -> partition``.
    - ``max_request_size`` (1 MiB): bounds a Produce request and a single record.
    - ``metadata_max_age_ms`` (300000): metadata is refreshed at least this often.
    - ``topic_metadata_propagation_max_ms`` (5000): how long a topic the broker calls
      unknown may take to appear before ``send`` fails with UNKNOWN_TOPIC_OR_PARTITION.
    - ``transactional_id`` (None): makes the producer transactional (idempotent, acks=-1);
      ``transaction_timeout_ms`` (60000): how long the coordinator lets a transaction run
      before aborting it (see producer_transactions.py).
    - ``key_serializer``, ``value_serializer``: callables turning what ``send`` is given
      into bytes (see ``slipstream.client.serde``: JSON and string helpers).
    """

    bootstrap_servers: str | list[str] = "127.0.0.1:9092"
    client_id: str = "slipstream-producer"
    acks: int | str = -1
    linger_ms: float = 5
    batch_size: int = 16384
    compression: str = "none"
    enable_idempotence: bool | None = None
    max_in_flight: int = 5
    retries: int = INT32_MAX
    retry_backoff_ms: float = 100
    retry_backoff_max_ms: float = 1000
    delivery_timeout_ms: float = 120_000
    request_timeout_ms: float = 30_000
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: float = 60_000
    partitioner: str | PartitionerFn = "murmur2_random"
    max_request_size: int = 1024 * 1024
    metadata_max_age_ms: float = 300_000
    topic_metadata_propagation_max_ms: float = 5_000
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    ssl_check_hostname: bool = True
    # ---- resolved by validate()
    idempotent: bool = field(default=False, init=False)
    explicit_idempotence: bool = field(default=False, init=False)
    """enable_idempotence=True was asked for: a broker without InitProducerId is an error."""

    @property
    def acks_int(self) -> int:
        return int(self.acks)

    @property
    def max_record_size(self) -> int:
        """The largest record (with its batch header) a request and the buffer can hold."""
        return min(self.max_request_size, self.buffer_memory) - HEADER_SIZE

    def security(self) -> ClientSecurity:
        return ClientSecurity.of(self)

    def validate(self) -> ProducerConfig:
        """Check the settings (ValueError naming the first bad one); resolve acks and idempotence."""
        acks = self.acks
        if acks in ("all", "-1"):
            acks = -1
        enable = self.enable_idempotence
        if self.transactional_id is not None:
            if not self.transactional_id:
                raise ValueError("transactional_id must not be empty")
            if enable is False:
                raise ValueError("a transactional producer is idempotent: enable_idempotence cannot be False")
            enable = True
        if acks not in (-1, 0, 1, "0", "1"):
            raise ValueError(f"acks must be -1 ('all'), 0 or 1, not {acks!r}")
        self.acks = int(acks)
        if self.batch_size < 1 or self.buffer_memory < 1 or self.max_request_size < 1:
            raise ValueError("batch_size, buffer_memory and max_request_size must be positive")
        if self.max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if (
            self.linger_ms < 0
            or self.retries < 0
            or self.delivery_timeout_ms <= 0
            or self.request_timeout_ms <= 0
        ):
            raise ValueError("linger_ms and retries must be >= 0, timeouts > 0")
        if isinstance(self.partitioner, str) and self.partitioner not in PARTITIONERS:
            raise ValueError(f"partitioner must be one of {', '.join(PARTITIONERS)} or a callable")
        idempotent = enable
        if idempotent is None:
            idempotent = self.acks == -1 and self.max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT
        elif idempotent:
            if self.acks != -1:
                raise ValueError("enable_idempotence requires acks=-1 ('all')")
            if self.max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
                raise ValueError(
                    f"enable_idempotence requires max_in_flight <= {MAX_IDEMPOTENT_IN_FLIGHT}"
                )
        self.explicit_idempotence = enable is True
        self.idempotent = bool(idempotent)
        self.security()  # raises ValueError on a bad combination
        return self


def producer_config_from(bootstrap_servers: str | list[str], settings: Mapping[str, Any]) -> ProducerConfig:
    """A validated ProducerConfig from keyword settings; TypeError names unknown ones."""
    known = {f.name for f in fields(ProducerConfig) if f.init}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"unknown producer settings: {unknown}")
    return ProducerConfig(bootstrap_servers=bootstrap_servers, **settings).validate()
