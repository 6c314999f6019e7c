"""The type consumed records are handed out as; the fetcher decodes straight into it."""

from __future__ import annotations

from ..protocol.records import MessageFields

__all__ = ["ConsumerMessage", "Message"]


class Message(MessageFields):
    """One consumed record, from ``Consumer.poll``, ``AIOConsumer`` and a
    ``ConsumerGroup`` claim: ``topic``, ``partition``, ``offset``, ``key``, ``value``,
    ``timestamp`` (milliseconds since the epoch: create or log-append time, see
    ``timestamp_type``; -1 when unknown), ``headers``, ``timestamp_type``,
    ``leader_epoch``.

    An immutable named tuple (fields in that order, the constructor's too;
    ``_replace`` makes a changed copy). The fetcher decodes records straight into
    this type, one object per record: a frozen dataclass cost more per record than
    decoding it. ``headers`` is a list of (key, value); for records without headers
    it is one shared, read-only empty list (equal to ``[]``; copy it with ``list()``
    to add to it).
    """

    __slots__ = ()

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int = -1,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_type: int = 0,
        leader_epoch: int = -1,
    ) -> Message:
        if not isinstance(timestamp, int):
            # ConsumerMessage once took headers before timestamp: say so rather than
            # build a message with the two swapped.
            raise TypeError(f"timestamp must be an int, not {type(timestamp).__name__} (headers come after it)")
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


ConsumerMessage = Message
"""The name ``ConsumerGroup`` handlers know a message by (sarama's); the same type."""
