"""``/api/groups/<id>/history``: a group's rebalance history as JSON.

    {"group_id": "orders", "last_seq": 812, "events": [{"seq": 790, "kind": "member-left", ...}, ...]}

``?since=SEQ`` leaves out the events numbered SEQ and lower (a follower passes the
last number it printed). ``last_seq`` is the broker's last event number over all
groups: lower than ``since`` means the broker restarted and numbers anew. The events
are ``coordinator/history.py``'s, each as ``to_dict`` makes it.
"""

from __future__ import annotations

from typing import Any

from ...coordinator.coordinator import GroupCoordinator

HISTORY_SUFFIX = "/history"


class BadSince(ValueError):
    pass


def parse_since(values: list[str] | None) -> int:
    if not values:
        return 0
    try:
        since = int(values[-1])
    except ValueError:
        raise BadSince(f"since must be an event number, not {values[-1]!r}") from None
    if since < 0:
        raise BadSince("since must not be negative")
    return since


def history_document(coordinator: GroupCoordinator, group_id: str, since: int = 0) -> dict[str, Any] | None:
    """The document, or None when the broker knows neither the group nor any history of it."""
    events = coordinator.history_of(group_id, since)
    known = (
        coordinator.group(group_id) is not None
        or coordinator.consumer_group(group_id) is not None
        or bool(events)
        or bool(coordinator.history.events(group_id))
    )
    if not known:
        return None
    return {"group_id": group_id, "last_seq": coordinator.history.last_seq, "events": events}
