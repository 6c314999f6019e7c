"""The produce write path: a produce payload's batches checked and appended to a partition.

Loaded at the first append (or by the worker thread that loads the coordinators once the
listener answers), not with BrokerState: a broker's first answers need none of the record
batch, compression, batch-check and producer-state modules it brings.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..log.api import AppendInfo, LogFenced, PartitionLog
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
from .batch_checks import CheckedRecords, check_batch_records
from .internal_topics import refuse_client_append

if TYPE_CHECKING:
    from .state import BrokerState


async def append(
    state: BrokerState, topic: str, partition: int, records: memoryview, *, acks: int, transactional: bool = False
) -> AppendInfo:
    """Validate and append a produce payload for one partition; the one write path.

    ``transactional``: the produce request carried a transactional id, which Kafka
    requires for transactional batches (the producer state then tracks the open
    transaction; see producer_state.py).

    Raises KafkaError with the code the produce response should carry.
    """
    return await start_append(state, topic, partition, records, acks=acks, transactional=transactional)


def start_append(
    state: BrokerState, topic: str, partition: int, records: memoryview, *, acks: int, transactional: bool = False
) -> Coroutine[Any, Any, AppendInfo]:
    """``append`` in two steps: validates and appends now, before the caller's next
    await (so appends keep the order they were asked in), and returns what waits for
    the durability barrier when acks=all needs one. Raises KafkaError at once."""
    found = state.topics.topics.get(topic)
    if found is None or not 0 <= partition < len(found.partitions):
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} partition {partition} does not exist",
        )
    if state.not_leader(topic, partition):
        raise KafkaError(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {topic}-{partition}"
        )
    plog = found.partitions[partition]
    refuse_client_append(topic)
    policy = state.append_policies.for_topic(state.topics, found)
    max_batch = policy.max_batch_bytes
    compacted = policy.compacted
    if acks == -1 and policy.min_insync_replicas is not None:
        # One replica is all there is: acks=all cannot meet a higher minimum (as Kafka).
        raise KafkaError(
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"topic {topic!r} has min.insync.replicas={policy.min_insync_replicas} but this "
            "broker keeps one replica; acks=all cannot be satisfied",
        )
    timestamp_window = _timestamp_window(policy.timestamp_bounds, state.clock)
    # compression.type "producer" (the default) stores batches as sent: zero-copy.
    topic_codec = policy.topic_codec
    batches = []
    headers = []
    size = 0
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
            size += len(batch)
    except InvalidBatch as exc:
        code = ErrorCode.CORRUPT_MESSAGE if exc.corrupt else ErrorCode.INVALID_RECORD
        raise KafkaError(code, str(exc)) from None
    if not batches:
        raise KafkaError(ErrorCode.INVALID_RECORD, "produce request carried no record batch")

    producers = state.producer_state(topic, partition)
    if len(batches) == 1:
        duplicate = producers.check(headers[0])
        if duplicate is not None:
            # The original may still be waiting for (or have failed) its barrier: a
            # retry is answered only once the batch is durable.
            original = AppendInfo(duplicate.base_offset, duplicate.last_offset, -1, plog.log_start_offset)
            return _durable(state, plog, original, acks == -1 and state.config.syncs_before_ack)
    else:
        for header in headers:
            if producers.check(header) is not None:
                raise KafkaError(
                    ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                    "a request mixing new and already-written batches cannot be deduplicated",
                )

    log_append_time = policy.log_append_time
    # The request buffer is writable (we read frames into bytearrays): stamp in place.
    info = plog.append(batches, now_ms=state.clock(), log_append_time=log_append_time)  # type: ignore[arg-type]
    offset = info.base_offset
    for header in headers:
        producers.record(header, offset)
        offset += header.last_offset_delta + 1
    if acks == -1 and state.config.syncs_before_ack:
        return _appended_durable(state, plog, topic, partition, info, size)
    _appended(state, topic, partition, info, size)
    return _durable(state, plog, info, False)


async def _appended_durable(
    state: BrokerState, plog: PartitionLog, topic: str, partition: int, info: AppendInfo, size: int
) -> AppendInfo:
    await _sync(state, plog)
    _appended(state, topic, partition, info, size)
    return info


def _appended(state: BrokerState, topic: str, partition: int, info: AppendInfo, size: int) -> None:
    state.notifier.notify((topic, partition))
    state.metrics.produced(topic, info.last_offset - info.base_offset + 1, size)


async def _durable(state: BrokerState, plog: PartitionLog, info: AppendInfo, sync: bool) -> AppendInfo:
    if sync:
        await _sync(state, plog)
    return info


async def _sync(state: BrokerState, plog: PartitionLog) -> None:
    """The durability barrier; a failure is a retriable KAFKA_STORAGE_ERROR (the batch
    stays in the log and the next barrier retries it, so an idempotent producer's
    retry is answered once it is durable)."""
    try:
        await state.committer.sync(plog)
    except LogFenced as exc:  # the lease moved: the client should find the new leader
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"the write was refused: {exc}") from exc
    except Exception as exc:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the write was not made durable: {exc}") from exc


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
