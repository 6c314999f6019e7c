"""Group errors: what an error answered to the classic JoinGroup or SyncGroup means
for the member (:func:`classify_group_error`), and the exceptions raised to the
application, with hints on what to fix.

Shared by the classic member (:mod:`.classic_membership`), the consumer-protocol
member (:mod:`.consumer_membership`), the coordinator lookup and the offsets client.
"""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .membership_types import Action


class GroupError(KafkaError):
    """A group operation failed with a protocol error."""


class FatalGroupError(GroupError):
    """This member cannot continue in the group (configuration error, fenced, unauthorized)."""


class FencedInstanceError(FatalGroupError):
    """Another consumer with the same ``group_instance_id`` replaced this one (KIP-345)."""

    def __init__(self, group_instance_id: str | None, message: str | None = None) -> None:
        super().__init__(
            ErrorCode.FENCED_INSTANCE_ID,
            message
            or f"group instance id {group_instance_id!r} was fenced: another consumer joined "
            "the group with the same group_instance_id",
        )
        self.group_instance_id = group_instance_id


# Errors answered to JoinGroup / SyncGroup, and what they mean for the member.
_FATAL_JOIN_ERRORS = frozenset(
    {
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_GROUP_ID,
        30,  # GROUP_AUTHORIZATION_FAILED
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)


def classify_group_error(code: int) -> Action:
    """The action for an error answered to JoinGroup or SyncGroup ."""
    if code == ErrorCode.NONE:
        return Action.OK
    if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return Action.REDISCOVER
    if code in (
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.MEMBER_ID_REQUIRED,
        ErrorCode.REBALANCE_IN_PROGRESS,
    ):
        return Action.REJOIN
    if code in _FATAL_JOIN_ERRORS:
        return Action.FATAL
    return Action.BACKOFF if is_retriable(code) else Action.FATAL


_CLASSIC_HINTS = {
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: (
        "the group's members have no partition assignor (or protocol type) in common"
    ),
    ErrorCode.INVALID_SESSION_TIMEOUT: (
        "session_timeout_ms is outside the broker's group.min/max.session.timeout.ms"
    ),
    ErrorCode.UNSUPPORTED_VERSION: (
        "the broker does not support a request this member needs "
        "(group_instance_id needs JoinGroup v5, Kafka 2.3+)"
    ),
}


def classic_fatal_error(
    code: int, group_id: str, group_instance_id: str | None, what: str
) -> FatalGroupError:
    """The error raised to the application when a classic-protocol request fails for good."""
    if code == ErrorCode.FENCED_INSTANCE_ID:
        return FencedInstanceError(group_instance_id)
    if code == ErrorCode.GROUP_MAX_SIZE_REACHED:
        hint = f"group {group_id!r} already has group.max.size members"
    else:
        hint = _CLASSIC_HINTS.get(code, "")
    message = f"{what} for group {group_id!r} failed: {error_name(code)}" + (
        f" ({hint})" if hint else ""
    )
    return FatalGroupError(code, message)


_CONSUMER_HINTS = {
    ErrorCode.GROUP_ID_NOT_FOUND: (
        "the group may be a classic group with active members: a group changes protocol "
        "only once it is empty"
    ),
    ErrorCode.UNSUPPORTED_ASSIGNOR: "group_remote_assignor names an assignor the broker lacks",
    ErrorCode.INVALID_REGULAR_EXPRESSION: "the subscription pattern is not valid RE2 syntax",
    ErrorCode.UNSUPPORTED_VERSION: (
        "the broker does not support this request version (group_protocol='consumer' needs "
        "Kafka 4.0+; pattern subscriptions need ConsumerGroupHeartbeat v1)"
    ),
}


def consumer_fatal_error(
    code: int, group_id: str, instance_id: str | None, message: str | None
) -> FatalGroupError:
    """The error raised to the application when a ConsumerGroupHeartbeat fails for good,
    with the broker's own explanation."""
    if code == ErrorCode.FENCED_INSTANCE_ID:
        return FencedInstanceError(instance_id, message)
    text = f"ConsumerGroupHeartbeat for group {group_id!r} failed: {error_name(code)}"
    if message:
        text += f": {message}"
    hint = _CONSUMER_HINTS.get(code)
    if hint:
        text += f" ({hint})"
    return FatalGroupError(code, text)
