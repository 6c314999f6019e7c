#!/usr/bin/env python3
"""What TLS and SASL cost: one broker, a PLAINTEXT and a SASL_SSL listener, same run.

    python bench/security_throughput.py            # full run, about a minute
    python bench/security_throughput.py --quick    # smoke run

With confluent-kafka (librdkafka) as the client, 1 KiB values, acks=all:

* produce throughput and consume throughput (assign from the beginning) over
  PLAINTEXT and over SASL_SSL (SCRAM-SHA-512), with the SASL_SSL/PLAINTEXT ratio
  (the target: TLS costs at most 30% of produce throughput, a ratio >= 0.70);
* CPU milliseconds per MB for each phase, of the broker (from /proc/<pid>/stat)
  and of the client (getrusage of this process, librdkafka's threads included):
  on a shared machine these ratios are steadier than wall-clock MB/s;
* connection set-up rate with Slipstream's client: connect, ApiVersions and (on
  SASL listeners) the SCRAM-SHA-512 exchange, one connection after another, over
  PLAINTEXT, SASL_PLAINTEXT and SASL_SSL.

``--py-spy DIR`` records the broker with py-spy during each phase (collapsed
stacks, one file per listener, phase and run) to see where the broker's time goes.

The broker is a subprocess (``python -m slipstream serve``) on 127.0.0.1 with a
throwaway CA from ``slipstream certs``. Progress goes to stderr, the Markdown
table to stdout. Each throughput figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from harness import HOST, MB, dying_with_bench, free_port, log

from slipstream.cli.certs import make_dev_certs
from slipstream.client.connection import BrokerConnection
from slipstream.client.security import ClientSecurity

USER, PASSWORD = "bench", "bench-secret"
VALUE_SIZE = 1024
PARTITIONS = 4


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux /proc)."""
    # Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds used by this process, librdkafka's threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU seconds of the broker and of this (client) process over one phase."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.broker_s = self.client_s = 0.0

    def __enter__(self) -> CpuMeter:
        self._broker0, self._client0 = process_cpu_s(self.broker_pid), own_cpu_s()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.broker_s = process_cpu_s(self.broker_pid) - self._broker0
        self.client_s = own_cpu_s() - self._client0


