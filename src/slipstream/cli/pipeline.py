"""``slipstream pipeline ...``: packaged Spark pipelines and their demo data.

    slipstream pipeline list
    slipstream pipeline demo-data [--count N] [--rate R] ...
    slipstream pipeline run pageview-stats [--available-now] ...
    slipstream pipeline script      # the file to give spark-submit

Running a pipeline needs pyspark (``pip install 'slipstream[spark]'``); the
command makes a ``local[*]`` session unless it runs under spark-submit.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..spark.pipelines import PIPELINES

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_commands(sub: Sub) -> None:
    pipeline = sub.add_parser(
        "pipeline",
        help="packaged Spark pipelines (run, demo-data, list)",
        description="Packaged data pipelines on Apache Spark (PySpark), reading and writing "
        "through the slipstream data source.",
    )
    psub = pipeline.add_subparsers(dest="pipeline_command", metavar="ACTION", required=True)

    p = psub.add_parser("list", help="the packaged pipelines")
    p.set_defaults(func=_list)

    run = psub.add_parser("run", help="run a packaged pipeline")
    rsub = run.add_subparsers(dest="pipeline_name", metavar="PIPELINE", required=True)
    for name, spec in PIPELINES.items():
        module = spec.load()
        rp = rsub.add_parser(name, help=module.DESCRIPTION, description=(module.__doc__ or "").strip(),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(rp)
        rp.set_defaults(func=_run, pipeline_module=module)

    p = psub.add_parser(
        "demo-data",
        help="produce demo JSON page views (input of pageview-stats)",
        description="Produce JSON page-view events {page, user, ts} keyed by user.",
    )
    p.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, help=f"default {DEFAULT_BOOTSTRAP}")
    p.add_argument("--topic", default="pageviews", help="default pageviews (created if missing)")
    p.add_argument("--partitions", type=int, default=3, help="partitions when the topic is created (default 3)")
    p.add_argument("--count", type=int, default=10_000, help="events to produce (default 10000; 0: until Ctrl-C)")
    p.add_argument("--rate", type=float, default=0.0, help="events per second (default 0: as fast as possible)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--start",
        help="event time of the first event (ISO 8601, e.g. 2025-01-01T00:00:00Z, or epoch ms); "
        "events are --step-ms apart. Default: a --count batch ends at the current time (so a first "
        "windowed run closes windows); with --rate or --count 0, the wall clock at production",
    )
    p.add_argument("--step-ms", type=int, default=100, help="event-time distance between events (default 100)")
    p.set_defaults(func=_demo_data)

    p = psub.add_parser("script", help="print the path of the spark-submit entry script")
    p.set_defaults(func=_script)


def _list(args: argparse.Namespace) -> int:
    for name, spec in PIPELINES.items():
        print(f"{name}\t{spec.load().DESCRIPTION}")
    return 0


def _script(args: argparse.Namespace) -> int:
    # The script is package data to spark-submit: found by path, not imported (it imports
    # the CLI itself, and runs it only as __main__).
    from importlib.resources import files

    print(files("slipstream.cli").joinpath("spark_submit.py"))
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("slipstream pipeline: pyspark is not installed: pip install 'slipstream[spark]'", file=sys.stderr)
        return 1
    return int(args.pipeline_module.run_from_args(args))


def parse_start(text: str) -> int:
    """Epoch milliseconds from ``text``: digits (epoch ms) or ISO 8601 (naive means UTC)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--start must be ISO 8601 (2025-01-01T00:00:00Z) or epoch ms, not {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _demo_data(args: argparse.Namespace) -> int:
    from ..protocol.errors import KafkaError
    from ..spark.pipelines.demo import produce_demo_data

    try:
        produce_demo_data(
            args.bootstrap_server,
            args.topic,
            count=args.count or None,
            rate=args.rate,
            seed=args.seed,
            start_ms=parse_start(args.start) if args.start else None,
            step_ms=args.step_ms,
            partitions=args.partitions,
        )
    except KafkaError as exc:
        print(f"slipstream pipeline demo-data: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
