"""A test context for the transaction coordinator: requests at a manual time, results
carried out like the broker's adapter (records appended to an in-memory log and
replayed, then ``after_append``; marker jobs kept until the test writes them)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from slipstream.coordinator import CoordinatorResult, ManualTimer, Record, RequestContext
from slipstream.coordinator.transactions import (
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnResult,
    TxnState,
)
from slipstream.protocol.apis.add_offsets_to_txn import AddOffsetsToTxnRequest
from slipstream.protocol.apis.end_txn import EndTxnRequest
from slipstream.protocol.apis.init_producer_id import InitProducerIdRequest
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.schema import Struct

TIMEOUT_MS = 60_000
CONFIG = TxnConfig(transaction_max_timeout_ms=900_000, transactional_id_expiration_ms=3_600_000)


@dataclass
class TxnContext:
    config: TxnConfig = CONFIG
    start_ms: int = 1_000_000
    log: list[Record] = field(default_factory=list)
    markers: list[MarkerJob] = field(default_factory=list)
    # Error the next appends fail with (0: they succeed).
    fail_appends: int = 0
    producer_ids: Any = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.timer = ManualTimer(start_ms=self.start_ms)
        self.coordinator = TransactionCoordinator(
            self.config, timer=self.timer, allocate_producer_id=lambda: next(self.producer_ids)
        )

    @property
    def now(self) -> int:
        return self.timer.now_ms

    # ---- carrying out

    def run(self, result: CoordinatorResult) -> Struct | None:
        response = result.response
        while True:
            if isinstance(result, TxnResult):
                self.markers.extend(result.markers)
            error = ErrorCode.NONE
            if result.records:
                if self.fail_appends:
                    error = self.fail_appends
                else:
                    for record in result.records:
                        self.log.append(record)
                        self.coordinator.apply(record, self.now)
            if result.after_append is None:
                return response
            result = result.after_append(error, self.now)
            if result.response is not None:
                response = result.response

    def advance(self, ms: int) -> None:
        self.timer.advance(ms, on_fired=lambda fired: self.run(fired.result))

    def write_markers(self) -> list[MarkerJob]:
        jobs, self.markers = self.markers, []
        for job in jobs:
            self.run(job.on_written(self.now))
        return jobs

    # ---- requests

    def init(
        self, tid: str = "t1", timeout_ms: int = TIMEOUT_MS, producer_id: int = -1, producer_epoch: int = -1, version: int = 5
    ) -> Any:
        req = InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=producer_id, producer_epoch=producer_epoch
        )
        return self.run(self.coordinator.init_producer_id(RequestContext(version), req, self.now))

    def add(self, tid: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> dict[tuple[str, int], int]:
        result = self.run(self.coordinator.add_partitions(tid, pid, epoch, partitions, self.now))
        assert result is not None
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in result.topic_results  # type: ignore[attr-defined]
            for p in t.results_by_partition
        }

    def add_error(self, tid: str, pid: int, epoch: int, *partitions: tuple[str, int]) -> int:
        errors = set(self.add(tid, pid, epoch, *partitions).values())
        assert len(errors) == 1, errors
        return errors.pop()

    def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 4) -> int:
        req = AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)
        response = self.run(self.coordinator.add_offsets(RequestContext(version), req, self.now))
        return response.error_code  # type: ignore[union-attr]

    def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 4) -> int:
        req = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
        response = self.run(self.coordinator.end_txn(RequestContext(version), req, self.now))
        return response.error_code  # type: ignore[union-attr]

    def state(self, tid: str = "t1") -> TxnState | None:
        txn = self.coordinator.transaction(tid)
        return None if txn is None else txn.state

    def reload(self) -> TxnContext:
        """A new coordinator that loads this context's log (a restart)."""
        fresh = TxnContext(config=self.config, start_ms=self.now, producer_ids=itertools.count(5000))
        fresh.log = list(self.log)
        fresh.coordinator.begin_loading()
        for record in fresh.log:
            fresh.coordinator.replay(record.key, record.value, fresh.now)
        fresh.run(fresh.coordinator.finish_loading(fresh.now))
        return fresh
