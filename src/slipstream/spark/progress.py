"""Consumer-group progress for streaming queries, and a one-line report per micro-batch.

The ``slipstream`` stream reader commits a batch's end offsets to ``group.id`` when
Spark plans the next batch (which also covers the final batch of an availableNow
query). For a long-running query that is stopped between triggers, the last
batch would only be committed at the next start; ``GroupProgressListener`` closes
that gap: on every progress event it commits the source's end offsets at once
(standalone OffsetCommit), and it can print a progress line (rows, rate, lag).

    spark.streams.addListener(GroupProgressListener("127.0.0.1:9092", "my-job"))
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from ..client.admin import Admin
from ..client.log_offsets_admin import LATEST
from . import kafka_io
from .options import OffsetMap, OptionError, offsets_from_json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchReport:
    query: str
    batch_id: int
    rows: int
    duration_ms: int
    # None when Spark has nothing to measure it against: the first batch of a run
    # (no earlier trigger) reports 0 rows/s arriving whatever arrived.
    input_rate: float | None
    process_rate: float
    lag: int | None
    end_offsets: OffsetMap

    def line(self) -> str:
        lag = "?" if self.lag is None else str(self.lag)
        arriving = "" if self.input_rate is None else f", {self.input_rate:,.0f} rows/s arriving"
        return (
            f"[{self.query}] batch {self.batch_id}: {self.rows} rows in {self.duration_ms / 1000:.2f} s "
            f"({self.process_rate:,.0f} rows/s processed{arriving}), lag {lag}"
        )


def source_offsets(progress: Any) -> OffsetMap | None:
    """The end offsets of the first source in ``progress`` whose offsets are ours, else None."""
    for source in progress.sources:
        text = source.endOffset
        if not text:
            continue
        try:
            data = json.loads(text)
            return offsets_from_json(data, what="endOffset")
        except (ValueError, OptionError, TypeError):
            continue
    return None


class GroupProgressListener(StreamingQueryListener):
    """Commit each completed micro-batch's end offsets to ``group_id``; optionally report it.

    ``query_name``: only act on the query with this name (None: every query whose
    source offsets look like the slipstream source's). ``report``: called with a
    ``BatchReport`` per batch (e.g. ``lambda r: print(r.line())``); the lag is read
    from the brokers only when ``report`` is given.
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str | None,
        *,
        query_name: str | None = None,
        report: Callable[[BatchReport], None] | None = None,
        client_id: str = "slipstream-spark-listener",
    ) -> None:
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.query_name = query_name
        self.report = report
        self.client_id = client_id
        self.committed: OffsetMap = {}
        self.reports: list[BatchReport] = []
        self.errors: list[str] = []
        # Query runs (a start or restart of a query) whose first batch was reported.
        self._runs_seen: set[str] = set()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            self._progress(event.progress)
        except Exception as exc:  # never let a listener error disturb the query
            self.errors.append(str(exc))
            log.warning("slipstream progress listener: %s", exc)

    def _progress(self, progress: Any) -> None:
        if self.query_name is not None and progress.name != self.query_name:
            return
        end = source_offsets(progress)
        if end is None:
            return
        if self.group_id and end and end != self.committed:
            kafka_io.commit_offsets_sync(self.bootstrap, self.group_id, end, client_id=self.client_id)
            self.committed = dict(end)
        if self.report is None:
            return
        lag = None
        if end:
            try:
                latest = kafka_io.run(
                    self.bootstrap, lambda admin: _latest(admin, sorted(end)), client_id=self.client_id
                )
                lag = sum(max(0, latest[tp] - end[tp]) for tp in end)
            except Exception as exc:
                log.warning("slipstream progress listener: cannot read log end offsets: %s", exc)
        report = BatchReport(
            query=progress.name or str(progress.id)[:8],
            batch_id=progress.batchId,
            rows=progress.numInputRows,
            duration_ms=progress.batchDuration,
            input_rate=self._input_rate(progress),
            process_rate=float(progress.processedRowsPerSecond or 0.0),
            lag=lag,
            end_offsets=end,
        )
        self.reports.append(report)
        self.report(report)

    def _input_rate(self, progress: Any) -> float | None:
        run = str(progress.runId)
        first = run not in self._runs_seen
        self._runs_seen.add(run)
        rate = progress.inputRowsPerSecond
        if first or rate is None or math.isnan(rate):
            return None
        return float(rate)


async def _latest(admin: Admin, tps: list[tuple[str, int]]) -> OffsetMap:
    return await kafka_io.log_offsets(admin, tps, LATEST)


def print_report(report: BatchReport) -> None:
    print(report.line(), file=sys.stdout, flush=True)
