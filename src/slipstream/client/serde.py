"""Key and value serializers for producers, deserializers for consumers.

A serializer is any callable ``obj -> bytes | None``; a deserializer any callable
``bytes | None -> obj``. Pass them as ``key_serializer=`` / ``value_serializer=`` to
``Producer`` and ``AIOProducer``, and ``key_deserializer=`` / ``value_deserializer=`` to
``Consumer`` and ``AIOConsumer``. ``None`` (a missing key, a tombstone) goes through
the helpers here unchanged, so deleting a key needs no special case.

    producer = Producer(bootstrap, value_serializer=json_serializer, key_serializer=string_serializer)
    producer.produce("orders", {"id": 7}, key="customer-1")
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Serializer = Callable[[Any], bytes | None]
Deserializer = Callable[[bytes | None], Any]

__all__ = [
    "DeserializationError",
    "Deserializer",
    "Serializer",
    "json_deserializer",
    "json_serializer",
    "string_deserializer",
    "string_serializer",
]


def json_serializer(obj: Any) -> bytes | None:
    """``obj`` as compact UTF-8 JSON (None stays None: a tombstone, not ``null``)."""
    if obj is None:
        return None
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def json_deserializer(data: bytes | None) -> Any:
    """UTF-8 JSON back to Python (None stays None). Raises ValueError on bad JSON."""
    if data is None:
        return None
    return json.loads(data)


def string_serializer(text: str | None) -> bytes | None:
    """``text`` encoded as UTF-8 (None stays None)."""
    return None if text is None else text.encode()


def string_deserializer(data: bytes | None) -> str | None:
    """UTF-8 bytes back to str (None stays None)."""
    return None if data is None else bytes(data).decode()


class RecordSerializers:
    """A producer's pair of serializers, applied as a record is queued."""

    __slots__ = ("active", "key", "value")

    def __init__(self, key: Serializer | None, value: Serializer | None) -> None:
        for what, fn in (("key_serializer", key), ("value_serializer", value)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{what} must be callable")
        self.key = key
        self.value = value
        self.active = key is not None or value is not None

    def apply(self, key: Any, value: Any) -> tuple[Any, Any]:
        if self.key is not None:
            key = self.key(key)
        if self.value is not None:
            value = self.value(value)
        return key, value


class RecordDeserializers:
    """A consumer's pair of deserializers, applied to each message handed out."""

    __slots__ = ("active", "key", "value")

    def __init__(self, key: Deserializer | None, value: Deserializer | None) -> None:
        for what, fn in (("key_deserializer", key), ("value_deserializer", value)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{what} must be callable")
        self.key = key
        self.value = value
        self.active = key is not None or value is not None

    def apply(self, message: Any) -> Any:
        """A copy of ``message`` (a named tuple with key and value) with both decoded."""
        changes = {}
        if self.key is not None:
            changes["key"] = self.key(message.key)
        if self.value is not None:
            changes["value"] = self.value(message.value)
        return message._replace(**changes)

    def apply_all(self, messages: list[Any]) -> list[Any]:
        """Every message decoded; DeserializationError (holding them all, undecoded) if one
        fails, so the application still has every record the poll consumed."""
        out = []
        for message in messages:
            try:
                out.append(self.apply(message))
            except Exception as exc:
                raise DeserializationError(message, messages, exc) from exc
        return out


class DeserializationError(ValueError):
    """A key or value deserializer failed. ``message`` is the record it failed on and
    ``messages`` everything that poll returned, undecoded: the consumer's position is
    already past them, so handle them (or ``seek`` back) before polling on."""

    def __init__(self, message: Any, messages: list[Any], cause: Exception) -> None:
        super().__init__(
            f"could not deserialize the record at {message.topic}-{message.partition}@{message.offset}: {cause}"
        )
        self.message = message
        self.messages = messages
