"""The transactional producer's state machine and its talks with the coordinators.

``TransactionState`` follows the Java client's ``TransactionManager.State`` (and
librdkafka's): a declared table of transitions, and errors sorted the way those
clients sort them:

- *retriable* (CONCURRENT_TRANSACTIONS, coordinator moving or loading, ...): the
  operation retries by itself until its timeout;
- *abortable* (a record failed, offsets refused by the group, ...): the
  transaction can only be aborted; ``abort_transaction()`` returns the producer
  to Ready;
- *fatal* (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH on an EndTxn,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE, ...): the producer
  can do nothing more but close; every later call raises the same error.

``TransactionCoordinatorClient`` finds the transaction coordinator
(FindCoordinator key_type 1) and the group coordinator for
``send_offsets_to_transaction``, and sends requests to them, retrying what may pass.

``end_transaction`` completes a transaction another process left open, given its
transactional id, producer id and epoch (a two-phase commit: writers flush and
hand those three to a coordinator process, which commits or aborts; the Spark
exactly-once sink does this).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..protocol.api import ApiSpec
from ..protocol.apis.end_txn import SPEC as END_TXN
from ..protocol.apis.end_txn import EndTxnRequest
from ..protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from ..protocol.apis.find_coordinator import FindCoordinatorRequest
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .cluster import Cluster
from .connection import BrokerConnection
from .retry import Backoff

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs of the consumer whose offsets it commits
    (the group checks the member and generation, so a zombie consumer is refused)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TxnState(Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


_S = TxnState
# state -> the states it may be entered from (Java's TransactionManager.State.isTransitionValid).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset(),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.INITIALIZING}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING, _S.ABORTING}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING: frozenset({_S.IN_TRANSACTION, _S.COMMITTING}),
    _S.ABORTING: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR, _S.ABORTING}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING, _S.ABORTABLE_ERROR, _S.ABORTING}),
    _S.FATAL_ERROR: frozenset(set(TxnState)),
}

# Errors that end the producer (Java: fatalError; librdkafka: fatal).
FATAL_CODES = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_REQUEST,
    }
)
# Coordinator-side conditions that pass (the operation retries, rediscovering the coordinator).
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRIED = frozenset(
    {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, *_COORDINATOR_MOVED}
)


class TransactionError(KafkaError):
    """A transactional operation failed. ``fatal``: close the producer; ``abortable``:
    abort the transaction (then carry on)."""

    def __init__(self, code: int, message: str | None = None, *, fatal: bool = False) -> None:
        super().__init__(code, message)
        self.fatal = fatal
        self.abortable = not fatal


class TransactionAbortedError(TransactionError):
    """A record was not sent because its transaction was aborted first (the Java client's
    TransactionAbortedException). No broker error is involved: ``code`` is NONE."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.NONE, "the transaction was aborted before this record was sent")
        self.args = (self.message,)

    def __str__(self) -> str:
        return self.message


class TransactionStateError(RuntimeError):
    """A transactional method called in a state that does not allow it (a usage error,
    like the Java client's IllegalStateException)."""


class TransactionState:
    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        self.error: TransactionError | None = None
        # Partitions (and whether offsets) added to the current transaction.
        self.partitions: set[tuple[str, int]] = set()
        self.offsets_added = False

    def transition(self, target: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR and target is not TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in VALID_PREVIOUS[target]:
            raise TransactionStateError(
                f"transactional producer {self.transactional_id!r}: cannot go from {self.state.value} "
                f"to {target.value}"
            )
        self.state = target
        if target is TxnState.READY:
            self.error = None
            self.partitions = set()
            self.offsets_added = False

    def require(self, *states: TxnState, what: str) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in states:
            if self.state is TxnState.ABORTABLE_ERROR and self.error is not None:
                raise self.error
            allowed = " or ".join(s.value for s in states)
            raise TransactionStateError(
                f"{what} needs the transactional producer in state {allowed}; it is {self.state.value}"
            )

    def fail(self, error: BaseException) -> TransactionError:
        """Record that ``error`` hit the transaction: fatal or abortable. Returns it as
        a TransactionError."""
        if isinstance(error, TransactionError):
            txn_error = error
        elif isinstance(error, KafkaError):
            txn_error = TransactionError(error.code, str(error), fatal=error.code == ErrorCode.PRODUCER_FENCED)
        else:
            txn_error = TransactionError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
        if self.state is TxnState.FATAL_ERROR:
            return self.error or txn_error
        if txn_error.fatal:
            self.error = txn_error
            self.state = TxnState.FATAL_ERROR
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.ABORTABLE_ERROR):
            if self.error is None:
                self.error = txn_error
            self.state = TxnState.ABORTABLE_ERROR
        return txn_error

    @property
    def has_work(self) -> bool:
        return bool(self.partitions) or self.offsets_added


