"""Everything a request handler may touch, in one place: topics, producers, clock, config."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..log.api import AppendInfo, LogFenced, PartitionLog
from ..log.metadata import MetadataStore
from ..protocol.apis.api_versions import ApiVersionsResponseApiVersion
from ..protocol.compression import CorruptCompressedData, UnsupportedCompression
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.record_batch import (
    BatchHeader,
    InvalidBatch,
    parse_header,
    recompress,
    split_batches,
    validate_batch,
)
from . import topic_config
from .append_policy import AppendPolicies
from .batch_checks import CheckedRecords, check_batch_records
from .config import BrokerConfig
from .durability import GroupCommitter
from .fetch_sessions import FetchSessionCache
from .group_configs import GroupConfigs
from .internal_topics import refuse_client_append
from .metrics import BrokerMetrics
from .mutation_quota import MutationQuotas
from .notifier import AppendNotifier
from .producer_state import PartitionProducerState, ProducerIdAllocator
from .security.acl_store import AclStore
from .security.authorizer import Authorizer
from .security.credentials import CredentialStore
from .topics import TopicManager

if TYPE_CHECKING:
    from ..coordinator.result import RequestContext as CoordinatorContext
    from .cluster.view import ClusterView


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class BrokerState:
    """The broker's shared state: config, topics, producers, sessions, quotas, metrics, clock."""

    config: BrokerConfig
    topics: TopicManager
    cluster_id: str
    producer_ids: ProducerIdAllocator
    group_configs: GroupConfigs
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    # Listener name -> the (host, port) clients connecting through it are told about.
    advertised: dict[str, tuple[str, int]] = field(default_factory=dict)
    credentials: CredentialStore = field(default_factory=lambda: CredentialStore(None))
    # None: no authorizer configured, every request is allowed (request_context.py asks it).
    authorizer: Authorizer | None = None
    acl_store: AclStore = field(default_factory=lambda: AclStore(None))
    clock: Callable[[], int] = wall_clock_ms
    notifier: AppendNotifier = field(default_factory=AppendNotifier)
    committer: GroupCommitter = field(default_factory=GroupCommitter)
    producer_states: dict[tuple[str, int], PartitionProducerState] = field(default_factory=dict)
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    # The same few (api version, client id, peer) triples arrive over and over: the
    # coordinator's view of a request is made once per triple (bounded, see RequestContext).
    coordinator_contexts: dict[tuple[int, str | None, str, int], CoordinatorContext] = field(default_factory=dict)
    # The ApiVersions answer: every served API and its version range (set by the dispatcher).
    api_versions: list[ApiVersionsResponseApiVersion] = field(default_factory=list)
    # KIP-599 buckets for controller.mutation.rate (mutation_quota.py).
    mutation_quotas: MutationQuotas = field(default_factory=MutationQuotas)
    # Request, byte and record counts (read by the admin listener's /metrics).
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    # Each topic's produce-time configs, parsed once per change (append_policy.py).
    append_policies: AppendPolicies = field(default_factory=AppendPolicies)
    # A cluster over PostgreSQL: live brokers and the partitions this broker leads.
    cluster: ClusterView | None = None

    def __post_init__(self) -> None:
        self.committer.round_wait_s = self.config.commit_round_wait_s

    def not_leader(self, topic: str, partition: int) -> bool:
        """In a cluster, whether another broker (or none, for now) leads the partition."""
        return self.cluster is not None and not self.cluster.leads(topic, partition)

    def high_watermark(self, plog: PartitionLog) -> int:
        """The end consumers may read to: in a cluster, what the database holds."""
        if self.cluster is None:
            return plog.log_end_offset
        return min(plog.log_end_offset, getattr(plog, "committed_end", plog.log_end_offset))

    def producer_state(self, topic: str, partition: int) -> PartitionProducerState:
        key = (topic, partition)
        state = self.producer_states.get(key)
        if state is None:
            state = self.producer_states[key] = PartitionProducerState()
            plog = self.topics.partition(topic, partition)
            if plog is not None and plog.log_end_offset > plog.log_start_offset:
                state.rebuild(plog.batch_headers())
        return state

    def last_stable_offset(self, topic: str, partition: int, plog: PartitionLog) -> int:
        """First offset of the earliest open transaction, else the high watermark; never
        below the log start (DeleteRecords or retention may pass an open transaction's
        start, as in Kafka)."""
        hwm = self.high_watermark(plog)
        lso = self.producer_state(topic, partition).last_stable_offset(hwm)
        return max(min(lso, hwm), plog.log_start_offset)

    async def append(
        self, topic: str, partition: int, records: memoryview, *, acks: int, transactional: bool = False
    ) -> AppendInfo:
        """Validate and append a produce payload for one partition; the one write path.

        ``transactional``: the produce request carried a transactional id, which Kafka
        requires for transactional batches (the producer state then tracks the open
        transaction; see producer_state.py).

        Raises KafkaError with the code the produce response should carry.
        """
        return await self.start_append(topic, partition, records, acks=acks, transactional=transactional)

    def start_append(
        self, topic: str, partition: int, records: memoryview, *, acks: int, transactional: bool = False
    ) -> Coroutine[Any, Any, AppendInfo]:
        """``append`` in two steps: validates and appends now, before the caller's next
        await (so appends keep the order they were asked in), and returns what waits for
        the durability barrier when acks=all needs one. Raises KafkaError at once."""
        found = self.topics.topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} partition {partition} does not exist",
            )
        if self.not_leader(topic, partition):
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {topic}-{partition}"
            )
        plog = found.partitions[partition]
        refuse_client_append(topic)
        policy = self.append_policies.for_topic(self.topics, found)
        max_batch = policy.max_batch_bytes
        compacted = policy.compacted
        if acks == -1 and policy.min_insync_replicas is not None:
            # One replica is all there is: acks=all cannot meet a higher minimum (as Kafka).
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"topic {topic!r} has min.insync.replicas={policy.min_insync_replicas} but this "
                "broker keeps one replica; acks=all cannot be satisfied",
            )
        timestamp_window = _timestamp_window(policy.timestamp_bounds, self.clock)
        # compression.type "producer" (the default) stores batches as sent: zero-copy.
        topic_codec = policy.topic_codec
        batches = []
        headers = []
        try:
            for batch in split_batches(records):
                if len(batch) > max_batch:
                    raise KafkaError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"record batch of {len(batch)} bytes exceeds max.message.bytes={max_batch}",
                    )
                header = validate_batch(batch)
                if timestamp_window is not None and not header.is_log_append_time:
                    _check_timestamps(header.base_timestamp, header.max_timestamp, timestamp_window, topic)
                if header.is_control:
                    raise KafkaError(
                        ErrorCode.INVALID_RECORD,
                        f"clients may not write control records (topic {topic!r} partition {partition})",
                    )
                if header.is_transactional and not transactional:
                    raise KafkaError(
                        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        "a transactional record batch needs a produce request with a transactional id",
                    )
                if header.is_transactional and header.producer_id < 0:
                    raise KafkaError(
                        ErrorCode.INVALID_RECORD, "a transactional record batch needs a producer id"
                    )
                checked = check_batch_records(batch, header, max_batch)
                if compacted:
                    _require_keys(checked, header, topic)
                if topic_codec is not None and header.compression != topic_codec:
                    batch = _recompressed(batch, header, topic_codec, topic, checked.raw)
                    header = parse_header(batch)
                batches.append(batch)
                headers.append(header)
        except InvalidBatch as exc:
            code = ErrorCode.CORRUPT_MESSAGE if exc.corrupt else ErrorCode.INVALID_RECORD
            raise KafkaError(code, str(exc)) from None
        if not batches:
            raise KafkaError(ErrorCode.INVALID_RECORD, "produce request carried no record batch")

        producers = self.producer_state(topic, partition)
        if len(batches) == 1:
            duplicate = producers.check(headers[0])
            if duplicate is not None:
                # The original may still be waiting for (or have failed) its barrier: a
                # retry is answered only once the batch is durable.
                original = AppendInfo(duplicate.base_offset, duplicate.last_offset, -1, plog.log_start_offset)
                return self._durable(plog, original, acks == -1 and self.config.syncs_before_ack)
        else:
            for header in headers:
                if producers.check(header) is not None:
                    raise KafkaError(
                        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        "a request mixing new and already-written batches cannot be deduplicated",
                    )

        log_append_time = policy.log_append_time
        # The request buffer is writable (we read frames into bytearrays): stamp in place.
        info = plog.append(batches, now_ms=self.clock(), log_append_time=log_append_time)  # type: ignore[arg-type]
        offset = info.base_offset
        for header in headers:
            producers.record(header, offset)
            offset += header.last_offset_delta + 1
        if acks == -1 and self.config.syncs_before_ack:
            return self._appended_durable(plog, topic, partition, info, sum(len(b) for b in batches))
        self._appended(topic, partition, info, sum(len(b) for b in batches))
        return self._durable(plog, info, False)

    async def _appended_durable(
        self, plog: PartitionLog, topic: str, partition: int, info: AppendInfo, size: int
    ) -> AppendInfo:
        await self._sync(plog)
        self._appended(topic, partition, info, size)
        return info

    def _appended(self, topic: str, partition: int, info: AppendInfo, size: int) -> None:
        self.notifier.notify((topic, partition))
        self.metrics.produced(topic, info.last_offset - info.base_offset + 1, size)

    async def _durable(self, plog: PartitionLog, info: AppendInfo, sync: bool) -> AppendInfo:
        if sync:
            await self._sync(plog)
        return info

    async def _sync(self, plog: PartitionLog) -> None:
        """The durability barrier; a failure is a retriable KAFKA_STORAGE_ERROR (the batch
        stays in the log and the next barrier retries it, so an idempotent producer's
        retry is answered once it is durable)."""
        try:
            await self.committer.sync(plog)
        except LogFenced as exc:  # the lease moved: the client should find the new leader
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"the write was refused: {exc}") from exc
        except Exception as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the write was not made durable: {exc}") from exc

    def topic_log_config(self, topic: str) -> Any:
        t = self.topics.topics[topic]
        return topic_config.log_config(self.topics.effective_configs(t))


