"""Collecting what one coordinator operation produced, to become a ``CoordinatorResult``.

An operation may answer several parked requests (completions), write records,
register callbacks to run once those records are durable, and note the decisions it
took (history events); ``Effects`` gathers them
as the operation walks the state machine, and ``result()`` hands them over.
"""

from __future__ import annotations

from ..protocol.schema import Struct
from .history import GroupEvent
from .result import AfterAppend, Completion, CoordinatorResult, Pending, Record


class Effects:
    """Collects what one operation produced, to become a ``CoordinatorResult``."""

    __slots__ = ("after", "completions", "events", "records")

    def __init__(self) -> None:
        self.completions: list[Completion] = []
        self.records: list[Record] = []
        self.after: list[AfterAppend] = []
        self.events: list[GroupEvent] = []

    def event(self, event: GroupEvent) -> None:
        self.events.append(event)

    def complete(self, pending: Pending, response: Struct) -> None:
        self.completions.append(Completion(pending, response))

    def result(self, own: Pending | None = None, response: Struct | None = None) -> CoordinatorResult:
        """The result; ``own`` is this request's handle, answered now if a completion has it."""
        completions = self.completions
        pending: Pending | None = None
        if own is not None and response is None:
            for i, c in enumerate(completions):
                if c.pending is own:
                    response = c.response
                    completions = completions[:i] + completions[i + 1 :]
                    break
            else:
                pending = own
        return CoordinatorResult(
            response=response,
            pending=pending,
            records=self.records,
            completions=completions,
            after_append=chain_after_append(self.after),
            events=self.events,
        )


def chain_after_append(callbacks: list[AfterAppend]) -> AfterAppend | None:
    """One callback running ``callbacks`` in order and merging what they return."""
    if not callbacks:
        return None
    if len(callbacks) == 1:
        return callbacks[0]

    def run(error: int, now_ms: int) -> CoordinatorResult:
        merged = CoordinatorResult()
        chained: list[AfterAppend] = []
        events: list[GroupEvent] = []
        for cb in callbacks:
            r = cb(error, now_ms)
            merged.records.extend(r.records)
            merged.completions.extend(r.completions)
            events.extend(r.events)
            if r.after_append is not None:
                chained.append(r.after_append)
        merged.after_append = chain_after_append(chained)
        merged.events = events
        return merged

    return run
