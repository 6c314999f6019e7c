"""The types consumed records are handed out as; the fetcher decodes straight into them.

Both are :class:`~slipstream.protocol.records.MessageFields` tuples (one object per
record, no re-wrapping); they differ only in their constructors' argument order.
"""

from __future__ import annotations

from ..protocol.records import MessageFields, Record

__all__ = ["ConsumerMessage", "Message"]


class Message(MessageFields):
    """One record from ``Consumer.poll`` / ``AIOConsumer``: ``topic``, ``partition``,
    ``offset``, ``key``, ``value``, ``timestamp``, ``headers``, ``timestamp_type``,
    ``leader_epoch``.

    An immutable named tuple (fields in that order; ``_replace`` makes a changed
    copy). The fetcher decodes records straight into this type, one object per
    record: a frozen dataclass cost more per record than decoding it. ``headers``
    is a list of (key, value); for records without headers it is one shared,
    read-only empty list (equal to ``[]``; copy it with ``list()`` to add to it).
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_type: int = 0,
        leader_epoch: int = -1,
    ) -> Message:
        return tuple.__new__(
            cls,
            (
                topic,
                partition,
                offset,
                key,
                value,
                timestamp,
                [] if headers is None else headers,
                timestamp_type,
                leader_epoch,
            ),
        )


class ConsumerMessage(MessageFields):
    """One record of a claimed partition (sarama's ``ConsumerMessage``): ``topic``,
    ``partition``, ``offset``, ``key``, ``value``, ``headers``, ``timestamp``
    (milliseconds since the epoch: create or log-append time, see
    ``timestamp_type``), ``timestamp_type``, ``leader_epoch``.

    An immutable named tuple. The constructor takes the fields in the order above;
    the tuple itself (iteration, indexing, ``_replace``) has the consumer's common
    :class:`~slipstream.protocol.records.MessageFields` order, in which the fetcher
    decodes records straight into this type (one object per record, no re-wrapping).
    ``headers`` of a record without headers is one shared, read-only empty list
    (equal to ``[]``).
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp: int = -1,
        timestamp_type: int = 0,
        leader_epoch: int = -1,
    ) -> ConsumerMessage:
        return tuple.__new__(
            cls,
            (
                topic,
                partition,
                offset,
                key,
                value,
                timestamp,
                [] if headers is None else headers,
                timestamp_type,
                leader_epoch,
            ),
        )

    @classmethod
    def from_record(cls, topic: str, partition: int, r: Record) -> ConsumerMessage:
        return cls(
            topic,
            partition,
            r.offset,
            r.key,
            r.value,
            r.headers,
            r.timestamp,
            r.timestamp_type,
            r.leader_epoch,
        )
