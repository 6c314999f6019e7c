"""The transactional half of the producer: init, begin, send offsets, commit, abort.

``ProducerTransactions`` drives a ``TransactionState`` (transactions.py: the Java
client's states and error classes) through the coordinator: InitProducerId fences
older producers with the same id, AddPartitionsToTxn registers each partition before
its first batch may go out (the accumulator holds it back until then), EndTxn commits
or aborts. Aborting past a sequence gap asks for a new epoch (KIP-360).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..protocol.apis.add_offsets_to_txn import SPEC as ADD_OFFSETS_TO_TXN
from ..protocol.apis.add_offsets_to_txn import AddOffsetsToTxnRequest
from ..protocol.apis.add_partitions_to_txn import SPEC as ADD_PARTITIONS_TO_TXN
from ..protocol.apis.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from ..protocol.apis.end_txn import SPEC as END_TXN
from ..protocol.apis.end_txn import EndTxnRequest
from ..protocol.apis.init_producer_id import SPEC as INIT_PRODUCER_ID
from ..protocol.apis.init_producer_id import InitProducerIdRequest
from ..protocol.apis.txn_offset_commit import SPEC as TXN_OFFSET_COMMIT
from ..protocol.apis.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from ..protocol.errors import ErrorCode, KafkaError
from .accumulator import ProducerBatch, RecordAccumulator
from .cluster import Cluster
from .producer_config import ProducerConfig
from .producer_types import ProducerError
from .retry import Backoff
from .transactions import (
    KEY_TYPE_GROUP,
    ConsumerGroupMetadata,
    TransactionAbortedError,
    TransactionCoordinatorClient,
    TransactionError,
    TransactionState,
    TxnState,
    classify,
)

# AddPartitionsToTxn v4+ is the brokers' batched form; producers send v3 at most.
CLIENT_ADD_PARTITIONS_MAX_VERSION = 3

log = logging.getLogger("slipstream.client.producer")


class ProducerTransactions:
    """One transactional id's transactions, on the producer's accumulator.

    ``flush``, ``finish`` (fail a batch released from the accumulator) and ``wake``
    (nudge the sender) are the producer's; ``is_started`` says whether it runs.
    """

    def __init__(
        self,
        config: ProducerConfig,
        cluster: Cluster,
        backoff: Backoff,
        acc: RecordAccumulator,
        *,
        is_started: Callable[[], bool],
        flush: Callable[[float | None], Awaitable[None]],
        finish: Callable[[ProducerBatch, BaseException], None],
        wake: Callable[[], None],
    ) -> None:
        assert config.transactional_id is not None
        self.transactional_id: str = config.transactional_id
        self.timeout_ms = int(config.transaction_timeout_ms)
        self._max_block_ms = float(config.max_block_ms)
        self._delivery_timeout_ms = float(config.delivery_timeout_ms)
        self.state = TransactionState(config.transactional_id)
        self.client = TransactionCoordinatorClient(cluster, config.transactional_id, backoff)
        self.adding: asyncio.Task[None] | None = None
        """The AddPartitionsToTxn under way, if any."""
        self._acc = acc
        self._is_started = is_started
        self._flush = flush
        self._finish = finish
        self._wake = wake
        acc.transactional = True
        acc.txn_partitions = set()

    def _ready(self) -> tuple[TransactionState, TransactionCoordinatorClient]:
        if not self._is_started():
            raise ProducerError("the producer is not started: call `await producer.start()`")
        return self.state, self.client

    def _timeout_s(self, timeout: float | None) -> float:
        return self._max_block_ms / 1000 if timeout is None else timeout

    async def init(self, timeout: float | None = None) -> None:
        """Register the transactional id: a new producer id/epoch, fencing any older producer
        with the same id (its unfinished transaction is aborted first)."""
        txn, client = self._ready()
        txn.transition(TxnState.INITIALIZING)
        tid, timeout_ms = self.transactional_id, self.timeout_ms

        def build(version: int) -> InitProducerIdRequest:
            return InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms)

        response = await client.call(
            INIT_PRODUCER_ID, build, lambda r: r.error_code, what="InitProducerId",
            timeout_s=self._timeout_s(timeout),
        )
        if response.error_code:
            raise txn.fail(classify(response.error_code, f"init_transactions for {tid!r}"))
        self._acc.reset_producer(int(response.producer_id), int(response.producer_epoch))
        txn.transition(TxnState.READY)
        log.info("transactional id %s: producer id %s epoch %s", tid, response.producer_id, response.producer_epoch)

    def begin(self) -> None:
        txn = self._ready()[0]
        txn.require(TxnState.READY, what="begin_transaction")
        txn.transition(TxnState.IN_TRANSACTION)
        self._acc.txn_partitions = set()

    async def add_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for partitions with queued batches; they may be sent after it."""
        txn, client = self._ready()
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)

        def build(version: int) -> AddPartitionsToTxnRequest:
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            )

        def first_error(response: Any) -> int:
            for topic in response.results_by_topic_v3_and_below:
                for p in topic.results_by_partition:
                    if p.partition_error_code and p.partition_error_code != ErrorCode.OPERATION_NOT_ATTEMPTED:
                        return int(p.partition_error_code)
            return ErrorCode.NONE

        try:
            response = await client.call(
                ADD_PARTITIONS_TO_TXN, build, first_error, what="AddPartitionsToTxn",
                timeout_s=self._delivery_timeout_ms / 1000,
                max_version=CLIENT_ADD_PARTITIONS_MAX_VERSION,
            )
            error = first_error(response)
            if error:
                raise classify(error, f"adding {sorted(partitions)} to the transaction")
            gate = self._acc.txn_partitions
            if gate is not None:
                gate.update(partitions)
            txn.partitions.update(partitions)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = txn.fail(exc if isinstance(exc, KafkaError) else KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(exc)))
            log.warning("transactional id %s: %s", self.transactional_id, failure)
            # Every queued batch fails with it: the transaction can only be aborted now
            # (the Java client fails them the same way).
            for batch in self._acc.abort_all():
                self._finish(batch, failure)
        finally:
            self.adding = None
            self._wake()

    async def send_offsets(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets ({(topic, partition): next offset to read})
        as part of the transaction: visible to the group only if the transaction commits."""
        txn, client = self._ready()
        txn.require(TxnState.IN_TRANSACTION, what="send_offsets_to_transaction")
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        group = group_metadata.group_id
        timeout_s = self._timeout_s(timeout)
        try:
            response = await client.call(
                ADD_OFFSETS_TO_TXN,
                lambda v: AddOffsetsToTxnRequest(
                    transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, group_id=group
                ),
                lambda r: r.error_code,
                what="AddOffsetsToTxn",
                timeout_s=timeout_s,
            )
            if response.error_code:
                raise classify(response.error_code, f"adding group {group!r}'s offsets to the transaction")
            txn.offsets_added = True
            by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
            for (topic, partition), offset in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(
                    TxnOffsetCommitRequestPartition(
                        partition_index=partition, committed_offset=int(offset), committed_metadata=""
                    )
                )

            def build(version: int) -> TxnOffsetCommitRequest:
                return TxnOffsetCommitRequest(
                    transactional_id=self.transactional_id,
                    group_id=group,
                    producer_id=pid,
                    producer_epoch=epoch,
                    generation_id=group_metadata.generation_id,
                    member_id=group_metadata.member_id,
                    group_instance_id=group_metadata.group_instance_id,
                    topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                )

            def first_error(response: Any) -> int:
                for topic in response.topics:
                    for p in topic.partitions:
                        if p.error_code:
                            return int(p.error_code)
                return ErrorCode.NONE

            committed = await client.call(
                TXN_OFFSET_COMMIT, build, first_error, what="TxnOffsetCommit", timeout_s=timeout_s,
                key_type=KEY_TYPE_GROUP, key=group,
            )
            error = first_error(committed)
            if error:
                # A zombie member or a stale generation: abortable (Java's CommitFailedException).
                raise classify(error, f"committing group {group!r}'s offsets in the transaction", fenced_is_fatal=False)
        except TransactionError as exc:
            raise txn.fail(exc) from None
        except TimeoutError:
            raise
        except KafkaError as exc:
            raise txn.fail(exc) from None

    async def commit(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). Raises the
        transaction's error if a record or the commit failed."""
        txn = self._ready()[0]
        txn.require(TxnState.IN_TRANSACTION, TxnState.COMMITTING, what="commit_transaction")
        txn.transition(TxnState.COMMITTING)
        await self._flush(self._timeout_s(timeout))
        while self.adding is not None:
            await asyncio.sleep(0.005)
        if txn.state is TxnState.ABORTABLE_ERROR or txn.state is TxnState.FATAL_ERROR:
            assert txn.error is not None
            raise txn.error
        await self._end(commit=True, timeout=timeout)

    async def abort(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail, what was written is aborted."""
        txn = self._ready()[0]
        txn.require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING, what="abort_transaction")
        txn.transition(TxnState.ABORTING)
        aborted = TransactionAbortedError()
        for batch in self._acc.abort_all():
            if batch.base_sequence >= 0:
                self._acc.request_bump()
            self._finish(batch, aborted)
        while self.adding is not None:
            await asyncio.sleep(0.005)
        await self._flush(self._timeout_s(timeout))  # what is in flight lands (and is aborted)
        await self._end(commit=False, timeout=timeout)
        if self._acc.bump_pending and txn.state is TxnState.READY:
            await self._bump_epoch(timeout)

    async def _end(self, *, commit: bool, timeout: float | None) -> None:
        txn, client = self._ready()
        what = "commit_transaction" if commit else "abort_transaction"
        if txn.has_work:
            pid, epoch = self._acc.producer_id, self._acc.producer_epoch
            response = await client.call(
                END_TXN,
                lambda v: EndTxnRequest(
                    transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit
                ),
                lambda r: r.error_code,
                what="EndTxn",
                timeout_s=self._timeout_s(timeout),
            )
            if response.error_code:
                raise txn.fail(classify(response.error_code, what))
        txn.transition(TxnState.READY)
        self._acc.txn_partitions = set()

    async def _bump_epoch(self, timeout: float | None) -> None:
        """After aborting past a sequence gap: a new epoch (KIP-360) so sequences restart."""
        txn, client = self._ready()
        pid, epoch = self._acc.producer_id, self._acc.producer_epoch
        tid, timeout_ms = self.transactional_id, self.timeout_ms
        response = await client.call(
            INIT_PRODUCER_ID,
            lambda v: InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
            ),
            lambda r: r.error_code,
            what="InitProducerId",
            timeout_s=self._timeout_s(timeout),
        )
        if response.error_code:
            raise txn.fail(classify(response.error_code, "bumping the epoch after an abort"))
        self._acc.reset_producer(int(response.producer_id), int(response.producer_epoch))