def classify(code: int, what: str, *, fenced_is_fatal: bool = True) -> TransactionError:
    fatal = code in FATAL_CODES if fenced_is_fatal else code in FATAL_CODES - {ErrorCode.INVALID_PRODUCER_EPOCH}
    return TransactionError(code, f"{what}: {error_name(code)}", fatal=fatal)


class TransactionCoordinatorClient:
    """Connections to the transaction coordinator (and to group coordinators), with retries."""

    def __init__(self, cluster: Cluster, transactional_id: str, backoff: Backoff) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.backoff = backoff
        self._coordinators: dict[tuple[int, str], BrokerConnection] = {}

    async def _find(self, key_type: int, key: str) -> BrokerConnection:
        cached = self._coordinators.get((key_type, key))
        if cached is not None and not cached.closed:
            return cached
        conn = await self.cluster.any_connection()
        version = conn.version_for(FIND_COORDINATOR)
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            request = FindCoordinatorRequest(key=key, key_type=key_type)
        response = await conn.request(FIND_COORDINATOR, request, version=version)
        if version >= 4:
            (found,) = response.coordinators
            error, node = found.error_code, found.node_id
        else:
            error, node = response.error_code, response.node_id
        if error:
            raise KafkaError(error, f"FindCoordinator for {key!r} (key type {key_type})")
        coordinator = await self.cluster.connection(node)
        self._coordinators[(key_type, key)] = coordinator
        return coordinator

    def forget(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    async def call(
        self,
        spec: ApiSpec,
        build: Callable[[int], Any],
        error_of: Callable[[Any], int],
        *,
        what: str,
        timeout_s: float,
        key_type: int = KEY_TYPE_TRANSACTION,
        key: str | None = None,
        retriable: frozenset[int] = _RETRIED,
        max_version: int | None = None,
    ) -> Any:
        """Send ``build(version)`` to the coordinator until its error is not a passing one.

        Returns the response (whatever its error: the caller judges it). Raises
        TimeoutError once ``timeout_s`` is spent retrying."""
        key = self.transactional_id if key is None else key
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        attempt = 0
        while True:
            try:
                conn = await self._find(key_type, key)
                version = conn.version_for(spec, max_version)
                response = await conn.request(spec, build(version), version=version)
                error = error_of(response)
                if error not in retriable and not (error and is_retriable(error) and error not in FATAL_CODES):
                    return response
                if error in _COORDINATOR_MOVED:
                    self.forget(key_type, key)
                log.debug("%s: %s, retrying", what, error_name(error))
            except (ConnectionError, OSError) as exc:
                self.forget(key_type, key)
                log.debug("%s: %s, retrying", what, exc)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self.forget(key_type, key)
                log.debug("%s: %s, retrying", what, exc)
            delay = self.backoff.delay_s(attempt)
            attempt += 1
            if loop.time() + delay > deadline:
                raise TimeoutError(f"{what} did not complete within {timeout_s:.1f} s")
            await asyncio.sleep(delay)


async def end_transaction(
    cluster: Cluster,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    timeout_s: float = 60.0,
    backoff: Backoff | None = None,
) -> None:
    """EndTxn for a transaction opened (and left open, after a flush) by another producer
    instance with this id, producer id and epoch. Retries what may pass; a retry after a
    lost answer is safe (the coordinator answers NONE for a transaction already completed
    the same way). Raises TransactionError: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH when
    a newer producer took the id over (its unfinished transaction was aborted then),
    INVALID_TXN_STATE when the transaction ended the other way or has nothing in it."""
    if not cluster.brokers:  # a fresh Cluster: the coordinator's address comes from the broker list
        await cluster.refresh_metadata([])
    client = TransactionCoordinatorClient(cluster, transactional_id, backoff or Backoff())
    what = f"{'commit' if commit else 'abort'} of transaction {transactional_id!r}"
    response = await client.call(
        END_TXN,
        lambda v: EndTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, committed=commit
        ),
        lambda r: int(r.error_code),
        what="EndTxn",
        timeout_s=timeout_s,
    )
    if response.error_code:
        raise classify(response.error_code, what)
