"""The producer's delivery policy, sans-I/O: what to do with a batch after an answer.

Given a batch, what came back for it (a partition result, an error, a lost
connection) and the time, ``DeliveryPolicy`` returns a ``BatchDecision``: succeed,
retry after a backoff, split in two, or fail with an error; plus whether the
metadata should be refreshed and whether the producer needs a new epoch (KIP-360).
It reads the batch and changes nothing: ``AIOProducer`` applies the decision to
its accumulator and the records' futures. The rules follow the Java client's Sender.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .producer_types import DeliveryTimeoutError, ProducerClosedError
from .retry import Backoff

# Marked retriable in Kafka's table, but resending the same bytes cannot help.
NOT_RETRIED = frozenset({ErrorCode.CORRUPT_MESSAGE})
# Retriable errors after which the broker may nevertheless hold the batch.
MAYBE_WRITTEN = frozenset({
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
})
TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


class BatchView(Protocol):
    """What the policy reads of a batch (accumulator.ProducerBatch has it)."""

    topic: str
    partition: int
    created_ms: float
    attempts: int
    base_sequence: int
    fate_unknown: bool
    last_error: BaseException | None

    @property
    def records(self) -> list[Any]: ...


class Verdict(enum.Enum):
    SUCCEED = "succeed"  # acknowledged, or a duplicate the broker already holds
    RETRY = "retry"  # back into its partition's queue after backoff_ms, same sequence
    SPLIT = "split"  # too large for the broker: resend as two halves
    FAIL = "fail"  # the batch's records fail with ``error``


@dataclass(frozen=True, slots=True)
class BatchDecision:
    verdict: Verdict
    error: BaseException | None = None
    """FAIL: the records' error; RETRY/SPLIT: what caused it (for the log)."""
    backoff_ms: float = 0.0
    fate_unknown: bool | None = None
    """RETRY: True if the broker may have written the batch, False if it surely did not,
    None if this answer says nothing about earlier attempts."""
    refresh_metadata: bool = False
    bump_epoch: bool = False
    """The producer needs a new id/epoch before this partition's batches go out again."""
    last_error: KafkaError | None = None
    """To remember on the batch: a later delivery timeout reports it."""


SUCCEED = BatchDecision(Verdict.SUCCEED)