class SecuredBroker:
    def __init__(self, workdir: Path) -> None:
        self.certs = workdir / "certs"
        make_dev_certs(self.certs)
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT")}
        listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in self.ports.items())
        self.command = [
            sys.executable, "-m", "slipstream", "serve", "--storage", "memory",
            "--set", f"listeners={listeners}",
            "--set", f"ssl.certfile={self.certs / 'broker.pem'}",
            "--set", f"ssl.keyfile={self.certs / 'broker-key.pem'}",
            "--set", f"scram.bootstrap.users={USER}:{PASSWORD}",
            "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "--log-level", "WARNING",
        ]
        self.log_path = workdir / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                dying_with_bench(self.command), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection((HOST, self.ports["SASL_SSL"]), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("broker did not start within 20 s")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def client_conf(self, listener: str) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": f"{HOST}:{self.ports[listener]}"}
        if listener == "SASL_SSL":
            conf.update({
                "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER, "sasl.password": PASSWORD,
                "ssl.ca.location": str(self.certs / "ca.pem"),
            })
        return conf

    def our_security(self, listener: str) -> ClientSecurity:
        if listener == "PLAINTEXT":
            return ClientSecurity()
        return ClientSecurity(
            listener, "SCRAM-SHA-512", USER, PASSWORD,
            ssl_cafile=str(self.certs / "ca.pem") if listener == "SASL_SSL" else None,
            ssl_check_hostname=False,
        )


@contextlib.contextmanager
def profiled(out_dir: Path | None, pid: int, listener: str, phase: str, run: int) -> Iterator[None]:
    """Record the broker with py-spy (collapsed stacks, one file per phase) while the block runs."""
    if out_dir is None:
        yield
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    py_spy = Path(sys.executable).with_name("py-spy")
    out = out_dir / f"{listener.lower()}-{phase}-{run + 1}.txt"
    recorder = subprocess.Popen([str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
                                 "--nonblocking", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # let py-spy attach before the phase starts
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)


def produce(conf: dict[str, Any], topic: str, count: int) -> float:
    producer = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 262144,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * VALUE_SIZE
    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0 or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    return count * VALUE_SIZE / (time.perf_counter() - start) / MB


def consume(conf: dict[str, Any], topic: str, count: int) -> float:
    consumer = Consumer({**conf, "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 * 1024 * 1024, "fetch.queue.backoff.ms": 10})
    # Leaders known before assign, and no 1 s pauses at queued.min.messages: librdkafka's
    # timers, not the listener, would otherwise fill the window (as in client_loads.py).
    consumer.list_topics(topic, timeout=10.0)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < count and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count}")
    return count * VALUE_SIZE / elapsed / MB


async def connection_rate(broker: SecuredBroker, listener: str, count: int) -> float:
    security = broker.our_security(listener)
    start = time.perf_counter()
    for _ in range(count):
        conn = BrokerConnection(HOST, broker.ports[listener], security=security)
        await conn.connect()
        await conn.close()
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--messages", type=int, help="1 KiB messages per run (default 100000; quick 10000)")
    parser.add_argument("--connections", type=int, help="connections per set-up measurement (default 200; quick 20)")
    parser.add_argument("--repeat", type=int, help="runs per throughput figure, best kept (default 3; quick 1)")
    parser.add_argument("--py-spy", type=Path, metavar="DIR",
                        help="profile the broker with py-spy during each phase; collapsed stacks go to DIR")
    args = parser.parse_args()
    messages = args.messages or (10_000 if args.quick else 100_000)
    connections = args.connections or (20 if args.quick else 200)
    repeat = args.repeat or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory(prefix="slipstream-security-bench-") as tmp:
        broker = SecuredBroker(Path(tmp))
        broker.start()
        try:
            admin = AdminClient(broker.client_conf("PLAINTEXT"))
            results: dict[str, dict[str, float]] = {"PLAINTEXT": {}, "SASL_SSL": {}}
            cpu: dict[str, dict[str, float]] = {"PLAINTEXT": {}, "SASL_SSL": {}}
            for run in range(repeat):
                # Alternate which listener goes first, so warm-up favours neither.
                order = ("PLAINTEXT", "SASL_SSL") if run % 2 == 0 else ("SASL_SSL", "PLAINTEXT")
                for listener in order:
                    topic = f"bench-{listener.lower()}-{run}"
                    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
                        topic
                    ].result(30)
                    conf = broker.client_conf(listener)
                    with CpuMeter(broker.pid) as produce_cpu, profiled(args.py_spy, broker.pid, listener, "produce", run):
                        p = produce(conf, topic, messages)
                    with CpuMeter(broker.pid) as consume_cpu, profiled(args.py_spy, broker.pid, listener, "consume", run):
                        c = consume(conf, topic, messages)
                    log(f"run {run + 1}/{repeat} {listener}: produce {p:.1f} MB/s, consume {c:.1f} MB/s; "
                        f"broker CPU {produce_cpu.broker_s:.2f} s / {consume_cpu.broker_s:.2f} s, "
                        f"client CPU {produce_cpu.client_s:.2f} s / {consume_cpu.client_s:.2f} s")
                    best = results[listener]
                    best["produce"] = max(best.get("produce", 0.0), p)
                    best["consume"] = max(best.get("consume", 0.0), c)
                    megabytes = messages * VALUE_SIZE / MB
                    for key, seconds in (("produce broker", produce_cpu.broker_s), ("consume broker", consume_cpu.broker_s),
                                         ("produce client", produce_cpu.client_s), ("consume client", consume_cpu.client_s)):
                        per_mb = seconds / megabytes * 1000  # CPU ms per MB
                        cpu[listener][key] = min(cpu[listener].get(key, per_mb), per_mb)
            rates = {
                listener: asyncio.run(connection_rate(broker, listener, connections))
                for listener in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
            }
        finally:
            broker.stop()
    plain, secure = results["PLAINTEXT"], results["SASL_SSL"]
    print(f"Security cost, one broker, {messages} x 1 KiB, {PARTITIONS} partitions, acks=all, "
          f"confluent-kafka; best of {repeat}\n")
    print("| measure | PLAINTEXT | SASL_SSL (SCRAM-SHA-512) | SASL_SSL / PLAINTEXT |")
    print("|---|---:|---:|---:|")
    for what in ("produce", "consume"):
        print(f"| {what} MB/s | {plain[what]:.1f} | {secure[what]:.1f} | {secure[what] / plain[what]:.2f} |")
    print()
    print("CPU milliseconds per MB of values (lowest of the runs; the broker is one process, the client "
          "is librdkafka in the bench process)\n")
    print("| CPU ms per MB | PLAINTEXT | SASL_SSL | SASL_SSL / PLAINTEXT |")
    print("|---|---:|---:|---:|")
    for key in ("produce broker", "produce client", "consume broker", "consume client"):
        a, b = cpu["PLAINTEXT"][key], cpu["SASL_SSL"][key]
        cpu_ratio = f"{b / a:.2f}" if a > 0 else "-"  # /proc counts 10 ms ticks: a quick run may show 0
        print(f"| {key} | {a:.1f} | {b:.1f} | {cpu_ratio} |")
    print()
    print(f"Connection set-up with Slipstream's client ({connections} in a row: connect, ApiVersions, SASL)\n")
    print("| listener | connections/s |")
    print("|---|---:|")
    for listener, rate in rates.items():
        label = listener + (" (SCRAM-SHA-512)" if listener.startswith("SASL") else "")
        print(f"| {label} | {rate:.0f} |")
    ratio = secure["produce"] / plain["produce"]
    log(f"produce ratio {ratio:.2f} (target >= 0.70)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
