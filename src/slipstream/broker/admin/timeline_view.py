"""``/api/groups/<id>/timeline``: the group's rebalance history as the lines
``slipstream groups history`` prints (coordinator/history_timeline.py), for the console.

    {"group_id": "orders", "entries": [{"time": "09:00:01.000", "text": "member ... left (reason: ...)",
                                        "kind": "event"}, {"kind": "summary", ...}, {"kind": "day", ...}]}

``kind`` is "day" for a date line, "summary" for a generation's summary ("generation 7:
3.2 s, after ...") or a reconciliation's, "event" otherwise. The last ``MAX_EVENTS``
events only: the page shows recent rebalances, the CLI the whole history.
"""

from __future__ import annotations

from typing import Any

from ...coordinator.coordinator import GroupCoordinator
from ...coordinator.history_timeline import TimelineFormatter

TIMELINE_SUFFIX = "/timeline"
MAX_EVENTS = 300


def timeline_document(coordinator: GroupCoordinator, group_id: str) -> dict[str, Any]:
    events = [event for _seq, event in coordinator.history.events(group_id)][-MAX_EVENTS:]
    formatter = TimelineFormatter(short_ids=True)
    entries: list[dict[str, str]] = []
    for event in events:
        lines = formatter.feed([event])
        event_line_seen = False
        for line in lines:
            if line.endswith("(UTC)"):
                entries.append({"kind": "day", "time": "", "text": line})
                continue
            time, _, text = line.partition("  ")
            kind = "summary" if event_line_seen else "event"
            event_line_seen = True
            entries.append({"kind": kind, "time": time, "text": text})
    return {"group_id": group_id, "entries": entries}
