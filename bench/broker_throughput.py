#!/usr/bin/env python3
"""Slipstream against two Rust Kafka-compatible brokers (Tansu, noida-db) in one run.

    python bench/broker_throughput.py            # full run, a few minutes
    python bench/broker_throughput.py --quick    # smoke run, under a minute

Measures, for every broker, with confluent-kafka (librdkafka) as the client:

* produce throughput (acks=all, idempotence on where the broker accepts it) and
  consume throughput (assign every partition from the beginning, no commits),
  100-byte and 1 KiB values, 1 and 8 partitions, with Slipstream/peer ratios; the
  median of ``--runs`` runs (5) per test, with the slowest and fastest run and the
  per-run ratios, so the noise shows;
* bytes received per Fetch in each consume test (librdkafka's statistics);
* the broker's CPU seconds per million records in each test (user + system time of
  the broker process across the test's timed part: the client shares the cores, so a
  cheaper broker leaves more of them to the client);
* a ceiling: the same client against ``bench/stub_broker.py``, a stub that answers
  without storing anything, i.e. about the most the client can do on this machine;
* process start-up: spawn -> first answer to a raw Metadata request (median);
* Slipstream's in-process start (``Broker(storage="memory", port=0)``);
* peak resident memory of each broker process, and its RSS after 200k x 1 KiB.

Brokers run as subprocesses listening on 127.0.0.1 only. Start-up and the memory
measurement run one broker at a time. The throughput tests start every broker at once
and keep each stopped (SIGSTOP) but for its turns: in each run of each test every broker
produces in turn, then every broker consumes in turn, the order rotated each run, so
the rates a ratio compares are taken seconds apart and a burst of load elsewhere on the
machine hits them alike, while work a broker defers past its answers stays in its own
turns. Each run's topic is deleted on every broker once all have consumed it.
Every wait is bounded and every process is killed on exit.
Progress goes to stderr; the Markdown report (paste into the README) to stdout.
``--profile DIR`` also records Slipstream's throughput phase with py-spy (a flame graph
SVG and the raw collapsed stacks in DIR); no broker is stopped between turns then.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from broker_report import report
from broker_runs import (
    CEILING,
    DEFAULT_PARTITION_COUNTS,
    DEFAULT_VALUE_SIZES,
    BrokerResult,
    Options,
    ceiling_spec,
    measure_memory,
    measure_startup,
    measure_throughput,
)
from embedded_start import EmbeddedResult, measure_embedded
from harness import discover_brokers, load_average, log, on_signal, work_directory


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Produce/consume throughput, start-up time and memory of Slipstream"
        " compared with Tansu and noida-db (confluent-kafka client). Prints Markdown."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: few thousand messages")
    parser.add_argument(
        "--messages",
        type=int,
        help="messages per test (default 1000000 for 100 B values, 300000 for 1 KiB; quick 5000)",
    )
    parser.add_argument(
        "--rss-messages",
        type=int,
        help="1 KiB messages written before reading RSS (default 200000; quick 20000)",
    )
    parser.add_argument(
        "--runs",
        "--repeat",
        dest="repeat",
        type=int,
        help="runs of each test, the median reported (default 5; quick 1)",
    )
    parser.add_argument(
        "--startup-runs", type=int, help="process starts to time (default 7; quick 3)"
    )
    parser.add_argument(
        "--embedded-runs", type=int, help="embedded starts to time (default 15; quick 5)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds allowed per produce/consume phase (default 180; quick 60)",
    )
    parser.add_argument(
        "--brokers",
        default=f"slipstream,tansu,noida-db,{CEILING}",
        help=f"comma-separated subset of slipstream,tansu,noida-db,{CEILING}",
    )
    parser.add_argument(
        "--sizes",
        type=_int_list,
        default=DEFAULT_VALUE_SIZES,
        help="value sizes (default 100,1024)",
    )
    parser.add_argument(
        "--partitions",
        type=_int_list,
        default=DEFAULT_PARTITION_COUNTS,
        help="partition counts (default 1,8)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="record Slipstream's throughput phase with py-spy into DIR (SVG + raw stacks)",
    )
    args = parser.parse_args(argv)
    for name in ("messages", "rss_messages", "repeat", "startup_runs", "embedded_runs"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    with work_directory("slipstream-bench-", args.keep) as workdir:
        opts = Options(
            messages=args.messages or (5_000 if quick else None),
            rss_messages=args.rss_messages or (20_000 if quick else 200_000),
            startup_runs=args.startup_runs or (3 if quick else 7),
            embedded_runs=args.embedded_runs or (5 if quick else 15),
            timeout=args.timeout or (60.0 if quick else 180.0),
            workdir=workdir,
            repeat=args.repeat or (1 if quick else 5),
            sizes=args.sizes,
            partitions=args.partitions,
            profile_dir=args.profile,
        )
        wanted = [b.strip() for b in args.brokers.split(",") if b.strip()]
        began = time.perf_counter()
        load_start = load_average()
        specs, missing = discover_brokers([b for b in wanted if b != CEILING])
        if CEILING in wanted:
            specs.append(ceiling_spec())
        results = [BrokerResult(spec) for spec in specs]
        embedded: EmbeddedResult | None = None
        # Start-up first, each broker alone on the machine.
        for result in results:
            spec = result.spec
            if spec.key == CEILING:  # started once, untimed: its start-up says nothing
                log(f"{spec.label_and_version}: one start, not timed")
            else:
                log(f"{spec.label_and_version}: start-up x{opts.startup_runs}")
            measure_startup(spec, opts, result)
            if result.startup_error is not None:
                log(f"{spec.label}: start-up FAILED: {result.startup_error}")
            if spec.key == "slipstream":
                log(f"Slipstream: embedded start x{opts.embedded_runs + 1}")
                embedded = measure_embedded(opts.embedded_runs, workdir, 120.0)
        started = [r for r in results if r.startup_error is None]
        log(f"throughput, {', '.join(r.spec.label for r in started)} taking turns")
        measure_throughput(started, opts)
        for result in started:
            if result.spec.key != CEILING:  # the stub keeps nothing: its memory says nothing
                log(f"{result.spec.label}: memory, {opts.rss_messages:,} x 1 KiB")
                measure_memory(result.spec, opts, result)
        print(report(results, embedded, opts, missing, time.perf_counter() - began, load_start))
        failed = any(r.errors for r in results) or (embedded is not None and embedded.error)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
