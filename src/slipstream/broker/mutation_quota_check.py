"""One request's view of its client's topic-mutation quota (the buckets: mutation_quota.py).

CreateTopics, DeleteTopics and CreatePartitions make one per request and ask it before
each topic.
"""

from __future__ import annotations

from ..protocol.errors import BY_NAME, KafkaError
from .request_context import RequestContext

THROTTLING_QUOTA_EXCEEDED = BY_NAME["THROTTLING_QUOTA_EXCEEDED"].code


class QuotaCheck:
    """One request's view of its client's quota (strict: the version may be refused)."""

    def __init__(self, ctx: RequestContext, *, strict: bool) -> None:
        self.state = ctx.state
        self.rate = ctx.state.config.controller_mutation_rate
        self.client_id = ctx.header.client_id or ""
        self.strict = strict

    def admit(self, partitions: int) -> None:
        """Count ``partitions`` mutations, or raise THROTTLING_QUOTA_EXCEEDED."""
        quotas = self.state.mutation_quotas
        if not quotas.acquire(self.rate, self.client_id, partitions, self.state.clock(), strict=self.strict):
            raise KafkaError(
                THROTTLING_QUOTA_EXCEEDED,
                f"client {self.client_id!r} is over controller.mutation.rate={self.rate} partitions/s",
            )

    def throttle_ms(self) -> int:
        return self.state.mutation_quotas.throttle_ms(self.rate, self.client_id, self.state.clock())
