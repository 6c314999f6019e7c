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

from .schema import INT8, INT16, INT32, INT64, STRING, Array, Struct, field
from .versioned_records import (
    check_write_version,
    decode_body,
    decode_versioned_value,
    encode_versioned,
    version_of,
)

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_MAX_VERSION = 1
TRANSACTION_LOG_VALUE_WRITE_VERSION = 0
_FLEXIBLE_FROM = 1


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


def encode_key(transactional_id: str) -> bytes:
    key = TransactionLogKey(transactional_id=transactional_id)
    return encode_versioned(TRANSACTION_LOG_KEY_VERSION, key, False)


def decode_key(data: bytes | memoryview) -> TransactionLogKey | UnknownTxnKey:
    version = version_of(data, "TransactionLogKey", TxnRecordFormatError)
    if version != TRANSACTION_LOG_KEY_VERSION:
        return UnknownTxnKey(version)
    return decode_body(TransactionLogKey, data, version, False, TxnRecordFormatError)


def encode_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_WRITE_VERSION) -> bytes:
    check_write_version(TransactionLogValue, version, TRANSACTION_LOG_VALUE_MAX_VERSION)
    return encode_versioned(version, value, version >= _FLEXIBLE_FROM)


def decode_value(data: bytes | memoryview) -> TransactionLogValue:
    return decode_versioned_value(
        TransactionLogValue, data, TRANSACTION_LOG_VALUE_MAX_VERSION, _FLEXIBLE_FROM, TxnRecordFormatError
    )