class DeliveryPolicy:
    """Retry, split, bump or fail: the decision per batch, from batch + answer + now (ms)."""

    def __init__(
        self, *, retries: int, delivery_timeout_ms: float, backoff: Backoff, idempotent: bool
    ) -> None:
        self.retries = retries
        self.delivery_timeout_ms = delivery_timeout_ms
        self.backoff = backoff
        self.idempotent = idempotent

    # ---- entry points

    def on_partition_result(
        self,
        batch: BatchView,
        result: Any | None,
        now: float,
        *,
        stopping: bool,
        acked_end: int | None,
    ) -> BatchDecision:
        """``result``: the batch's partition in the Produce response (None: missing).
        ``acked_end``: the sequence the broker should expect next on this partition, or
        None when that is unknown (no state, a local gap, a new epoch pending)."""
        if result is None:
            return BatchDecision(
                Verdict.FAIL,
                KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"the Produce response has no result for {batch.topic}-{batch.partition}",
                ),
            )
        error = result_error(result)
        if error is None:
            return SUCCEED
        return self.on_error(batch, error, now, stopping=stopping, acked_end=acked_end)

    def on_error(
        self, batch: BatchView, error: KafkaError, now: float, *, stopping: bool, acked_end: int | None
    ) -> BatchDecision:
        code = error.code
        if self.idempotent and code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if acked_end is None or batch.base_sequence != acked_end:
                # An earlier batch of ours is missing: this one was not written. Retry it in
                # order (after a new epoch if there is a hole).
                return self.retry_or_fail(
                    batch, error, now, stopping=stopping, fate_unknown=False, count_attempt=False
                )
            return BatchDecision(
                Verdict.FAIL,
                KafkaError(
                    code,
                    f"{error.message} (the broker rejected {batch.topic}-{batch.partition} sequence "
                    f"{batch.base_sequence}, which follows the last acknowledged batch: "
                    "acknowledged records may have been lost; continuing under a new producer epoch)",
                ),
            )
        if self.idempotent and code == ErrorCode.UNKNOWN_PRODUCER_ID:
            decision = self.retry_or_fail(
                batch, error, now, stopping=stopping, fate_unknown=False, count_attempt=False
            )
            return _with(decision, bump_epoch=True)
        if code in TOO_LARGE and len(batch.records) > 1 and not batch.fate_unknown and not stopping:
            # Too big for the broker's max.message.bytes: retry as two halves (as the Java
            # client does), down to single records, which then fail with the error.
            return BatchDecision(Verdict.SPLIT, error)
        if is_retriable(code) and code not in NOT_RETRIED:
            decision = self.retry_or_fail(
                batch,
                error,
                now,
                stopping=stopping,
                # a timeout may have written it; a refusal proves nothing about earlier tries
                fate_unknown=True if code in MAYBE_WRITTEN else None,
            )
            return _with(decision, refresh_metadata=True)
        return BatchDecision(Verdict.FAIL, error)

    def on_connection_lost(
        self, batch: BatchView, exc: BaseException, now: float, *, stopping: bool
    ) -> BatchDecision:
        """The request got no answer (connection lost or timed out): the broker may have it."""
        error = exc if isinstance(exc, KafkaError) else KafkaError(
            ErrorCode.NETWORK_EXCEPTION, f"connection lost: {exc}"
        )
        decision = self.retry_or_fail(batch, error, now, stopping=stopping, fate_unknown=True)
        return _with(decision, refresh_metadata=True)

    # ---- the shared rules

    def retry_or_fail(
        self,
        batch: BatchView,
        error: KafkaError,
        now: float,
        *,
        stopping: bool,
        fate_unknown: bool | None,
        count_attempt: bool = True,
    ) -> BatchDecision:
        retries_used = batch.attempts - 1
        if stopping:
            failure: BaseException = ProducerClosedError(
                "the producer was closed before the record was delivered"
            )
        elif count_attempt and retries_used >= self.retries:
            failure = error
        elif now >= batch.created_ms + self.delivery_timeout_ms:
            failure = self.timeout_error(batch, error)
        else:
            return BatchDecision(
                Verdict.RETRY,
                error,
                backoff_ms=self.backoff.delay_ms(max(0, retries_used)),
                fate_unknown=fate_unknown,
                last_error=error,
            )
        return BatchDecision(Verdict.FAIL, failure, last_error=error)

    def timeout_error(self, batch: BatchView, last_error: BaseException | None) -> DeliveryTimeoutError:
        parts = [
            f"{len(batch.records)} record(s) for {batch.topic}-{batch.partition} not delivered "
            f"within delivery_timeout_ms={self.delivery_timeout_ms:.0f}"
        ]
        if batch.attempts:
            parts.append(f"after {batch.attempts} attempt(s)")
        if last_error is not None:
            parts.append(f"last error: {last_error}")
        if batch.fate_unknown:
            parts.append("the broker may or may not have written them")
        return DeliveryTimeoutError("; ".join(parts))


def result_error(result: Any) -> KafkaError | None:
    """A Produce response partition's error (with any per-record errors), None on success.
    DUPLICATE_SEQUENCE_NUMBER is success: the broker holds the batch already."""
    code = result.error_code
    if code == 0 or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
        return None
    message = result.error_message or None
    if result.record_errors:
        details = "; ".join(
            f"record {e.batch_index}: {e.batch_index_error_message}" for e in result.record_errors
        )
        message = f"{message or error_name(code)} ({details})"
    return KafkaError(code, message)


def _with(decision: BatchDecision, **changes: Any) -> BatchDecision:
    return replace(decision, **changes)
