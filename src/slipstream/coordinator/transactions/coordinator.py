"""The transaction coordinator as a pure state machine, fed (request, now).

Kafka's ``TransactionCoordinator`` + ``TransactionStateManager``: one
``TransactionMetadata`` per transactional id, changed only by replaying
``__transaction_state`` records (``replay``/``apply``). A handler checks the
request against the current metadata, computes the target (``TxnTransit``),
and returns it as a record; the answer comes from ``after_append`` once the
record is durable. EndTxn answers once PrepareCommit/PrepareAbort is durable and
hands the caller a ``MarkerJob``; when the markers are written the coordinator
writes CompleteCommit/CompleteAbort.

Timers (keyed, injected): ``txn-timeout:<id>`` aborts a transaction still
Ongoing ``transaction.timeout.ms`` after it started (fencing its producer with an
epoch bump, as Kafka's abortTimedOutTransactions does); ``txn-expire:<id>``
writes a tombstone for an id idle in Empty/CompleteCommit/CompleteAbort for
``transactional.id.expiration.ms``.

At start the caller calls ``begin_loading()``, replays the whole log, then
``finish_loading(now)``: transactions found in PrepareCommit/PrepareAbort get
their markers written again (the result it returns), and Ongoing ones past their
timeout are aborted by their timers; meanwhile requests answer
COORDINATOR_LOAD_IN_PROGRESS. In a cluster the same happens per
``__transaction_state`` partition (``ownership``, as the group coordinator's): a
broker that gains a partition's lease loads it with the lease epoch as its
coordinator epoch (the markers it writes fence those of the previous owner); one
that loses it ``disown``s it and answers NOT_COORDINATOR for its ids.

Beside it: ``state.py`` (the transition table), ``metadata.py`` (one id's state),
``responses.py`` (answers per version, append errors), ``describe.py``
(DescribeTransactions / ListTransactions), ``config.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from ...protocol import txn_records as tr
from ...protocol.apis.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from ...protocol.apis.add_partitions_to_txn import AddPartitionsToTxnResult
from ...protocol.apis.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from ...protocol.apis.end_txn import EndTxnRequest, EndTxnResponse
from ...protocol.apis.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from ...protocol.apis.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from ...protocol.errors import ErrorCode
from ...protocol.schema import Struct
from .. import records as group_records
from ..ownership import PartitionOwnership
from ..result import CoordinatorResult, Record, RequestContext
from ..timer import GuardedTimer, Timer
from . import describe
from .config import TxnConfig
from .metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from .responses import append_error_for_txn, fenced_for_version, init_error, partition_results
from .result import MarkerJob, TxnResult
from .state import TxnState, check_transition

log = logging.getLogger("slipstream.coordinator.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"
# The coordinator epoch of a broker alone (in a cluster: the partition's lease epoch).
COORDINATOR_EPOCH = 0
TIMEOUT_KEY = "txn-timeout:"
EXPIRE_KEY = "txn-expire:"
COMPLETE_RETRY_KEY = "txn-complete:"
COMPLETE_RETRY_MS = 500


ProducerIdAllocator = Callable[[], int]


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, *, timer: Timer, allocate_producer_id: ProducerIdAllocator) -> None:
        """``allocate_producer_id()``: a producer id never handed out before (the broker's
        allocator, shared with idempotent producers)."""
        self.config = config
        self.timer = GuardedTimer(timer)
        self._allocate = allocate_producer_id
        self.transactions: dict[str, TransactionMetadata] = {}
        # Ids with a record written but not yet acknowledged: requests for them wait.
        self._in_flight: set[str] = set()
        # Transits emitted and not yet replayed, by id: replay takes their in-memory
        # fields (last producer id/epoch) that the record has no room for.
        self._emitted: dict[str, tuple[bytes, TxnTransit]] = {}
        self.ownership = PartitionOwnership(config.transaction_state_num_partitions)
        # By __transaction_state partition, when it is not COORDINATOR_EPOCH (a cluster).
        self._coordinator_epochs: dict[int, int] = {}
        self._now_ms = 0

    # ================================================================ partitions and loading

    def partition_for(self, transactional_id: str) -> int:
        return group_records.partition_for(transactional_id, self.config.transaction_state_num_partitions)

    @property
    def is_loading(self) -> bool:
        return self.ownership.is_loading

    def coordinator_epoch(self, partition: int) -> int:
        return self._coordinator_epochs.get(partition, COORDINATOR_EPOCH)

    def begin_loading(
        self, partitions: Iterable[int] | None = None, coordinator_epochs: Mapping[int, int] | None = None
    ) -> None:
        """Mark partitions (default: all) as loading; ``coordinator_epochs``: the epoch
        each one's markers carry from now on (its lease epoch)."""
        self.ownership.begin_loading(partitions)
        self._coordinator_epochs.update(coordinator_epochs or {})

    def finish_loading(self, now_ms: int, partitions: Iterable[int] | None = None) -> TxnResult:
        """Serve the loaded partitions (default: every loading one): arm their ids' timers
        and write again the markers of their prepared transactions."""
        self._now_ms = max(self._now_ms, now_ms)
        done = self.ownership.finish_loading(partitions)
        out = TxnResult()
        for txn in self.transactions.values():
            if self.partition_for(txn.transactional_id) not in done:
                continue
            self._arm(txn, now_ms)
            if txn.state.is_prepared:
                log.info("transaction %s was %s at start: writing its markers", txn.transactional_id, txn.state)
                out.markers.append(self._marker_job(txn))
        return out

    def disown(self, partitions: Iterable[int]) -> list[str]:
        """Another broker coordinates these partitions now: forget their ids (timers
        stopped) until they are loaded again; returns the ids dropped."""
        gone = self.ownership.disown(partitions)
        dropped = [tid for tid in self.transactions if self.partition_for(tid) in gone]
        for tid in dropped:
            del self.transactions[tid]
        for tid in [*dropped, *self._in_flight, *self._emitted]:
            if self.partition_for(tid) in gone:
                self._in_flight.discard(tid)
                self._emitted.pop(tid, None)
                for key in (TIMEOUT_KEY, EXPIRE_KEY, COMPLETE_RETRY_KEY):
                    self.timer.cancel(key + tid)
        for partition in gone:
            self._coordinator_epochs.pop(partition, None)
        return dropped

    def is_current(self, job: MarkerJob) -> bool:
        """Whether ``job``'s markers are still this coordinator's to write: its
        transaction is here, prepared as the job says, with the job's producer and epoch."""
        txn = self.transactions.get(job.transactional_id)
        prepared = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        return (
            txn is not None
            and txn.state is prepared
            and txn.producer_id == job.producer_id
            and txn.producer_epoch == job.producer_epoch
            and self.coordinator_epoch(self.partition_for(job.transactional_id)) == job.coordinator_epoch
        )

    # ================================================================ replay

    def replay(self, key: bytes | memoryview, value: bytes | memoryview | None, now_ms: int | None = None) -> None:
        """Apply one ``__transaction_state`` record: the only way durable state changes."""
        now = self._now_ms if now_ms is None else now_ms
        try:
            k = tr.decode_key(key)
            if isinstance(k, tr.UnknownTxnKey):
                log.debug("skipping __transaction_state record with key version %s", k.version)
                return
            tid = k.transactional_id
            if value is None:
                self._emitted.pop(tid, None)
                self.transactions.pop(tid, None)
                self.timer.cancel(TIMEOUT_KEY + tid)
                self.timer.cancel(EXPIRE_KEY + tid)
                return
            transit = TxnTransit.from_value(tr.decode_value(value))
        except (tr.TxnRecordFormatError, ValueError) as exc:
            log.warning("skipping malformed __transaction_state record: %s", exc)
            return
        emitted = self._emitted.pop(tid, None)
        if emitted is not None and emitted[0] == bytes(value):
            transit = emitted[1]
        self._apply_transit(tid, transit, now)

    def apply(self, record: Record, now_ms: int | None = None) -> None:
        self.replay(record.key, record.value, now_ms)

    def _apply_transit(self, tid: str, transit: TxnTransit, now_ms: int) -> None:
        txn = self.transactions.get(tid)
        if txn is None:
            txn = self.transactions[tid] = TransactionMetadata(
                tid, transit.producer_id, transit.producer_epoch, transit.timeout_ms, transit.state
            )
        elif not self.ownership.is_key_loading(tid):
            # A record this coordinator wrote: the table is checked (a log being loaded
            # may start anywhere after compaction, so loading takes what it finds).
            check_transition(tid, txn.state, transit.state)
        txn.apply(transit)
        if not self.ownership.is_key_loading(tid):
            self._arm(txn, now_ms)

    def _arm(self, txn: TransactionMetadata, now_ms: int) -> None:
        tid = txn.transactional_id
        if txn.state is TxnState.ONGOING:
            self.timer.cancel(EXPIRE_KEY + tid)
            deadline = txn.start_ms + txn.timeout_ms
            start, epoch = txn.start_ms, txn.producer_epoch
            self.timer.schedule(
                TIMEOUT_KEY + tid, deadline - now_ms, lambda now: self._abort_timed_out(tid, start, epoch, now)
            )
        elif txn.state.expiration_allowed:
            self.timer.cancel(TIMEOUT_KEY + tid)
            deadline = txn.last_update_ms + self.config.transactional_id_expiration_ms
            updated = txn.last_update_ms
            self.timer.schedule(EXPIRE_KEY + tid, deadline - now_ms, lambda now: self._expire(tid, updated, now))
        else:
            self.timer.cancel(TIMEOUT_KEY + tid)
            self.timer.cancel(EXPIRE_KEY + tid)

    # ================================================================ writing

    def _write(
        self,
        tid: str,
        current: TxnState,
        transit: TxnTransit,
        on_done: Callable[[int, int], CoordinatorResult],
    ) -> TxnResult:
        """The record of ``transit``; ``on_done(error, now)`` once it is durable (or failed)."""
        check_transition(tid, current, transit.state)
        value = tr.encode_value(transit.to_value())
        self._in_flight.add(tid)
        self._emitted[tid] = (value, transit)

        def after_append(error: int, now: int) -> CoordinatorResult:
            self._in_flight.discard(tid)
            self._emitted.pop(tid, None)
            return on_done(error, now)

        record = Record(self.partition_for(tid), tr.encode_key(tid), value)
        return TxnResult(records=[record], after_append=after_append)

    # ================================================================ InitProducerId

    def init_producer_id(self, ctx: RequestContext, req: InitProducerIdRequest, now_ms: int) -> TxnResult:
        """InitProducerId with a transactional id (idempotent producers never get here)."""
        self._now_ms = now_ms
        version = ctx.api_version

        def fail(error: int) -> TxnResult:
            return TxnResult(response=init_error(error, version))

        tid = req.transactional_id
        if not tid:
            return fail(ErrorCode.INVALID_REQUEST)
        timeout = req.transaction_timeout_ms
        if not 0 < timeout <= self.config.transaction_max_timeout_ms:
            return fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if code := self.ownership.key_unavailable(tid):
            return fail(code)
        pid, epoch = (req.producer_id, req.producer_epoch) if version >= 3 else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return fail(ErrorCode.INVALID_REQUEST)
        expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
        if tid in self._in_flight:
            return fail(ErrorCode.CONCURRENT_TRANSACTIONS)

        txn = self.transactions.get(tid)
        if txn is None:
            # A new id: the metadata exists once its first record is replayed.
            txn = TransactionMetadata(tid, self._allocate(), NO_PRODUCER_EPOCH, timeout, TxnState.EMPTY)
            txn.last_update_ms = now_ms

        if expected is not None and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.last_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return fail(ErrorCode.PRODUCER_FENCED)

        state = txn.state
        if state.is_prepared:
            return fail(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            return self._fence_and_abort(txn, now_ms, lambda error: init_error(error or ErrorCode.CONCURRENT_TRANSACTIONS, version))
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise RuntimeError(f"transactional id {tid!r} found in state {state}, which is never stored")

        if is_epoch_exhausted(txn.producer_epoch) and (expected is None or expected[1] == txn.producer_epoch):
            transit = txn.transit(
                producer_id=self._allocate(),
                producer_epoch=0,
                last_producer_id=txn.producer_id,
                last_producer_epoch=txn.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                timeout_ms=timeout,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
        else:
            bumped = txn.producer_epoch + 1
            if expected is None:
                new_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
            elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
                new_epoch, last_epoch = bumped, txn.producer_epoch
            elif expected[1] == txn.last_producer_epoch:
                # A retry of a bump whose answer the producer never got: the same epoch again.
                new_epoch, last_epoch = txn.producer_epoch, txn.last_producer_epoch
            else:
                return fail(ErrorCode.PRODUCER_FENCED)
            transit = txn.transit(
                producer_epoch=new_epoch,
                last_producer_epoch=last_epoch,
                timeout_ms=timeout,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )

        def done(error: int, now: int) -> CoordinatorResult:
            if error:
                return TxnResult(response=init_error(append_error_for_txn(error), version))
            log.info("transactional id %s: producer id %s epoch %s", tid, transit.producer_id, transit.producer_epoch)
            return TxnResult(
                response=InitProducerIdResponse(
                    error_code=ErrorCode.NONE, producer_id=transit.producer_id, producer_epoch=transit.producer_epoch
                )
            )

        return self._write(tid, state, transit, done)

    def _fence_and_abort(
        self, txn: TransactionMetadata, now_ms: int, answer: Callable[[int], Struct] | None
    ) -> TxnResult:
        """Bump the epoch of an Ongoing transaction's producer and abort it (PrepareEpochFence).

        ``answer(error)`` shapes the response once PrepareAbort is durable (or failed).
        """
        tid = txn.transactional_id
        check_transition(tid, txn.state, TxnState.PREPARE_EPOCH_FENCE)
        epoch = txn.producer_epoch if txn.producer_epoch >= MAX_EPOCH else txn.producer_epoch + 1
        transit = txn.transit(
            producer_epoch=epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            state=TxnState.PREPARE_ABORT,
            last_update_ms=now_ms,
        )
        check_transition(tid, TxnState.PREPARE_EPOCH_FENCE, TxnState.PREPARE_ABORT)
        log.info("transactional id %s: fencing epoch %s and aborting its transaction", tid, txn.producer_epoch)

        def done(error: int, now: int) -> CoordinatorResult:
            out = TxnResult(response=answer(append_error_for_txn(error) if error else ErrorCode.NONE) if answer else None)
            if not error:
                current = self.transactions.get(tid)
                if current is not None:
                    out.markers.append(self._marker_job(current))
            return out

        return self._write(tid, TxnState.ONGOING, transit, done)

    # ================================================================ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions(
        self, tid: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition], now_ms: int
    ) -> TxnResult:
        """Add partitions to the transaction; the answer is an ``AddPartitionsToTxnResult``."""
        wanted = frozenset(partitions)

        def answer(error: int) -> Struct:
            return partition_results(tid, {tp: error for tp in wanted})

        return self._add(tid, producer_id, producer_epoch, wanted, now_ms, answer)

    def add_offsets(self, ctx: RequestContext, req: AddOffsetsToTxnRequest, now_ms: int) -> TxnResult:
        """The group's ``__consumer_offsets`` partition joins the transaction."""
        version = ctx.api_version
        partition = group_records.partition_for(req.group_id, self.config.offsets_topic_num_partitions)
        wanted = frozenset({(group_records.OFFSETS_TOPIC, partition)})

        def answer(error: int) -> Struct:
            return AddOffsetsToTxnResponse(error_code=fenced_for_version(error, version, 2))

        return self._add(req.transactional_id, req.producer_id, req.producer_epoch, wanted, now_ms, answer)

    def _add(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        wanted: frozenset[TopicPartition],
        now_ms: int,
        answer: Callable[[int], Struct],
    ) -> TxnResult:
        self._now_ms = now_ms
        error, txn = self._check_producer(tid, producer_id, producer_epoch)
        if error:
            return TxnResult(response=answer(error))
        assert txn is not None
        state = txn.state
        if state.is_prepared:
            return TxnResult(response=answer(ErrorCode.CONCURRENT_TRANSACTIONS))
        if state is TxnState.ONGOING and wanted <= txn.partitions:
            return TxnResult(response=answer(ErrorCode.NONE))
        starting = state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        transit = txn.transit(
            state=TxnState.ONGOING,
            partitions=frozenset(txn.partitions) | wanted,
            start_ms=now_ms if starting else txn.start_ms,
            last_update_ms=now_ms,
        )

        def done(error: int, now: int) -> CoordinatorResult:
            return TxnResult(response=answer(append_error_for_txn(error) if error else ErrorCode.NONE))

        return self._write(tid, state, transit, done)

    def verify_partitions(
        self, tid: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> AddPartitionsToTxnResult:
        """AddPartitionsToTxn v4+ with verify_only: are these partitions in the transaction?"""
        wanted = list(partitions)
        if not tid:
            return partition_results(tid, {tp: ErrorCode.INVALID_REQUEST for tp in wanted})
        error, txn = self._check_producer(tid, producer_id, producer_epoch, check_in_flight=False)
        if not error and txn is not None and txn.state.is_prepared:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error or txn is None:
            return partition_results(tid, {tp: error for tp in wanted})
        return partition_results(
            tid, {tp: ErrorCode.NONE if tp in txn.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in wanted}
        )

    def _check_producer(
        self, tid: str, producer_id: int, producer_epoch: int, *, check_in_flight: bool = True
    ) -> tuple[int, TransactionMetadata | None]:
        if not tid:
            return ErrorCode.INVALID_REQUEST, None
        if code := self.ownership.key_unavailable(tid):
            return code, None
        txn = self.transactions.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        if check_in_flight and tid in self._in_flight:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        return ErrorCode.NONE, txn

    # ================================================================ EndTxn

    def end_txn(self, ctx: RequestContext, req: EndTxnRequest, now_ms: int) -> TxnResult:
        self._now_ms = now_ms
        version = ctx.api_version

        def answer(error: int) -> TxnResult:
            return TxnResult(response=EndTxnResponse(error_code=fenced_for_version(error, version, 2)))

        tid = req.transactional_id
        error, txn = self._check_producer(tid, req.producer_id, req.producer_epoch)
        if error:
            return answer(error)
        assert txn is not None
        commit = req.committed
        state = txn.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            transit = txn.transit(state=target, last_update_ms=now_ms)

            def done(error: int, now: int) -> CoordinatorResult:
                if error:
                    return answer(append_error_for_txn(error))
                out = answer(ErrorCode.NONE)
                current = self.transactions.get(tid)
                if current is not None:
                    out.markers.append(self._marker_job(current))
                return out

            return self._write(tid, state, transit, done)
        if state is TxnState.COMPLETE_COMMIT:
            return answer(ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE)
        if state is TxnState.COMPLETE_ABORT:
            return answer(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE)
        if state is TxnState.PREPARE_COMMIT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if state is TxnState.PREPARE_ABORT:
            return answer(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)  # Empty: nothing to end

    # ================================================================ markers and completion

    def _marker_job(self, txn: TransactionMetadata) -> MarkerJob:
        tid = txn.transactional_id
        commit = txn.state is TxnState.PREPARE_COMMIT
        pid, epoch = txn.producer_id, txn.producer_epoch
        return MarkerJob(
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            commit=commit,
            coordinator_epoch=self.coordinator_epoch(self.partition_for(tid)),
            partitions=frozenset(txn.partitions),
            on_written=lambda now: self.complete(tid, pid, epoch, commit, now),
        )

    def complete(self, tid: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> TxnResult:
        """Every marker is written: CompleteCommit / CompleteAbort (retried until durable)."""
        self._now_ms = now_ms
        txn = self.transactions.get(tid)
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if (
            txn is None
            or txn.state is not prepared
            or txn.producer_id != producer_id
            or txn.producer_epoch != producer_epoch
        ):
            return TxnResult()  # completed already (a retry, or loading found it done)
        if tid in self._in_flight:
            self._retry_complete(tid, producer_id, producer_epoch, commit)
            return TxnResult()
        transit = txn.transit(
            state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            partitions=frozenset(),
            last_update_ms=now_ms,
        )

        def done(error: int, now: int) -> CoordinatorResult:
            if error:
                log.warning("transactional id %s: writing its completion failed (error %s), retrying", tid, error)
                self._retry_complete(tid, producer_id, producer_epoch, commit)
            return TxnResult()

        return self._write(tid, prepared, transit, done)

    def _retry_complete(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self.timer.schedule(
            COMPLETE_RETRY_KEY + tid,
            COMPLETE_RETRY_MS,
            lambda now: self.complete(tid, producer_id, producer_epoch, commit, now),
        )

    # ================================================================ timers

    def _abort_timed_out(self, tid: str, start_ms: int, epoch: int, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        txn = self.transactions.get(tid)
        if (
            txn is None
            or txn.state is not TxnState.ONGOING
            or txn.start_ms != start_ms
            or txn.producer_epoch != epoch
        ):
            return TxnResult()
        if tid in self._in_flight:
            # Something is being written for it: look again shortly.
            self.timer.schedule(TIMEOUT_KEY + tid, COMPLETE_RETRY_MS, lambda now: self._abort_timed_out(tid, start_ms, epoch, now))
            return TxnResult()
        log.info("transactional id %s: transaction timed out after %s ms, aborting", tid, txn.timeout_ms)
        return self._fence_and_abort(txn, now_ms, None)

    def _expire(self, tid: str, last_update_ms: int, now_ms: int) -> CoordinatorResult:
        self._now_ms = now_ms
        txn = self.transactions.get(tid)
        if txn is None or not txn.state.expiration_allowed or txn.last_update_ms != last_update_ms:
            return TxnResult()
        if tid in self._in_flight:
            return TxnResult()
        check_transition(tid, txn.state, TxnState.DEAD)
        log.info("transactional id %s expired after %s ms idle", tid, self.config.transactional_id_expiration_ms)
        self._in_flight.add(tid)

        def after_append(error: int, now: int) -> CoordinatorResult:
            self._in_flight.discard(tid)
            current = self.transactions.get(tid)
            if error and current is not None:
                self._arm(current, now)  # try again later
            return TxnResult()

        record = Record(self.partition_for(tid), tr.encode_key(tid), None)
        return TxnResult(records=[record], after_append=after_append)

    # ================================================================ DescribeTransactions / ListTransactions

    def describe_transactions(self, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        return describe.describe_transactions(self.transactions, req, unavailable=self.ownership.key_unavailable)

    def list_transactions(self, ctx: RequestContext, req: ListTransactionsRequest, now_ms: int) -> ListTransactionsResponse:
        return describe.list_transactions(
            self.transactions, req, ctx.api_version, now_ms, loading=self.ownership.is_loading
        )

    # ================================================================ inspection

    def transaction(self, tid: str) -> TransactionMetadata | None:
        return self.transactions.get(tid)
