"""The Markdown report of client_throughput.py: produce and consume tables (msgs/s, MB/s,
ratios to aiokafka and kafka-python) and the slow consumer's memory table."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client_loads import MEM_VALUE_SIZE, MIB, PARTITIONS, VALUE_SIZE
from harness import MB

# (setting, max_partition_fetch_bytes, fetch_max_bytes, partition_buffer_bytes, the best run's
# figures or None, the last error)
MemoryRow = tuple[str, int, int, int, dict[str, Any] | None, str]


@dataclass
class Row:
    name: str
    results: list[dict[str, Any]]

    def best(self) -> dict[str, Any] | None:
        good = [r for r in self.results if "error" not in r and r.get("seconds", 0) > 0]
        return min(good, key=lambda r: r["seconds"]) if good else None

    def rate(self) -> float | None:
        b = self.best()
        return b["count"] / b["seconds"] if b else None

    def error(self) -> str:
        errs = [r["error"] for r in self.results if "error" in r]
        return errs[-1] if errs else "no result"


def fmt_table(rows: list[Row], value_size: int, ours: Callable[[str], bool]) -> list[str]:
    by = {r.name: r.rate() for r in rows}
    aio, kp = by.get("aiokafka"), by.get("kafka-python")
    out = [
        "| client | msgs/s | MB/s | vs aiokafka | vs kafka-python | runs (msgs/s) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        rate = r.rate()
        runs = ", ".join(
            f"{x['count'] / x['seconds']:,.0f}" if "error" not in x else "err"
            for x in r.results
        )
        if rate is None:
            out.append(f"| {r.name} | failed: {r.error()} | | | | {runs} |")
            continue
        ra = f"{rate / aio:.2f}x" if aio and ours(r.name) else ""
        rk = f"{rate / kp:.2f}x" if kp and ours(r.name) else ""
        if ours(r.name):
            ra += " ✅" if aio and rate >= aio else (" ❌" if aio else "")
            rk += " ✅" if kp and rate >= 3 * kp else (" ❌" if kp else "")
        out.append(
            f"| {r.name} | {rate:,.0f} | {rate * value_size / MB:.1f} | {ra} | {rk} | {runs} |"
        )
    return out


def report(
    n: int,
    runs: int,
    produce_rows: list[Row],
    consume_rows: list[Row],
    mem_rows: list[MemoryRow],
    mem_count: int,
    mem_seconds: float,
    sleep_ms: float,
    broker_rss: int | None,
) -> str:
    import aiokafka
    import confluent_kafka
    import kafka

    out: list[str] = []
    out.append("## Client throughput (same Slipstream broker, same run)")
    out.append("")
    out.append(f"Command: `{shlex.join(['python', *sys.argv])}`")
    out.append("")
    out.append(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; aiokafka {aiokafka.__version__}, kafka-python "
        f"{kafka.__version__}, confluent-kafka {confluent_kafka.version()[0]} "
        f"(librdkafka {confluent_kafka.libversion()[0]}). Broker: `slipstream serve "
        f"--storage memory` subprocess; each client in its own subprocess, one at a time. "
        f"{n:,} x {VALUE_SIZE}-byte values, {PARTITIONS} partitions, best of {runs}."
    )
    out.append("")
    out.append("### Produce (acks=all, idempotence on for every client)")
    out.append("")
    out.append("Time from creating the producer to the last acknowledgement (flush).")
    out.append("")
    out.extend(fmt_table(produce_rows, VALUE_SIZE, lambda s: s.startswith("slipstream")))
    out.append("")
    out.append("### Consume (from earliest, no commits)")
    out.append("")
    out.append(
        "Time from creating the consumer to the N-th message (connection set-up included; "
        "for `slipstream-group` from the session's `setup`, so the group join is excluded). "
        "`slipstream-aio`/`-poll`/aiokafka/kafka-python/"
        "confluent assign all partitions with no group; `slipstream-group` is a "
        "`ConsumerGroup` handler (one member, marks every message)."
    )
    out.append("")
    out.extend(fmt_table(consume_rows, VALUE_SIZE, lambda s: s.startswith("slipstream")))
    out.append("")
    if mem_rows:
        out.append("### Slow consumer memory (Slipstream ConsumerGroup)")
        out.append("")
        out.append(
            f"Topic of {mem_count:,} x {MEM_VALUE_SIZE} B (~{mem_count * MEM_VALUE_SIZE / MB:.0f}"
            f" MB) over {PARTITIONS} partitions; the handler sleeps {sleep_ms:g} ms per "
            f"message for {mem_seconds:g} s. RSS of the consumer process sampled every 20 ms; "
            f"baseline = RSS after imports, before connecting. Bound (as documented "
            f"in consumer_config.py) = {PARTITIONS} x (partition_buffer_bytes + "
            "max_partition_fetch_bytes) + fetch_max_bytes (one response in flight)."
        )
        out.append("")
        out.append(
            "| setting | max_partition_fetch_bytes | fetch_max_bytes | partition_buffer_bytes "
            "| consumed | baseline RSS | peak RSS (1st / 2nd half) | growth | growth - reference "
            "| bound | within bound |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        ref = mem_rows[0][4]
        ref_growth = ref["peak"] - ref["baseline"] if ref else None
        for label, mpfb, fmb, pbb, best, err in mem_rows:
            bound = PARTITIONS * (pbb + mpfb) + fmb
            if best is None:
                out.append(f"| {label} | {mpfb:,} | {fmb:,} | {pbb:,} | failed: {err} ||||||| ")
                continue
            growth = best["peak"] - best["baseline"]
            net = growth - ref_growth if ref_growth is not None else None
            net_s = f"{net / MIB:.1f} MiB" if net is not None else "n/a"
            ok = "" if net is None or best is ref else ("✅" if net <= bound else "❌")
            out.append(
                f"| {label} | {mpfb:,} | {fmb:,} | {pbb:,} | {best['consumed']:,} | "
                f"{best['baseline'] / MIB:.1f} MiB | {best['peak'] / MIB:.1f} MiB "
                f"({best['peak_first_half'] / MIB:.1f} / {best['peak_second_half'] / MIB:.1f}) | "
                f"{growth / MIB:.1f} MiB | {net_s} | {bound / MIB:.1f} MiB | {ok} |"
            )
        out.append("")
        out.append(
            "Growth is the whole process: buffered fetch bytes plus the client's fixed cost "
            "(connections, imports done on connect, asyncio tasks). The tiny setting "
            "(buffers of a few KiB) measures that fixed cost; `growth - reference` is then "
            "compared with the bound. It counts decoded messages at Python object size, "
            "not wire size. Bounded also means the 2nd-half peak is not above the 1st-half "
            "peak while the topic still holds far more than the buffers."
        )
        out.append("")
    if broker_rss:
        out.append(f"Broker RSS at the end: {broker_rss / MIB:.0f} MiB.")
    return "\n".join(out)
