"""The Markdown report of broker_throughput.py: the throughput table with Slipstream/peer
ratios, broker CPU per million records, start-up and memory, and the failures."""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys

import confluent_kafka
from broker_runs import CEILING, BrokerResult, Cell, Options, count_for, each_test
from embedded_start import EmbeddedResult
from harness import MB, load_average, mark, ms

# Seconds below which a timed part (a --quick run's) is too short for its rate to mean much.
SHORT_WINDOW = 0.1


def header_lines(header: list[str]) -> list[str]:
    """A table's header and separator: the first column left, the figures right-aligned."""
    return [row_line(header), "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]


def test_header(results: list[BrokerResult], comparison: str | None = None) -> list[str]:
    """The header of a table with a row per test: a column per broker, then ``comparison``'s."""
    header = ["Test", *(r.spec.label for r in results)]
    if comparison is not None:
        header.append(comparison)
    return header_lines(header)


def row_line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def fmt_rate(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.rate is None:
        return "not run" if cell.error == "not run" else "FAILED"
    return f"{cell.rate.msgs_per_s:,.0f} msg/s ({cell.rate.mb_per_s:.1f} MB/s)"


def fmt_ratio(ours: Cell | None, theirs: list[Cell | None]) -> str:
    rates = [c.rate.msgs_per_s for c in theirs if c is not None and c.rate is not None]
    if ours is None or ours.rate is None or not rates:
        return "-"
    return f"{ours.rate.msgs_per_s / max(rates):.2f}x"


def fmt_mb(value: int | None) -> str:
    return "-" if not value else f"{value / MB:,.0f} MB"


def fmt_cpu(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def test_name(op: str, size: int, parts: int, count: int | None = None) -> str:
    """A test's row name; with ``count``, how many records of that size it sent."""
    size_text = "1 KiB" if size == 1024 else f"{size} B"
    if count is not None:
        count_text = f"{count // 1000}k" if count % 1000 == 0 else f"{count:,}"
        size_text = f"{count_text} x {size_text}"
    return f"{op} {size_text}, {parts} partition{'s' if parts > 1 else ''}"


def per_run_ratios(ours: Cell | None, theirs: list[Cell | None]) -> list[float]:
    """Slipstream's rate over the faster peer's, run by run: the runs of one index were
    taken seconds apart, so each ratio saw one load."""
    if ours is None:
        return []
    peers = [c for c in theirs if c is not None and c.rates]
    if not peers:
        return []
    runs = min(len(ours.rates), *(len(c.rates) for c in peers))
    out = []
    for run in range(runs):
        best = max(c.rates[run].msgs_per_s for c in peers)
        if best > 0:
            out.append(ours.rates[run].msgs_per_s / best)
    return out


def fmt_spread(cell: Cell | None) -> str:
    if cell is None or cell.spread is None or cell.rate is None:
        return "-"
    low, high = cell.spread
    median = cell.rate.msgs_per_s
    width = (high - low) / median * 100 if median else 0.0
    return f"{low / 1e6:.2f}-{high / 1e6:.2f}M (±{width / 2:.0f}%)"


def spread_table(
    results: list[BrokerResult], ours: BrokerResult | None, peers: list[BrokerResult], opts: Options
) -> list[str]:
    """The slowest and fastest run of every cell, and Slipstream's per-run ratio to the
    faster peer: how far one run moves, and whether the verdict holds run by run.
    Nothing for a single run, which has no spread."""
    if opts.repeat < 2:
        return []
    by_run = ours is not None and bool(peers)
    out = [
        f"Spread over the {opts.repeat} runs: the slowest and the fastest run in million msg/s"
        " (± half their gap, as a share of the median)"
        + (
            ", and Slipstream's rate over the faster peer's in each run (the brokers' runs"
            " of one index were taken seconds apart):"
            if by_run
            else ":"
        ),
        "",
    ]
    out.extend(test_header(results, "Slipstream / faster peer, run by run" if by_run else None))
    for op, size, parts in each_test(opts):
        key = (op, size, parts)
        row = [test_name(op, size, parts)]
        row += [fmt_spread(r.cells.get(key)) for r in results]
        if by_run and ours is not None:
            ratios = per_run_ratios(ours.cells.get(key), [p.cells.get(key) for p in peers])
            row.append(" ".join(f"{x:.2f}" for x in ratios) or "-")
        out.append(row_line(row))
    return out


def fmt_bytes(value: float) -> str:
    return f"{value / MB:.2f} MB" if value >= 100_000 else f"{value / 1000:.1f} kB"


def fetch_size_table(results: list[BrokerResult], opts: Options, peers: bool) -> list[str]:
    """Bytes per Fetch response in each consume test, from librdkafka's statistics."""
    out = [
        "Bytes received per Fetch in the consume tests, and the Fetch requests sent"
        " (librdkafka's statistics: bytes received over Fetch requests sent; medians of"
        " the runs; kB = 10^3 bytes). Every consumer asks for"
        " at most 1 MiB per partition (librdkafka's default fetch.message.max.bytes); a"
        " broker that sends more saves round trips"
        + (", which is how a peer can beat the stub's ceiling on the 100 B rows:" if peers else ":"),
        "",
    ]
    out.extend(test_header(results))
    for op, size, parts in each_test(opts):
        if op != "consume":
            continue
        row = [test_name(op, size, parts)]
        for r in results:
            cell = r.cells.get((op, size, parts))
            size_each = cell.bytes_per_fetch if cell is not None else None
            fetches = cell.fetches if cell is not None else None
            row.append(
                "-" if size_each is None or fetches is None
                else f"{fmt_bytes(size_each)} x {fetches:,.0f}"
            )
        out.append(row_line(row))
    return out


def cpu_table(
    results: list[BrokerResult],
    ours: BrokerResult | None,
    peers: list[BrokerResult],
    opts: Options,
) -> list[str]:
    """Broker CPU seconds per million records, per test (median over the runs)."""
    fewest = min(count_for(opts, size) for size in opts.sizes)
    tick = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
    out = [
        "Broker CPU seconds per million records (user + system time of the broker process"
        " during each test's timed part, median of the runs; lower is better; the stub's"
        f" own cost is its column). The kernel counts that time in {tick * 1000:.0f} ms ticks:"
        f" one tick is {tick / fewest * 1_000_000:.2f} s per million over {fewest:,} records:",
        "",
    ]
    comparing = ours is not None and bool(peers)
    out.extend(test_header(results, "Slipstream / cheaper peer" if comparing else None))
    for op, size, parts in each_test(opts):
        key = (op, size, parts)
        row = [test_name(op, size, parts)]
        values = {}
        for r in results:
            cell = r.cells.get(key)
            values[r.spec.key] = cell.cpu_per_million if cell is not None else None
            row.append(fmt_cpu(values[r.spec.key]))
        if ours is not None and peers:
            theirs = [v for p in peers if (v := values.get(p.spec.key)) is not None]
            mine = values.get("slipstream")
            if mine is None or not theirs or min(theirs) <= 0:
                row.append("-")
            else:
                ratio = mine / min(theirs)
                text = f"{ratio:.2f}x"
                if size == 1024:
                    text += mark(ratio <= 1.0)
                row.append(text)
        out.append(row_line(row))
    return out


def report(
    results: list[BrokerResult],
    embedded: EmbeddedResult | None,
    opts: Options,
    missing: list[str],
    wall: float,
    load_start: str,
) -> str:
    out: list[str] = []
    ours = next((r for r in results if r.spec.key == "slipstream"), None)
    ceiling = next((r for r in results if r.spec.key == CEILING), None)
    peers = [r for r in results if r.spec.key not in ("slipstream", CEILING)]
    brokers = [r for r in results if r.spec.key != CEILING]
    lib = confluent_kafka.libversion()[0]
    load_end = load_average()
    out.append(f"Command: `{shlex.join(['python', *sys.argv])}`")
    out.append("")
    out.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()}; client: confluent-kafka"
        f" {confluent_kafka.__version__} (librdkafka {lib}) on the same machine."
        f" Run took {wall:.0f} s; 1-minute load average {load_start} at the start, {load_end}"
        " at the end (other work on the machine skews the numbers)."
    )
    out.append("")
    for r in results:
        note = ""
        if r.idempotence_note is not None:
            note = " — **idempotence rejected, produced with acks=all only**"
        if r.spec.consumer_overrides:
            settings = ", ".join(f"{k}={v}" for k, v in r.spec.consumer_overrides.items())
            note += f"; its consumers need {settings}"
        out.append(f"- {r.spec.label_and_version}: {r.spec.describe}{note}")
    for m in missing:
        out.append(f"- not installed, skipped: {m}")
    out.append("")
    out.append(
        f"Median of {opts.repeat} run{'s' if opts.repeat > 1 else ''} per test, each into its own"
        " topic; every broker up at once and stopped (SIGSTOP) but for its turns: in each run of a test"
        " every broker produces in turn, then every broker consumes in turn, the order"
        " rotated each run. Producer acks=all, idempotence on, linger.ms=5, no compression,"
        " partitions round-robin; consumer assigns every partition from the earliest offset"
        " (no group, no commits), fetch.queue.backoff.ms=10. MB = 10^6 bytes of record values."
    )
    out.append("")
    header = ["Test", *(r.spec.label for r in results)]
    if ours is not None:
        header += [f"Slipstream / {p.spec.label}" for p in peers]
        if len(peers) > 1:
            header.append("Slipstream / faster peer")
        if ceiling is not None:
            header.append("Slipstream / ceiling")
    out.extend(header_lines(header))
    for op, size, parts in each_test(opts):
        key = (op, size, parts)
        row = [test_name(op, size, parts, count_for(opts, size))]
        row += [fmt_rate(r.cells.get(key)) for r in results]
        if ours is not None:
            mine = ours.cells.get(key)
            row += [fmt_ratio(mine, [p.cells.get(key)]) for p in peers]
            if len(peers) > 1:
                ratio = fmt_ratio(mine, [p.cells.get(key) for p in peers])
                if ratio != "-":
                    target = 1.2 if size == 1024 else 1.0
                    ratio += mark(float(ratio.rstrip("x")) >= target)
                row.append(ratio)
            if ceiling is not None:
                row.append(fmt_ratio(mine, [ceiling.cells.get(key)]))
        out.append(row_line(row))
    out.append("")
    shortest = min((rate.seconds for r in results for c in r.cells.values() for rate in c.rates), default=None)
    if shortest is not None and shortest < SHORT_WINDOW:
        out.append(
            f"**The shortest timed part took {shortest:.2f} s: rates over so short a window say"
            " little, ratios included (the default counts aim at about a second).**"
        )
        out.append("")
    spread = spread_table(results, ours, peers, opts)
    out.extend([*spread, ""] if spread else [])
    out.extend(fetch_size_table(results, opts, bool(peers)))
    out.append("")
    out.extend(cpu_table(results, ours, peers, opts))
    out.append("")

    results = brokers  # the stub has no start-up or memory figures
    header = ["Start-up and memory", *(r.spec.label for r in results)]
    if ours is not None:
        header.append("Slipstream target")
    out.extend(header_lines(header))

    def add_row(name: str, values: list[str], target: str | None = None) -> None:
        cells = [name, *values]
        if ours is not None:
            cells.append(target or "")
        out.append(row_line(cells))

    def median(r: BrokerResult) -> float | None:
        return statistics.median(r.startup) if r.startup else None

    ours_start = median(ours) if ours is not None else None
    add_row(
        f"process start → first Metadata answer (median of {opts.startup_runs}, .pyc cached)",
        [
            f"{ms(median(r))} (min {ms(min(r.startup))})" if r.startup else "FAILED"
            for r in results
        ],
        "≤ 100 ms" + mark(None if ours_start is None else ours_start <= 0.1),
    )
    if ours is not None and ours.startup_no_pyc:
        add_row(
            f"same, without .pyc files (PYTHONDONTWRITEBYTECODE=1; median of {opts.startup_runs})",
            [
                f"{ms(statistics.median(r.startup_no_pyc))} (min {ms(min(r.startup_no_pyc))})"
                if r is ours
                else "-"
                for r in results
            ],
        )
    if embedded is not None and ours is not None:
        if embedded.error is None:
            text = f"{ms(embedded.median)} (first {ms(embedded.first)})"
            ok: bool | None = embedded.median is not None and embedded.median <= 0.02
        else:
            text, ok = "FAILED", None
        add_row(
            f'embedded `await Broker(storage="memory", port=0).start()` (median of'
            f" {embedded.runs or opts.embedded_runs})",
            [text if r is ours else "-" for r in results],
            "≤ 20 ms" + mark(ok),
        )

    def rss_target(value: int | None) -> str:
        return "≤ 150 MB" + mark(None if not value else value <= 150 * MB)

    add_row(
        "broker CPU time in its turns of the throughput tests (their timed part took)",
        [
            "-" if r.cpu_seconds is None else f"{r.cpu_seconds:.1f} s ({r.busy_seconds:.1f} s)"
            for r in results
        ],
    )
    add_row(
        "broker CPU time while stopped through the other brokers' turns (those took)",
        [
            "-" if r.cpu_seconds is None else f"{r.idle_cpu_seconds:.2f} s ({r.idle_seconds:.0f} s)"
            for r in results
        ],
    )
    add_row(
        "peak RSS during the throughput tests (each run's topic deleted once consumed)",
        [fmt_mb(r.peak_rss) for r in results],
        rss_target(ours.peak_rss if ours else None),
    )
    n = f"{opts.rss_messages // 1000}k" if opts.rss_messages >= 1000 else str(opts.rss_messages)
    add_row(
        f"RSS after writing {n} x 1 KiB (fresh broker, 1 partition)",
        [
            "FAILED"
            if r.rss_error and r.rss_after_write is None
            else f"{fmt_mb(r.rss_after_write)} (anon {fmt_mb(r.anon_after_write)})"
            for r in results
        ],
        rss_target(ours.rss_after_write if ours else None),
    )
    add_row(
        f"peak RSS writing and reading back those {n}",
        ["FAILED" if r.rss_error else fmt_mb(r.rss_phase_peak) for r in results],
        rss_target(ours.rss_phase_peak if ours else None),
    )
    out.append("")
    out.append(
        "RSS is resident memory of the broker process (psutil, sampled every 20 ms, and the"
        " kernel's VmHWM); anon = RssAnon (heap), excluding file pages mapped in."
    )
    failures = [(r.spec.label, e) for r in results for e in r.errors]
    if embedded is not None and embedded.error:
        failures.append(("Slipstream embedded", embedded.error))
    if failures:
        out.append("")
        out.append("Failures:")
        for label, err in failures:
            first, *rest = err.splitlines()
            out.append(f"- {label}: {first}")
            if len(rest) > 6:  # a log tail: its last lines say what went wrong
                rest = ["...", *rest[-6:]]
            out.extend(f"      {line}" for line in rest)
    return "\n".join(out)
