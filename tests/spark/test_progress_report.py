"""Progress lines: the arrival rate is shown only once Spark has measured one."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from slipstream.spark.progress import BatchReport, GroupProgressListener


def progress(run_id: str, batch_id: int, input_rate: float | None) -> Any:
    return SimpleNamespace(
        name="q",
        id="query-id",
        runId=run_id,
        batchId=batch_id,
        numInputRows=100,
        batchDuration=1000,
        inputRowsPerSecond=input_rate,
        processedRowsPerSecond=100.0,
        sources=[SimpleNamespace(endOffset='{"t": {"0": 100}}')],
    )


def test_first_batch_of_a_run_has_no_arrival_rate() -> None:
    listener = GroupProgressListener("127.0.0.1:1", None)
    assert listener._input_rate(progress("run-1", 0, 0.0)) is None
    assert listener._input_rate(progress("run-1", 1, 250.0)) == 250.0
    # A restart is a new run: its first batch again has nothing to measure against.
    assert listener._input_rate(progress("run-2", 2, 0.0)) is None
    assert listener._input_rate(progress("run-2", 3, math.nan)) is None
    assert listener._input_rate(progress("run-2", 4, 12.0)) == 12.0


def test_line_omits_an_unknown_rate() -> None:
    base = dict(query="q", batch_id=0, rows=100, duration_ms=1000, process_rate=100.0, lag=0, end_offsets={})
    assert "arriving" not in BatchReport(input_rate=None, **base).line()  # type: ignore[arg-type]
    assert "250 rows/s arriving" in BatchReport(input_rate=250.0, **base).line()  # type: ignore[arg-type]
