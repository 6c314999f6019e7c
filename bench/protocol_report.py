"""The Markdown report of consumer_protocol.py: the herd and join rows per protocol with
the consumer protocol's ratios and targets, the capacity table, the notes and failures."""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
from typing import Any

import confluent_kafka
from group_load import MEMBERS_PER_GROUP
from harness import MB, BrokerSpec, mark, ms, pct, ratio
from protocol_consumers import ORDER, PROTOCOLS
from protocol_herd_join import HerdRun, JoinRun


def seconds(v: float | None) -> str:
    return "-" if v is None else ms(v)


def herd_cell(runs: list[HerdRun]) -> str:
    if not runs:
        return "not run"
    bad = [r for r in runs if r.error]
    if bad:
        return f"FAILED in {len(bad)}/{len(runs)} runs ({bad[0].error})"
    t = statistics.median([r.complete_after or 0 for r in runs])
    s = statistics.median([r.settled_after or 0 for r in runs])
    a = statistics.median([r.assigns for r in runs])
    v = sum(r.violations for r in runs)
    unbalanced = sum(1 for r in runs if not r.balanced)
    out = f"{ms(t)} (settled {ms(s)}); {a:.0f} assign / {statistics.median([r.revokes for r in runs]):.0f} revoke cb; {v} double"
    if len(runs) > 1:
        out += f"; max {ms(max(r.complete_after or 0 for r in runs))}"
    if unbalanced:
        out += f"; unbalanced in {unbalanced}"
    return out


