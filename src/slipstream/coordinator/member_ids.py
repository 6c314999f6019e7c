"""Member ids the coordinator makes in consumer groups (KIP-848).

A member of a consumer group without an id - a ConsumerGroupHeartbeat v0 with an empty
one, or a classic member joining a consumer group - gets what Kafka's coordinator gives
it: ``Uuid.randomUuid().toString()``, a random version 4 UUID as 22 characters of URL-safe
base64 without padding (not the 36-character form of classic groups' ids).
"""

from __future__ import annotations

import base64
import uuid


def random_uuid_string() -> str:
    """A random UUID as Kafka writes one ("Q2zIYs8ZTiKwwMjD3cH9dQ"). Like Kafka's, it never
    starts with "-" (it could be taken for a command-line option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text
