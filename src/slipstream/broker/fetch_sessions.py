"""Incremental fetch sessions (KIP-227): the broker-side cache, free of I/O.

A consumer that fetches many partitions repeats the same list in every Fetch.
With a session the broker remembers the list (and, per partition, the fetch
offset and the high watermark / log start offset it last reported), so the
client sends only what changed and the broker answers only partitions with
news: records, an error, or a moved high watermark / log start offset.

Request metadata, as KIP-227 defines it:

- id 0, epoch -1: a sessionless full fetch (what clients without sessions send);
- epoch 0: a full fetch that asks for a new session (any id given is closed first);
- id N, epoch -1: close session N, answer as sessionless;
- id N, epoch E > 0: an incremental fetch in session N; E must be the next epoch.

Sessions live in a bounded cache. When it is full, the least recently used
session is evicted only if it has been idle for ``eviction_ms``; otherwise the
new client is served sessionless (session id 0), which it handles by sending
full fetches, so a full cache costs bandwidth, never correctness.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF

# (topic key, partition); the key is the name before Fetch v13 and the topic id from v13.
PartitionKey = tuple[str | uuid.UUID, int]


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: the client's fetch position and what it was last told."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1  # as last reported to the client; -1 until then
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    """One client's incremental fetch session: its partitions, in response order."""

    id: int
    uses_topic_ids: bool
    last_used_ms: int
    next_epoch: int = 1
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)

    def upsert(self, key: PartitionKey, fetch_offset: int, max_bytes: int) -> None:
        """Add a partition, or update the fetch position the client sent for it."""
        cached = self.partitions.get(key)
        if cached is None:
            self.partitions[key] = CachedPartition(fetch_offset, max_bytes)
        else:
            cached.fetch_offset = fetch_offset
            cached.max_bytes = max_bytes

    def forget(self, keys: Iterable[PartitionKey]) -> None:
        for key in keys:
            self.partitions.pop(key, None)

    def must_report(
        self, key: PartitionKey, *, has_records: bool, error: int, high_watermark: int,
        log_start_offset: int,
    ) -> bool:
        """Whether an incremental response carries this partition; records what it reports.

        A partition that returns records moves to the back of the session's order,
        so under a response size limit the others get their turn next time.
        """
        cached = self.partitions[key]
        changed = (
            has_records
            or error != 0
            or cached.high_watermark != high_watermark
            or cached.log_start_offset != log_start_offset
        )
        cached.high_watermark = high_watermark
        cached.log_start_offset = log_start_offset
        if has_records:
            self.partitions.move_to_end(key)
        return changed

    def advance_epoch(self) -> None:
        self.next_epoch = 1 if self.next_epoch >= _MAX_EPOCH else self.next_epoch + 1


class FetchSessionCache:
    """Sessions by id, least recently used first."""

    def __init__(self, max_sessions: int = 1000, eviction_ms: int = 120_000) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._random = random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[FetchSession]:
        """The open sessions, least recently used first."""
        return list(self._sessions.values())

    def create(self, now_ms: int, *, uses_topic_ids: bool) -> FetchSession | None:
        """A new session, or None when the cache is full of recently used ones."""
        if self.max_sessions <= 0:
            return None
        if len(self._sessions) >= self.max_sessions:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now_ms - oldest.last_used_ms < self.eviction_ms:
                return None
            del self._sessions[oldest_id]
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._random.randint(1, _MAX_EPOCH)
        session = FetchSession(session_id, uses_topic_ids, now_ms)
        self._sessions[session_id] = session
        return session

    def get(self, session_id: int, now_ms: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used_ms = now_ms
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
