"""What the producer hands back: record metadata, its errors, the delivery callback type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..protocol.errors import ErrorCode, KafkaError


class RecordMetadata(NamedTuple):
    """Where a record landed. ``offset`` is -1 with acks=0 (nothing is acknowledged)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    # 0: CreateTime (the producer's timestamp), 1: LogAppendTime (the broker's)
    timestamp_type: int = 0


class ProducerError(Exception):
    """A local producer problem (not an error code from a broker)."""


class ProducerClosedError(ProducerError):
    """The producer is closed, or was closed before a record could be delivered."""


class BufferFullError(ProducerError, BufferError):
    """``buffer_memory`` stayed full for ``max_block_ms``."""


class DeliveryTimeoutError(KafkaError):
    """A record was not acknowledged within ``delivery_timeout_ms``."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


DeliveryCallback = Callable[[BaseException | None, RecordMetadata], Any]
"""``on_delivery(err, metadata)``: err is None on success; offset -1 on failure."""
