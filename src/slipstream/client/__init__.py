"""Slipstream's Kafka client: works against any Kafka-compatible broker.

    from slipstream.client import Producer, AIOProducer, Consumer, AIOConsumer, ConsumerGroup, Admin

- :class:`Producer` (blocking, thread-safe) and :class:`AIOProducer` (asyncio);
- :class:`Consumer` (blocking poll loop, ``wakeup()`` from another thread) and
  :class:`AIOConsumer` (asyncio, ``async for``);
- :class:`ConsumerGroup`: handler-based group consumption (one claim per partition);
- :class:`Admin`: topics, groups, offsets (``async with Admin("host:9092") as admin``);
- serializers for producers and deserializers for consumers (``json_serializer``,
  ``string_deserializer``...), and consumer statistics (``Consumer.statistics()``,
  ``ConsumerGroup.statistics()``).

Every class takes a bootstrap string (``"host:port,host2:port"`` or a list) and
keyword settings named like the Java client's (``linger.ms`` -> ``linger_ms``).
Logs go through :mod:`logging` under ``slipstream.client``; each record names its
client (``[client-id]`` before the message, and ``%(client_id)s`` for formats).
"""

from __future__ import annotations

from ..protocol.errors import KafkaError
from . import logs as _logs
from .admin import Admin
from .aio_consumer import AIOConsumer
from .assignors import TopicPartition
from .consumer import ConcurrentModificationError, Consumer, WakeupError
from .consumer_group import ConsumerGroup, ConsumerGroupHandler
from .consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from .consumer_messages import ConsumerMessage, Message
from .consumer_runtime import ConsumerRebalanceListener
from .producer import AIOProducer, Producer, ProducerError, RecordMetadata
from .serde import (
    DeserializationError,
    Deserializer,
    Serializer,
    json_deserializer,
    json_serializer,
    string_deserializer,
    string_serializer,
)
from .statistics import ConsumerStatistics, PartitionStatistics
from .transactions import TransactionAbortedError, TransactionError, TransactionStateError

# Every client module is imported by now: their records name the client (see logs.py).
_logs.install_for_client_modules()

__all__ = [
    "AIOConsumer",
    "AIOProducer",
    "Admin",
    "ConcurrentModificationError",
    "Consumer",
    "ConsumerGroup",
    "ConsumerGroupClaim",
    "ConsumerGroupHandler",
    "ConsumerGroupSession",
    "ConsumerMessage",
    "ConsumerRebalanceListener",
    "ConsumerStatistics",
    "DeserializationError",
    "Deserializer",
    "KafkaError",
    "Message",
    "PartitionStatistics",
    "Producer",
    "ProducerError",
    "RecordMetadata",
    "Serializer",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionError",
    "TransactionStateError",
    "WakeupError",
    "json_deserializer",
    "json_serializer",
    "string_deserializer",
    "string_serializer",
]
