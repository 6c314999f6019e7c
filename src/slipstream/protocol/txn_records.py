"""Record formats of the ``__transaction_state`` topic, byte-compatible with Kafka.

Every key and value starts with an int16 version:

- key v0 ``TransactionLogKey`` (transactional id);
- value ``TransactionLogValue`` v0-v1 (producer id and epoch, timeout, the
  state as an int8 id, the partitions of the transaction - null when Empty -,
  last update and start timestamps). v1 is the first flexible version; Kafka
  3.9 writes v0 unless transaction.version 1 is enabled, and so do we.

A tombstone (null value) forgets the transactional id (expiration).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import codec
from . import primitives as p
from .schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, field

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_MAX_VERSION = 1
TRANSACTION_LOG_VALUE_WRITE_VERSION = 0


class TransactionLogKey(Struct):
    transactional_id: str = field(STRING, v="0")


class TransactionLogPartitions(Struct):
    topic: str = field(STRING)
    partition_ids: list[int] = field(Array(INT32))


class TransactionLogValue(Struct):
    producer_id: int = field(INT64)
    producer_epoch: int = field(INT16)
    transaction_timeout_ms: int = field(INT32)
    transaction_status: int = field(INT8)
    transaction_partitions: list[TransactionLogPartitions] | None = field(
        Array(TransactionLogPartitions), nullable="0+"
    )
    transaction_last_update_timestamp_ms: int = field(INT64)
    transaction_start_timestamp_ms: int = field(INT64)


@dataclass(frozen=True, slots=True)
class UnknownTxnKey:
    """A key version this broker does not know (skipped on replay, as Kafka does)."""

    version: int


class TxnRecordFormatError(ValueError):
    """A ``__transaction_state`` key or value that does not parse."""


def _version_of(data: bytes | memoryview, what: str) -> int:
    if len(data) < 2:
        raise TxnRecordFormatError(f"{what} shorter than its version")
    version: int = p.INT16.unpack_from(data, 0)[0]
    return version


def encode_key(transactional_id: str) -> bytes:
    body = codec.encode(TransactionLogKey(transactional_id=transactional_id), TRANSACTION_LOG_KEY_VERSION, False)
    return p.INT16.pack(TRANSACTION_LOG_KEY_VERSION) + body.getvalue()


def decode_key(data: bytes | memoryview) -> TransactionLogKey | UnknownTxnKey:
    version = _version_of(data, "TransactionLogKey")
    if version != TRANSACTION_LOG_KEY_VERSION:
        return UnknownTxnKey(version)
    try:
        key, _ = codec.decode_at(TransactionLogKey, memoryview(data), 2, version, False)
    except p.DecodeError as exc:
        raise TxnRecordFormatError(f"malformed TransactionLogKey: {exc}") from exc
    assert isinstance(key, TransactionLogKey)
    return key


def encode_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_WRITE_VERSION) -> bytes:
    if not 0 <= version <= TRANSACTION_LOG_VALUE_MAX_VERSION:
        raise ValueError(f"TransactionLogValue version {version} is not in 0-{TRANSACTION_LOG_VALUE_MAX_VERSION}")
    return p.INT16.pack(version) + codec.encode(value, version, version >= 1).getvalue()


def decode_value(data: bytes | memoryview) -> TransactionLogValue:
    version = _version_of(data, "TransactionLogValue")
    if not 0 <= version <= TRANSACTION_LOG_VALUE_MAX_VERSION:
        raise TxnRecordFormatError(f"unknown TransactionLogValue version {version}")
    try:
        value, _ = codec.decode_at(TransactionLogValue, memoryview(data), 2, version, version >= 1)
    except p.DecodeError as exc:
        raise TxnRecordFormatError(f"malformed TransactionLogValue v{version}: {exc}") from exc
    assert isinstance(value, TransactionLogValue)
    return value
