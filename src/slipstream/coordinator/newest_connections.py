"""The newest connection each group member has sent one kind of request on.

A member that gives up on a connection (a request timeout, a lost link) goes on over a
new one, while requests it had written to the old one may still be in flight and reach
the broker after its newer ones. Kafka reads them (nothing orders requests across
connections), so a late OffsetCommit can move an offset back, and a late
ConsumerGroupHeartbeat can report partitions the member has been given since as
released. Clients keep one coordinator connection at a time, so a member's request on
an older connection than one it has already used for that kind of request is such a
leftover: the coordinator refuses it. Connections are numbered in the order the broker
accepted them (broker/connection_seq.py); 0 means "not from a connection" and is never
refused.

Not state: never written or replayed. A restarted broker numbers connections afresh, and
every member reconnects to it anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Entries kept before members that are gone are pruned (at least).
_PRUNE_AT = 4096


class NewestConnections:
    """(group id, member id) -> the newest connection one kind of request of it came on.

    ``kind`` names the request in the log line; ``present(group_id, member_id)`` says
    whether the member is still in its group (what pruning keeps).
    """

    def __init__(self, kind: str, present: Callable[[str, str], bool]) -> None:
        self.kind = kind
        self.present = present
        self.latest: dict[tuple[str, str], int] = {}
        self._prune_at = _PRUNE_AT

    def superseded(self, group_id: str, member_id: str, connection: int) -> bool:
        """Whether this request came on an older connection than the member's newest one
        for this kind of request; otherwise record ``connection`` as the newest."""
        if not member_id or not connection:
            return False
        key = (group_id, member_id)
        latest = self.latest.get(key, 0)
        if connection < latest:
            log.info(
                "group %s: refusing a %s of member %s on a connection it replaced since (#%d < #%d)",
                group_id,
                self.kind,
                member_id,
                connection,
                latest,
            )
            return True
        if connection != latest:
            self.latest[key] = connection
            if len(self.latest) >= self._prune_at:
                self._prune()
        return False

    def _prune(self) -> None:
        """Forget members that are gone (kept bounded by the live members)."""
        present = self.present
        self.latest = {k: c for k, c in self.latest.items() if present(*k)}
        self._prune_at = max(_PRUNE_AT, 2 * len(self.latest))