def _timestamp_window(bounds: tuple[int, int] | None, clock: Callable[[], int]) -> tuple[int, int] | None:
    """(earliest, latest) CreateTime accepted, or None when neither bound is set (the default:
    no clock read, no per-batch check)."""
    if bounds is None:
        return None
    now_ms = clock()
    return now_ms - bounds[0], now_ms + bounds[1]


def _recompressed(
    batch: memoryview, header: BatchHeader, codec: int, topic: str, raw: bytes | bytearray | memoryview
) -> memoryview:
    try:
        return memoryview(recompress(batch, header, codec, raw))
    except UnsupportedCompression as exc:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, str(exc)) from None
    except CorruptCompressedData as exc:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"cannot recompress a batch for topic {topic!r}: {exc}"
        ) from None


def _check_timestamps(first: int, last: int, window: tuple[int, int], topic: str) -> None:
    # The batch's first and max timestamps stand for its records (Kafka checks each
    # record; producers write the first record's time as the base).
    earliest, latest = window
    if first < earliest or last > latest:
        raise KafkaError(
            ErrorCode.INVALID_TIMESTAMP,
            f"record timestamps {first}..{last} fall outside topic {topic!r}'s accepted window "
            f"{earliest}..{latest} (message.timestamp.before.max.ms / after.max.ms)",
        )


