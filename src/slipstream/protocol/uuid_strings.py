"""Kafka's Uuid string form: 22 characters of URL-safe base64 without padding
("Q2zIYs8ZTiKwwMjD3cH9dQ"), as ``Uuid.toString()`` writes it - not the 36-character
form of classic groups' member ids.

Random ones name what Kafka names with ``Uuid.randomUuid()``: member ids the coordinator
makes in consumer groups (KIP-848; a ConsumerGroupHeartbeat v0 with an empty id, or a
classic member joining a consumer group) and the cluster id (``meta.properties``).
Here, below broker/ and coordinator/, so both use the one rule.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable


def uuid_string(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def random_uuid_string(new_uuid: Callable[[], uuid.UUID] | None = None) -> str:
    """A random version 4 UUID as Kafka writes one. Like Kafka's, it never starts with "-"
    (it could be taken for a command-line option): such a draw is drawn again.
    ``new_uuid``: where the UUIDs come from (``uuid.uuid4``, looked up at each call)."""
    while True:
        text = uuid_string(new_uuid() if new_uuid is not None else uuid.uuid4())
        if not text.startswith("-"):
            return text