def med(values: list[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def client_notes(herds: dict[str, dict[int, list[HerdRun]]], joins: dict[str, list[JoinRun]]
                 ) -> list[str]:
    notes: list[str] = []
    for k in ORDER:
        for n, runs in herds.get(k, {}).items():
            for r in runs:
                notes += run_notes(f"(1) {k} {n}", r)
        for j in joins.get(k, []):
            notes += run_notes(f"(2) {k}", j)
    return notes


def run_notes(where: str, run: HerdRun | JoinRun) -> list[str]:
    """What a run's clients saw: double ownership, client errors, librdkafka's fencing/loss lines."""
    notes: list[str] = []
    if run.examples:
        notes.append(f"{where}: double ownership: {'; '.join(run.examples)}")
    if run.client_errors:
        notes.append(f"{where}: {len(run.client_errors)} client errors, first: {run.client_errors[0]}")
    if run.notes:
        notes.append(f"{where}: {len(run.notes)} librdkafka lines about fencing/loss, first: {run.notes[0][:200]}")
    return notes


def report(spec: BrokerSpec, herds: dict[str, dict[int, list[HerdRun]]],
           joins: dict[str, list[JoinRun]], caps: dict[str, dict[str, Any]], errors: list[str],
           logs: dict[str, dict[str, Any]], wall: float, groups: int, duration: float,
           rate: int) -> str:
    out = [f"Command: `{shlex.join(['python', *sys.argv])}`", ""]
    out.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python"
        f" {platform.python_version()}; confluent-kafka {confluent_kafka.__version__}"
        f" (librdkafka {confluent_kafka.libversion()[0]}); broker {spec.label} {spec.version}"
        f" ({spec.describe}); broker and clients on the same machine. Run took {wall:.0f} s."
    )
    out.append("")
    labels = [PROTOCOLS[k][0] for k in ORDER]
    out.append("| Test | " + " | ".join(labels) + " | consumer ÷ range, ÷ coop | target (consumer) |")
    out.append("|---|" + "---:|" * len(labels) + "---:|---|")

    def row(name: str, cells: list[str], rat: str, target: str) -> None:
        out.append(f"| {name} | " + " | ".join(cells) + f" | {rat} | {target} |")

    for n in (10, 50):
        runs = {k: herds.get(k, {}).get(n, []) for k in ORDER}
        if not any(runs.values()):
            continue
        nr = max(len(r) for r in runs.values())
        times = {k: med([r.complete_after for r in runs[k] if not r.error]) for k in ORDER}
        cons = runs["consumer"]
        ok = None
        if cons:
            ok = (all(not r.error for r in cons) and sum(r.violations for r in cons) == 0
                  and (n != 50 or (times["consumer"] is not None and times["consumer"] <= 1.0)))
        row(f"(1) herd: {n} consumers start together, 60 partitions: all owned and every consumer"
            f" owns some (median of {nr})",
            [herd_cell(runs[k]) for k in ORDER],
            f"{ratio(times['consumer'], times['range'])}, {ratio(times['consumer'], times['coop'])}",
            ("≤ 1 s, 0 double" if n == 50 else "0 double") + mark(ok))
    if any(joins.values()):
        nr = max(len(v) for v in joins.values())

        def jm(k: str, attr: str) -> float | None:
            return med([getattr(r, attr) for r in joins.get(k, []) if not r.error])

        def jcell(k: str, attr: str) -> str:
            runs = joins.get(k, [])
            if not runs:
                return "not run"
            bad = [r for r in runs if r.error]
            if bad:
                return f"FAILED ({bad[0].error})"
            return seconds(jm(k, attr))

        first = {k: jm(k, "first_record") for k in ORDER}
        ok_first = None if first["consumer"] is None else first["consumer"] <= 1.0
        row(f"(2) join: 11th consumer, subscribe → first record ({rate:,} records/s into 60"
            f" partitions; median of {nr})",
            [jcell(k, "first_record") for k in ORDER],
            f"{ratio(first['consumer'], first['range'])}, {ratio(first['consumer'], first['coop'])}",
            "≤ 1 s" + mark(ok_first))
        bal = {k: jm(k, "balanced_after") for k in ORDER}
        row("(2) join: subscribe → last ownership change (all eleven own 5 or 6)",
            [jcell(k, "balanced_after") for k in ORDER],
            f"{ratio(bal['consumer'], bal['range'])}, {ratio(bal['consumer'], bal['coop'])}", "")

        def pause_cell(k: str) -> str:
            runs = [r for r in joins.get(k, []) if not r.error]
            if not runs:
                return jcell(k, "kept_pause")
            ordered = sorted(runs, key=lambda x: x.kept_pause or 0.0)
            r = ordered[(len(ordered) - 1) // 2]  # the median run (the lower one of two)
            worst = ordered[-1].kept_pause
            more = f"; max of {len(runs)} runs {seconds(worst)}" if len(runs) > 1 else ""
            return (f"{seconds(r.kept_pause)} (longest gap {seconds(r.kept_max_gap)} vs normal p99"
                    f" {seconds(r.normal_gap)}, max {seconds(r.baseline_max)}; {r.kept} kept,"
                    f" {r.moved} moved: longest gap {seconds(r.moved_max_gap)}{more})")

        def median_pause(k: str) -> float | None:
            ps = sorted(x.kept_pause or 0.0 for x in joins.get(k, []) if not x.error)
            return ps[(len(ps) - 1) // 2] if ps else None

        pauses = {k: median_pause(k) for k in ORDER}
        ok_pause = None if pauses["consumer"] is None else pauses["consumer"] <= 0.1
        row("(2) join: longest pause of the ten on partitions they keep (gap minus normal p99 gap)",
            [pause_cell(k) for k in ORDER],
            f"{ratio(pauses['consumer'], pauses['range'])}, {ratio(pauses['consumer'], pauses['coop'])}",
            "no pause (≤ 100 ms)" + mark(ok_pause))

        def other(k: str) -> str:
            runs = joins.get(k, [])
            if not runs:
                return "-"
            return (f"{sum(r.assigns for r in runs)} assign / {sum(r.revokes for r in runs)} revoke"
                    f" cb; {sum(r.violations for r in runs)} double; produced"
                    f" {sum(r.produced for r in runs):,} ({sum(r.produce_errors for r in runs)} failed)")

        vio = sum(r.violations for r in joins.get("consumer", []))
        row("(2) join: callbacks, double ownership, records produced (all runs)",
            [other(k) for k in ORDER], "", "0 double" + mark(vio == 0 if joins.get("consumer") else None))
    out.append("")

    if caps:
        spread = caps.get("consumer", {}).get("join_spread")
        out.append(f"Capacity: {groups:,} groups x {MEMBERS_PER_GROUP} members, one connection per"
                   f" member, two load-generator processes, measured for {duration:.0f} s after all"
                   " joined; each on a fresh broker."
                   + (f" Consumer-protocol groups join at random moments over {spread:.0f} s"
                      " (the classic load generator joins 50 groups every 50 ms)." if spread else ""))
        out.append("")
        out.append("| Capacity | consumer protocol (ConsumerGroupHeartbeat v1) | classic"
                   " (JoinGroup/SyncGroup, Heartbeat every 3 s) | consumer ÷ classic | target (consumer) |")
        out.append("|---|---:|---:|---:|---|")
        c, cl = caps.get("consumer"), caps.get("classic")

        def cc(cap: dict[str, Any] | None, fn: Any) -> str:
            if cap is None:
                return "not run"
            if cap.get("error"):
                return f"FAILED ({cap['error']})"
            return str(fn(cap))

        def num(cap: dict[str, Any] | None, fn: Any) -> float | None:
            if cap is None or cap.get("error"):
                return None
            v = fn(cap)
            return None if v is None else float(v)

        def crow(name: str, fn: Any, numfn: Any, target: str) -> None:
            out.append(f"| {name} | {cc(c, fn)} | {cc(cl, fn)} |"
                       f" {ratio(num(c, numfn), num(cl, numfn)) if numfn else ''} | {target} |")

        ok_join = None if num(c, lambda x: x["joined"]) is None else c is not None and c["joined"] == c["members"]
        crow("members joined; time to join all (connect time)",
             lambda x: f"{x['joined']:,}/{x['members']:,} in {x['join_s']:.1f} s (connect"
                       f" {x['connect_s']:.1f} s){'; ' + str(x['first_error']) if x['first_error'] else ''}",
             lambda x: x["join_s"], "all" + mark(ok_join))
        if c is not None and not c.get("error"):
            out.append(f"| members settled (got a settled interval, above 400 ms) and when, from the first join"
                       f" | {c['settled']:,}/{c['members']:,}, last after {c['settle_s']:.1f} s | - | | |")
        if c is not None and not c.get("error") and c["recon"]:
            last = [a for a, _b, _n in c["recon"]]
            sett = [b for _a, b, _n in c["recon"]]
            beats = [float(n) for _a, _b, n in c["recon"]]
            out.append("| per member, from its join: last assignment change / got the regular"
                       " interval / heartbeats sent until then (p50, max) |"
                       f" {ms(pct(last, 0.5))}, {ms(max(last))} / {ms(pct(sett, 0.5))},"
                       f" {ms(max(sett))} / {pct(beats, 0.5):.0f}, {max(beats):.0f} | - | | |")
        nf = num(c, lambda x: sum(x["fenced"].values()))
        crow("fenced / expired (FENCED_MEMBER_EPOCH 110, UNKNOWN_MEMBER_ID 25; classic: 25, 27, 22);"
             " other errors",
             lambda x: f"{sum(x['fenced'].values())} {x['fenced'] or ''}; other {x['other_errors'] or 0}",
             None, "0 fenced" + mark(None if nf is None else nf == 0))
        crow("heartbeats sent (whole run; consumer: in the window)",
             lambda x: f"{x['heartbeats']:,}" + (f" ({x['window_heartbeats']:,}; intervals given"
                                                  f" {x['intervals']})" if "intervals" in x else ""),
             lambda x: x["heartbeats"], "")
        p99c = num(c, lambda x: pct(x["latencies"], 0.99))
        crow("heartbeat latency p50 / p99 / max in the window",
             lambda x: f"{ms(pct(x['latencies'], 0.5))} / {ms(pct(x['latencies'], 0.99))} /"
                       f" {ms(max(x['latencies']) if x['latencies'] else None)}",
             lambda x: pct(x["latencies"], 0.99), "p99 ≤ 50 ms" + mark(None if p99c is None else p99c <= 0.05))
        if c is not None and not c.get("error"):
            sl = c["settled_latencies"]
            out.append(f"| heartbeat latency p50 / p99 / max once every member settled (regular"
                       f" interval; {len(sl):,} heartbeats) | {ms(pct(sl, 0.5))} / {ms(pct(sl, 0.99))}"
                       f" / {ms(max(sl) if sl else None)} | - | | |")
            al = c["ack_latencies"]
            out.append(f"| latency p50 / p99 of heartbeats carrying an acknowledgement, in the"
                       f" window ({len(al):,}) | {ms(pct(al, 0.5))} / {ms(pct(al, 0.99))} | - | | |")
            ap = c.get("ack_peer_latencies", [])
            out.append(f"| latency p50 / p99 of the other heartbeats sent in the same 100 ms as an"
                       f" acknowledgement ({len(ap):,}) | {ms(pct(ap, 0.5))} / {ms(pct(ap, 0.99))} | - | | |")
        if c is not None and not c.get("error"):
            pr = c["probe"]
            out.append(f"| broker probe: Metadata every 20 ms on its own connection, p50 / p99 / max"
                       f" in the window ({len(pr):,}) | {ms(pct(pr, 0.5))} / {ms(pct(pr, 0.99))} /"
                       f" {ms(max(pr) if pr else None)} | - | | |")
        crow("load generators' event-loop lag p99 / max (bounds the latencies' accuracy)",
             lambda x: f"{ms(x['lag_p99'])} / {ms(x['lag_max'])}", None, "")
        rss = num(c, lambda x: x["rss_peak"])
        crow("broker RSS peak (end)",
             lambda x: f"{x['rss_peak'] / MB:,.0f} MB ({x['rss_end'] / MB:,.0f} MB)",
             lambda x: x["rss_peak"], "≤ 500 MB" + mark(None if rss is None else rss <= 500 * MB))
        crow("broker CPU over the whole capacity run (wall)",
             lambda x: f"{x['broker_cpu']:.0f} s in {x['wall']:.0f} s",
             lambda x: x["broker_cpu"], "")
        out.append("")

    out.append(
        "(1) consumers are threads in this process, created first and then subscribed together,"
        " client defaults plus the protocol settings (classic: partition.assignment.strategy;"
        " consumer: group.protocol=consumer, the broker's default assignor). Time is from"
        " subscribe until every partition is owned and every consumer owns at least one;"
        " settled = the last ownership change (watched until 3 s pass without one); cb = total"
        " on_assign / on_revoke+on_lost calls over all consumers; double = a partition handed to"
        " a consumer while another still owned it (ownership tracked from the callbacks:"
        " incremental for cooperative-sticky and consumer, the full set for range)."
        " (2) the ten consume (auto.offset.reset=latest) while a producer writes round-robin;"
        " once they have been balanced and reading for a while, an eleventh subscribes."
        " Kept = same owner before the join and after the group settles; gap = time between"
        " consecutive deliveries of a partition to its consumer; normal = the p99 of those gaps"
        " over all partitions in the seconds before the join; pause = the longest gap on a kept"
        " partition from the join until 1 s after the last ownership change, minus normal."
        " The ten learn of the eleventh at their next heartbeat: classic every 3 s (librdkafka's"
        " heartbeat.interval.ms), consumer at the interval the broker gives a settled group"
        " (group.consumer.heartbeat.interval.ms, 5 s unless set), 200 ms while it changes."
        " (3) raw members: v1 join with a generated member id, epoch 0, rebalance timeout 60 s,"
        " the topic, an empty owned list; then heartbeat at the interval each answer gives with the"
        " latest epoch and, once, the assignment of the latest answer that carried one (the"
        " acknowledgement); a fenced or unknown member is counted and stops. Settled = the first"
        " answer with an interval above the 200-400 ms ones a changing group gets. The probe is a separate connection from the parent"
        " process asking for Metadata every 20 ms: its latency is the broker's own responsiveness,"
        " apart from the load generators' event-loop stalls. The classic column is"
        " bench/group_coordinator.py's capacity load generator (heartbeat every 3 s, session 30 s)."
    )
    if logs:
        out.append("")
        out.append("Broker logs (level WARNING):")
        for name, info in logs.items():
            shown = "; ".join(f"`{ln[:160]}`" for ln in info.get("first", []))
            out.append(f"- {name}: {info.get('lines', 0)} lines, {info.get('tracebacks', 0)}"
                       f" tracebacks{': ' + shown if shown else ''}")
    notes = client_notes(herds, joins)
    if notes:
        out.append("")
        out.append("Client-side notes:")
        out.extend(f"- {n}" for n in notes)
    if errors:
        out.append("")
        out.append("Failures:")
        out.extend(f"- {e}" for e in errors)
    return "\n".join(out)