class InvalidRecords(KafkaError):
    """INVALID_RECORD naming the bad records of a batch (KIP-467: Produce v8+ answers them
    as record_errors, so a client fails those records and can retry the others)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, message)
        self.record_errors = record_errors


def _require_keys(checked: CheckedRecords, header: BatchHeader, topic: str) -> None:
    """Compaction keeps the latest value per key, so a keyless record has no place in it."""
    why = f"compacted topic {topic!r} cannot accept a record without a key"
    keyless = [(index, why) for index in checked.keyless]
    if keyless:
        first = keyless[0][0]
        raise InvalidRecords(
            f"{why} ({len(keyless)} of the batch's {header.record_count} records, the first at index {first})",
            keyless,
        )


def load_cluster_id(metadata: MetadataStore | None) -> str:
    """Kafka cluster ids are Uuid strings (22-char url-safe base64); ours persists in
    meta.properties and is read back as stored (one made before the no-leading-"-" rule too)."""
    from ..protocol.uuid_strings import random_uuid_string

    fresh = random_uuid_string()
    if metadata is None:
        return fresh
    update = getattr(metadata, "update", None)
    if update is not None:
        # Brokers of a cluster starting together: the first to write names the cluster.
        def keep_first(current: str | None) -> str:
            return current if current and "cluster.id=" in current else f"version=1\ncluster.id={fresh}\n"

        saved: str | None = update("meta.properties", keep_first)
    else:
        saved = metadata.load("meta.properties")
    for line in (saved or "").splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    metadata.save("meta.properties", f"version=1\ncluster.id={fresh}\n")
    return fresh
