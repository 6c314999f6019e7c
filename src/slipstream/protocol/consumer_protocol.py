"""The consumer protocol: what a classic consumer group carries inside JoinGroup/SyncGroup.

A member's JoinGroup ``protocols[].metadata`` (protocol type "consumer") is a
*subscription*; the leader's SyncGroup ``assignments[].assignment`` is an
*assignment*. Both are an int16 version followed by the body below, never
flexible:

- Subscription v0: topics, user_data (nullable); v1 adds owned_partitions;
  v2 adds generation_id (default -1); v3 adds rack_id (nullable).
- Assignment v0-v3: assigned_partitions, user_data (nullable); v1-v3 only
  bump the version in step with the subscription.

Like Kafka, a reader meets newer versions by parsing them with the newest
format it knows (later versions only append fields) and ignores trailing
bytes. The coordinator decodes subscriptions only to learn which topics a
live group subscribes to (OffsetDelete, offset expiry), and for that reads
the v0 prefix, which every version shares.
"""

from __future__ import annotations

from . import codec
from . import primitives as p
from .schema import BYTES, INT32, STRING, Array, Struct, field

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_MAX_VERSION = 3
ASSIGNMENT_MAX_VERSION = 3


class ConsumerProtocolTopicPartition(Struct):
    topic: str = field(STRING)
    partitions: list[int] = field(Array(INT32))


class ConsumerProtocolSubscription(Struct):
    topics: list[str] = field(Array(STRING))
    user_data: bytes | None = field(BYTES, nullable="0+", default=None)
    owned_partitions: list[ConsumerProtocolTopicPartition] = field(Array(ConsumerProtocolTopicPartition), v="1+")
    generation_id: int = field(INT32, v="2+", default=-1)
    rack_id: str | None = field(STRING, v="3+", nullable="3+", default=None)


class ConsumerProtocolAssignment(Struct):
    assigned_partitions: list[ConsumerProtocolTopicPartition] = field(Array(ConsumerProtocolTopicPartition))
    user_data: bytes | None = field(BYTES, nullable="0+", default=None)


def _check_version(version: int, highest: int, what: str) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"consumer protocol {what} version {version} is not in 0-{highest}")


def encode_subscription(subscription: ConsumerProtocolSubscription, version: int = SUBSCRIPTION_MAX_VERSION) -> bytes:
    """The bytes a consumer puts in JoinGroup protocol metadata."""
    _check_version(version, SUBSCRIPTION_MAX_VERSION, "subscription")
    out = bytearray(p.INT16.pack(version))
    out += codec.encode(subscription, version, False).getvalue()
    return bytes(out)


def encode_assignment(assignment: ConsumerProtocolAssignment, version: int = ASSIGNMENT_MAX_VERSION) -> bytes:
    """The bytes a leader puts in a SyncGroup assignment."""
    _check_version(version, ASSIGNMENT_MAX_VERSION, "assignment")
    out = bytearray(p.INT16.pack(version))
    out += codec.encode(assignment, version, False).getvalue()
    return bytes(out)


def _read_version(data: bytes | memoryview, what: str) -> int:
    if len(data) < 2:
        raise p.DecodeError(f"consumer protocol {what} shorter than its version")
    version: int = p.INT16.unpack_from(data, 0)[0]
    if version < 0:
        raise p.DecodeError(f"consumer protocol {what} has negative version {version}")
    return version


def decode_subscription(data: bytes | memoryview) -> tuple[int, ConsumerProtocolSubscription]:
    """(version, subscription); versions above 3 are read with the v3 layout."""
    version = _read_version(data, "subscription")
    view = memoryview(data)
    sub, _ = codec.decode_at(ConsumerProtocolSubscription, view, 2, min(version, SUBSCRIPTION_MAX_VERSION), False)
    return version, sub


def decode_assignment(data: bytes | memoryview) -> tuple[int, ConsumerProtocolAssignment]:
    """(version, assignment); versions above 3 are read with the v3 layout."""
    version = _read_version(data, "assignment")
    view = memoryview(data)
    asg, _ = codec.decode_at(ConsumerProtocolAssignment, view, 2, min(version, ASSIGNMENT_MAX_VERSION), False)
    return version, asg


def subscribed_topics(metadata: bytes | memoryview) -> list[str]:
    """The topics of a subscription, read from the v0 prefix every version shares."""
    _read_version(metadata, "subscription")
    sub, _ = codec.decode_at(ConsumerProtocolSubscription, memoryview(metadata), 2, 0, False)
    topics: list[str] = sub.topics
    return topics
