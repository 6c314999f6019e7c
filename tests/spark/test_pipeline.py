"""The packaged pageview-stats pipeline on a fixed input."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import group_lag, unique

from slipstream.cli import build_parser
from slipstream.spark.pipelines import pageview_stats
from slipstream.spark.pipelines.demo import demo_events, produce_demo_data
from slipstream.spark.pipelines.pageview_stats import PageviewStatsConfig, run

pytestmark = pytest.mark.spark

START_MS = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)
COUNT = 3000
STEP_MS = 100  # 3000 events over 5 minutes of event time


def expected_counts() -> Counter[tuple[int, str]]:
    """Views per (window start ms, page) for the windows the watermark has closed.

    The last event is at 4:59.9; with a 1 minute watermark, windows ending at or
    before 3:59.9 are final: minutes 0, 1 and 2.
    """
    counts: Counter[tuple[int, str]] = Counter()
    events = list(demo_events(COUNT, seed=7, start_ms=START_MS, step_ms=STEP_MS))
    watermark = max(e["ts"] for e in events) - 60_000
    for e in events:
        window = e["ts"] - (e["ts"] - START_MS) % 60_000
        if window + 60_000 <= watermark:
            counts[(window, e["page"])] += 1
    return counts


def test_pageview_stats_counts_a_fixed_input(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic, out_topic, group = unique("pageviews"), unique("pageview-stats"), unique("pageview-stats")
    sent = produce_demo_data(
        broker.bootstrap, topic, count=COUNT, seed=7, start_ms=START_MS, step_ms=STEP_MS, partitions=3
    )
    assert sent == COUNT
    cfg = PageviewStatsConfig(
        bootstrap=broker.bootstrap,
        input_topic=topic,
        output_topic=out_topic,
        group=group,
        output_dir=str(tmp_path / "out"),
        available_now=True,
        shuffle_partitions=2,
    )
    lines: list[str] = []
    result = run(spark, cfg, timeout_s=120, report=lambda r: lines.append(r.line()))
    want = expected_counts()
    assert len(want) == 3 * 8  # three closed minutes, eight pages each

    rows = spark.read.parquet(cfg.output_dir).collect()
    # Compare window starts as epoch ms computed by Spark (collect() gives local-time datetimes).
    epoch = {
        (row.start_ms, row.page): row.views
        for row in spark.read.parquet(cfg.output_dir)
        .selectExpr("unix_millis(window_start) as start_ms", "page", "views")
        .collect()
    }
    assert epoch == dict(want)
    assert len(rows) == len(want)  # each window's count written exactly once
    assert result.rows_in == COUNT
    assert result.rows_out == len(want)

    # The same counts went to the output topic as JSON, keyed by page.
    records = (
        spark.read.format("slipstream")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", out_topic)
        .load()
        .collect()
    )
    published = {}
    for rec in records:
        body = json.loads(rec.value)
        assert rec.key.decode() == body["page"]
        assert body["window_end"] - body["window_start"] == 60_000
        published[(body["window_start"], body["page"])] = body["views"]
    assert published == dict(want)

    # Progress: committed to the group, lag 0, one progress line per batch.
    lag = group_lag(broker.bootstrap, group)
    assert set(lag) == {(topic, 0), (topic, 1), (topic, 2)}
    assert all(partition_lag == 0 for _, partition_lag in lag.values())
    assert sum(committed or 0 for committed, _ in lag.values()) == COUNT
    assert lines and all("rows" in line and "lag 0" in line for line in lines)


def test_pipeline_command_line_parses() -> None:
    args = build_parser().parse_args(
        ["pipeline", "run", "pageview-stats", "-b", "h:1", "--available-now", "--output-topic", "", "--window", "5 minutes"]
    )
    assert args.pipeline_module is pageview_stats
    cfg = pageview_stats.config_from_args(argparse.Namespace(**vars(args)))
    assert (cfg.bootstrap, cfg.available_now, cfg.output_topic, cfg.window, cfg.group) == (
        "h:1", True, None, "5 minutes", "pageview-stats"
    )
    assert cfg.checkpoint == "pageview-stats-output-checkpoint"
