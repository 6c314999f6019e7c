"""Topic mutation throttling (KIP-599): partitions created or deleted per second, per client.

``controller.mutation.rate`` (ours as a broker setting; Kafka sets it as a client
quota) bounds how many partitions one client id may create or delete per second,
with a burst of that rate times ``_BURST_S`` (Kafka's quota window: 11 samples of 1 s).
As in Kafka, the check (mutation_quota_check.py) is made before each topic: a topic
is accepted while the client's bucket is not in debt, and may take it into debt; once
in debt, topics are refused with THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, DeleteTopics v5+,
CreatePartitions v3+) and the response's throttle_time_ms says when the debt is paid.
Older versions are never refused (Kafka's permissive quota): they only report the
throttle time. 0 (the default) means no limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_BURST_S = 11.0
# Client ids tracked at once; the oldest are forgotten first (their bucket refills anyway).
_MAX_CLIENTS = 10_000


@dataclass
class _Bucket:
    """A client's tokens and when they were last refilled."""

    tokens: float
    updated_ms: int


@dataclass
class MutationQuotas:
    """One token bucket per client id for controller.mutation.rate (KIP-599)."""

    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def _bucket(self, rate: float, client_id: str, now_ms: int) -> _Bucket:
        burst = rate * _BURST_S
        bucket = self._buckets.pop(client_id, None)
        if bucket is None:
            bucket = _Bucket(burst, now_ms)
            if len(self._buckets) >= _MAX_CLIENTS:
                del self._buckets[next(iter(self._buckets))]
        else:
            elapsed = max(0, now_ms - bucket.updated_ms)
            bucket.tokens = min(burst, bucket.tokens + rate * elapsed / 1000)
            bucket.updated_ms = now_ms
        self._buckets[client_id] = bucket  # most recently used last
        return bucket

    def acquire(self, rate: float, client_id: str, partitions: int, now_ms: int, *, strict: bool) -> bool:
        """Record ``partitions`` mutations for ``client_id``; False when refused (strict only)."""
        if rate <= 0:
            return True
        bucket = self._bucket(rate, client_id, now_ms)
        if strict and bucket.tokens < 0:
            return False
        bucket.tokens -= partitions
        return True

    def throttle_ms(self, rate: float, client_id: str, now_ms: int) -> int:
        """How long until ``client_id``'s debt is paid (0 when it has none)."""
        if rate <= 0 or client_id not in self._buckets:
            return 0
        bucket = self._bucket(rate, client_id, now_ms)
        if bucket.tokens >= 0:
            return 0
        return int(-bucket.tokens / rate * 1000) + 1
