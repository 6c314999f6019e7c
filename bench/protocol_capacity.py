"""Section (3) of consumer_protocol.py, the parent's side: a fresh broker, two load
generators (consumer_load.py, or group_load.py for the classic protocol), a Metadata probe
of the broker's own latency and CPU samples, merged into one dict for the report."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from consumer_load import SCRIPT as CONSUMER_LOAD
from group_load import MEMBERS_PER_GROUP, combine_capacity
from group_load import SCRIPT as GROUP_LOAD
from harness import (
    HOST,
    BrokerProcess,
    BrokerSpec,
    RssSampler,
    collect,
    cpu_of,
    create_topics,
    metadata_request,
    recv_exact,
    run_child,
    spec_broker,
)


def measure_capacity(kind: str, spec: BrokerSpec, workdir: Path, groups: int, duration: float,
                     join_timeout: float, regular_ms: int, join_spread: float) -> dict[str, Any]:
    with spec_broker(spec, workdir, f"capacity-{kind}") as b:
        create_topics(b.bootstrap, {"cap": MEMBERS_PER_GROUP}, 30)
        sampler = RssSampler(b.pid, 0.2)
        # (wall time, broker CPU seconds, load generators' CPU seconds)
        cpu_samples: list[tuple[float, float, float]] = []
        cpu_stop = threading.Event()
        kids: list[subprocess.Popen[str]] = []

        def sample_cpu() -> None:
            while not cpu_stop.wait(0.5):
                cpu_samples.append((time.time(), cpu_of(b.pid),
                                    sum(cpu_of(k.pid) for k in list(kids))))

        cpu_thread = threading.Thread(target=sample_cpu, daemon=True)
        cpu_thread.start()
        probe = BrokerProbe(b.port)
        probe.start()
        cpu0 = cpu_of(b.pid)
        t0 = time.perf_counter()
        for lo, hi in ((0, groups // 2), (groups // 2, groups)):
            if kind == "consumer":
                kids.append(run_child(
                    CONSUMER_LOAD, ["capacity", json.dumps(
                        {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                         "duration": duration, "join_timeout": join_timeout,
                         "regular_ms": regular_ms, "join_spread": join_spread})],
                    workdir))
            else:
                kids.append(run_child(
                    GROUP_LOAD, ["capacity", json.dumps(
                        {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                         "interval": 3.0, "duration": duration, "join_timeout": join_timeout})],
                    workdir))
        try:
            parts = [collect(k, join_spread + join_timeout + duration + 150) for k in kids]
        finally:
            cpu_stop.set()
            cpu_thread.join(5)
            probe.stop()
        wall = time.perf_counter() - t0
        cap: dict[str, Any] = {
            **combine_capacity(parts),
            "errors_at_join": sum(x["join_errors"] + x["connect_errors"] for x in parts),
            "other_errors": merge([x["other_errors"] for x in parts]),
            "rss_end": sampler.current(),
            "broker_cpu": cpu_of(b.pid) - cpu0,
            "wall": wall,
        }
        if kind == "consumer":
            cap["fenced"] = merge([x["fenced"] for x in parts])
            cap["settled"] = sum(x["settled"] for x in parts)
            cap["recon"] = [v for x in parts for v in x["recon"]]
            cap["settle_s"] = max((x["settle_s"] or 0) for x in parts)
            cap["intervals"] = merge([x["intervals"] for x in parts])
            cap["window_heartbeats"] = sum(x["window_heartbeats"] for x in parts)
            cap["ack_latencies"] = [v for x in parts for v in x["ack_latencies"]]
            cap["ack_peer_latencies"] = [v for x in parts for v in x["ack_peer_latencies"]]
            cap["settled_latencies"] = [v for x in parts for v in x["settled_latencies"]]
            cap["slow_by_second"] = merge([x["slow_by_second"] for x in parts])
            cap["per_second"] = per_second(parts, cpu_samples, probe.samples, duration)
            start = min(x["window_wall"] for x in parts)
            cap["probe"] = [x for t, x in probe.samples if start <= t <= start + duration]
        else:
            cap["fenced"] = merge([x["expired"] for x in parts])
        cap["rss_peak"] = sampler.stop()
        cap["join_spread"] = join_spread if kind == "consumer" else None
        cap["log"] = scan_log(b)
    return cap


class BrokerProbe(threading.Thread):
    """Asks the broker for Metadata every 20 ms on a connection of its own: how long the
    broker itself takes to answer, apart from the load generators' own stalls."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True, name="probe")
        self.port = port
        self.samples: list[tuple[float, float]] = []  # (wall time sent, seconds)
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            sock = socket.create_connection((HOST, self.port), timeout=10)
        except OSError:
            return
        with sock:
            corr = 0
            while not self._stop_event.wait(0.02):
                corr += 1
                t, s = time.time(), time.perf_counter()
                try:
                    sock.sendall(metadata_request(corr))
                    size = struct.unpack(">i", recv_exact(sock, 4))[0]
                    recv_exact(sock, size)
                except (OSError, EOFError, struct.error):
                    return
                self.samples.append((t, time.perf_counter() - s))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(15)


def per_second(parts: list[dict[str, Any]], cpu: list[tuple[float, float, float]],
               probe: list[tuple[float, float]], duration: float) -> str:
    """Second of the window: answers > 50 ms, the generators' worst loop lag, the broker
    probe's slowest answer, CPU % of the broker and of the two load generators together."""
    start = min(x["window_wall"] for x in parts)
    cells = []
    for sec in range(int(duration)):
        slow = sum(x["slow_by_second"].get(str(sec), 0) for x in parts)
        lag = max(x["lag_by_second"].get(str(sec), 0.0) for x in parts)
        lo, hi = start + sec, start + sec + 1
        inside = [x for x in cpu if lo - 0.3 <= x[0] <= hi + 0.3]
        busy = gens = 0.0
        if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
            span = inside[-1][0] - inside[0][0]
            busy = (inside[-1][1] - inside[0][1]) / span * 100
            gens = (inside[-1][2] - inside[0][2]) / span * 100
        worst = max((x for t, x in probe if lo <= t < hi), default=0.0)
        cells.append(f"{sec}:{slow}/{lag * 1000:.0f}ms/{worst * 1000:.0f}ms/{busy:.0f}%+{gens:.0f}%")
    return " ".join(cells)


def merge(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def scan_log(b: BrokerProcess) -> dict[str, Any]:
    """The broker's own log (level WARNING): how many lines, and the first few."""
    try:
        lines = b.log_path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "first": []}
    interesting = [ln for ln in lines if ln.strip()]
    return {"lines": len(interesting), "first": interesting[:5],
            "tracebacks": sum(1 for ln in lines if ln.startswith("Traceback"))}
