"""The ConsumerGroupHeartbeat answer, and results that count once their records are durable.

A member must never act on an epoch or an assignment the group did not keep: an
answer that depends on records waits for their append, and a failed append answers
its error instead (and drops the events, the decisions the records carried).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..protocol.apis.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from . import history as ev
from .append_errors import append_error_for_group
from .result import CoordinatorResult, Record


def heartbeat_error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=code, error_message=message, member_epoch=0, heartbeat_interval_ms=0
    )


def after_write(
    records: list[Record],
    on_success: Callable[[], None] | None = None,
    on_failure: Callable[[], None] | None = None,
    events: Sequence[ev.GroupEvent] = (),
) -> CoordinatorResult:
    """``events`` count only once ``records`` are durable: a failed write decided nothing."""

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            if on_failure is not None:
                on_failure()
            return CoordinatorResult()
        if on_success is not None:
            on_success()
        return CoordinatorResult(events=events)

    return CoordinatorResult(records=records, after_append=after_append)


def answer_after_write(
    response: ConsumerGroupHeartbeatResponse,
    records: list[Record],
    on_success: Callable[[], None] | None = None,
    events: Sequence[ev.GroupEvent] = (),
) -> CoordinatorResult:
    """Answer once ``records`` are durable; a failed write answers its error instead, so a
    member never acts on an epoch or an assignment the group did not keep (and ``events``,
    the decisions the records carry, are dropped)."""
    if not records:
        return CoordinatorResult(response=response, events=events)

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            return CoordinatorResult(response=heartbeat_error(append_error_for_group(error)))
        if on_success is not None:
            on_success()
        return CoordinatorResult(response=response, events=events)

    return CoordinatorResult(records=records, after_append=after_append)


def with_response(
    result: CoordinatorResult, response: ConsumerGroupHeartbeatResponse | None, left: ev.MemberLeft | None
) -> CoordinatorResult:
    """A downgrade's result answering a leave heartbeat (if any) once it is durable."""
    if response is None and left is None:
        return result
    after = result.after_append

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        nxt = after(error, now_ms) if after is not None else CoordinatorResult()
        if error:
            nxt.response = heartbeat_error(append_error_for_group(error)) if response is not None else None
            return nxt
        nxt.response = response
        if left is not None:
            nxt.events = (left, *nxt.events)
        return nxt

    return CoordinatorResult(records=result.records, completions=result.completions, after_append=after_append,
                             events=result.events)
