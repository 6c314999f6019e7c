"""The Markdown report of group_coordinator.py: one row per test and broker, with
Slipstream's targets, then what each section measured and the failures."""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
from typing import Any

import confluent_kafka
from group_clients import FirstRecord, Herd
from harness import MB, BrokerSpec, mark, ms, pct


def report(
    specs: list[BrokerSpec], missing: list[str], first: dict[str, FirstRecord],
    herds: dict[str, dict[int, list[Herd]]], rates: dict[str, Any], cap: dict[str, Any], groups: int,
    duration: float, rate_s: float, errors: list[str], wall: float,
) -> str:
    out = [f"Command: `{shlex.join(['python', *sys.argv])}`", ""]
    out.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}; confluent-kafka {confluent_kafka.__version__}"
        f" (librdkafka {confluent_kafka.libversion()[0]}); brokers and clients on the same"
        f" machine. Run took {wall:.0f} s."
    )
    out.append("")
    for s in specs:
        out.append(f"- {s.label} {s.version}: {s.describe}")
    for m in missing:
        out.append(f"- not installed, skipped: {m}")
    out.append("")
    labels = [s.label for s in specs]
    out.append("| Test | " + " | ".join(labels) + " | Slipstream target |")
    out.append("|---|" + "---:|" * len(labels) + "---|")

    def row(name: str, cells: list[str], target: str) -> None:
        out.append(f"| {name} | " + " | ".join(cells) + f" | {target} |")

    cells = []
    ok: bool | None = None
    for s in specs:
        r = first.get(s.key)
        if r is None or r.error or not r.times:
            cells.append(f"unsupported ({r.error if r else 'not run'})")
            continue
        med = statistics.median(r.times)
        cells.append(f"{ms(med)} (min {ms(min(r.times))}, max {ms(max(r.times))})")
        if s.key == "slipstream":
            ok = med <= 0.2
    n_runs = len(next((r.times for r in first.values() if r.times), []))
    row(f"(1) one consumer, subscribe → first record, median of {n_runs}", cells,
        "≤ 200 ms" + mark(ok))
    for n in (10, 50):
        cells = []
        ok = None
        runs_shown = 1
        for s in specs:
            hs = herds.get(s.key, {}).get(n)
            if not hs:
                cells.append("not run" if first.get(s.key) and first[s.key].error else "-")
                continue
            broken = [h for h in hs if h.error or h.stable_after is None or h.generations is None]
            if broken:
                cells.append(f"FAILED in {len(broken)} of {len(hs)} runs ({broken[0].error})")
                if s.key == "slipstream":
                    ok = False
                continue
            times = [h.stable_after for h in hs if h.stable_after is not None]
            gens = [h.generations for h in hs if h.generations is not None]
            if len(hs) == 1:
                cells.append(f"{ms(times[0])}, {gens[0]} generation{'s' if gens[0] != 1 else ''}")
            else:
                runs_shown = max(runs_shown, len(hs))
                cells.append(f"median {ms(statistics.median(times))} (max {ms(max(times))}); "
                             f"generations per run: {', '.join(map(str, gens))}")
            if s.key == "slipstream":
                ok = all(g == 1 for g in gens) and (n != 50 or max(times) <= 1.0)
        runs_note = f", Slipstream x{runs_shown} runs" if runs_shown > 1 else ""
        row(f"(2) {n} consumers started together, 60 partitions: all assigned, generations{runs_note}",
            cells, ("1 generation, ≤ 1 s" if n == 50 else "1 generation") + mark(ok))
    others = ["-"] * (len(specs) - 1)
    if rates:
        c, h = rates["commit"], rates["heartbeat"]
        cr = c["ok"] / c["seconds"]
        hr = h["ok"] / h["seconds"]
        row(f"(3) OffsetCommit v{c.get('version', '?')}/s, 4 members, a connection each x 32 in flight,"
            f" {rate_s:.0f} s",
            [f"{cr:,.0f}/s (errors {c['errors'] or 0}; CPU broker {c['broker_cpu']:.1f} s,"
             f" load-gen {c['client_cpu']:.1f} s in {c['seconds']:.1f} s)",
             *others], "≥ 20,000/s" + mark(cr >= 20_000))
        row(f"(3) Heartbeat v{h.get('version', '?')}/s, same members and connections",
            [f"{hr:,.0f}/s (errors {h['errors'] or 0}; CPU broker {h['broker_cpu']:.1f} s,"
             f" load-gen {h['client_cpu']:.1f} s in {h['seconds']:.1f} s)",
             *others], "")
    else:
        failed = any(e.startswith("(3)") for e in errors)
        row("(3) OffsetCommit/s and Heartbeat/s", ["FAILED" if failed else "not run", *others],
            "≥ 20,000 commits/s")
    if cap:
        lat = cap["latencies"]
        p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
        total = cap["members"]
        row(f"(4) {groups:,} groups x 5 members: joined (connect + JoinGroup/SyncGroup time)",
            [f"{cap['joined']:,}/{total:,} in {cap['join_s']:.1f} s (connect"
             f" {cap['connect_s']:.1f} s){'; ' + str(cap['first_error']) if cap['first_error'] else ''}",
             *others], "all")
        row(f"(4) members expired while heartbeating every 3 s for {duration:.0f} s",
            [f"{cap['expired']} (codes {cap['expired_codes']}, other errors"
             f" {cap['other_errors']}; {cap['heartbeats']:,} heartbeats)", *others],
            "0" + mark(cap["expired"] == 0 and cap["joined"] == total))
        row("(4) heartbeat latency p50 / p99 / max",
            [f"{ms(p50)} / {ms(p99)} / {ms(max(lat) if lat else None)}", *others],
            "p99 ≤ 50 ms" + mark(None if p99 is None else p99 <= 0.05))
        row("(4) load generators' own event-loop lag p99 / max (bounds the latency's accuracy)",
            [f"{ms(cap['lag_p99'])} / {ms(cap['lag_max'])}", *others], "")
        row("(4) broker RSS at end / peak; broker CPU",
            [f"{cap['rss_end'] / MB:,.0f} MB / {cap['rss_peak'] / MB:,.0f} MB; CPU"
             f" {cap['broker_cpu']:.0f} s in {cap['wall']:.0f} s", *others],
            "≤ 500 MB" + mark(cap["rss_peak"] <= 500 * MB))
    else:
        failed = any(e.startswith("(4)") for e in errors)
        row("(4) capacity", ["FAILED" if failed else "not run", *others], "")
    out.append("")
    out.append(
        "(1) each run is a fresh consumer in a new group, client defaults except"
        " auto.offset.reset=earliest (the record is produced beforehand); timed from subscribe."
        " (2) consumers are threads in this process, client defaults, created first and then"
        " subscribed together; generations = most on_assign calls any consumer saw, watched for"
        " 3 s after all were assigned; time is to the last on_assign. (3) and (4) are"
        " Slipstream only: the load generators use Slipstream's own protocol client."
        " (3) joins four members of one group with that client, then each member sends one"
        " pre-encoded request per kind (the same partition and offset each time; only the"
        " correlation id changes) over its own raw pipelined connection, checking each"
        " response's correlation id (in order) and error codes; a response with an error is not"
        " counted."
        " (4) runs in two processes, one TCP connection per member, session timeout 30 s;"
        " expired = heartbeat answered UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS or"
        " ILLEGAL_GENERATION after the member was stable."
    )
    if errors:
        out.append("")
        out.append("Failures:")
        out.extend(f"- {e}" for e in errors)
    return "\n".join(out)
