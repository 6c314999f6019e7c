#!/usr/bin/env python3
"""A cluster of 1, 2 and 3 brokers over one PostgreSQL database, against the disk backend.

    python bench/cluster.py            # full run
    python bench/cluster.py --quick    # smoke run
    python bench/cluster.py --count 30000 --repeat 3 --no-disk --no-failover --costs
                                       # 1 vs 2 vs 3 brokers only, medians of 3, with costs
    git worktree add /tmp/before main && python bench/cluster.py --against /tmp/before/src ...
                                       # before/after: each cluster also from that tree

One PostgreSQL server (started here in a temporary directory, fsync on) and Slipstream
broker subprocesses: one ``--storage disk`` broker, then 1, 2 and 3 brokers
``--storage postgres`` in a fresh schema of that server each time (every ``--repeat`` round runs
them all, in that order). confluent-kafka produces 1 KiB values - drawn from
``--values`` distinct random values (default 4,099, so a partition's ~1 MB batch holds
no value twice and hardly compresses; 1 sends the same value every time) - with
acks=all and idempotence (linger.ms=5) round-robin over the partitions,
bootstrapped through every broker (it sends each partition to its leader), then
consumes them from the beginning (``--repeat``: every size that many times, in turn,
and the median reported; ``--costs``: what the produce phase cost - CPU seconds of
each broker and of PostgreSQL, and the database's commits and WAL syncs;
``--statements``: also the statements PostgreSQL ran while producing, by kind, from
pg_stat_statements; ``--latency``: after each run, the p50/p99 ack latency of
records sent at 1,000 a second; ``--broker-setting``: a setting of this tree's
brokers, not ``--against``'s). Then failover: a two-member group commits as it
consumes while a producer runs; the broker that coordinates the group is killed with
SIGKILL; the time until the group's next successful commit is reported, over
``--rounds`` kills (the killed broker is started again between rounds). ``--keep``
keeps the work directory: each broker's log, ``<cluster>/broker-<node>.log``, and
PostgreSQL's, ``postgres.log``.

Issue 16's targets: one Postgres-backed broker reaches at least 30% of the disk
backend's produce throughput, 3 brokers at least as much as one, and a group consumes
again within its session timeout + 5 s after its coordinator is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from harness import (
    BenchError,
    create_topics,
    dying_with_bench,
    log,
    on_signal,
    signalled_if_bench_dies,
    work_directory,
)
from produce_consume import WARMUP_TOPIC, Rate, consume_phase, produce_phase

from slipstream.testing.ports import free_port
from slipstream.testing.postgres import (
    PostgresServer,
    find_postgres_bin,
    fresh_database,
    wait_until_accepting,
)

VALUE_SIZE = 1024
# Prime, so round-robin over any partition count still cycles each partition through
# every value: no ~1 MB batch repeats a value.
DISTINCT_VALUES = 4099
SESSION_MS = 3000  # cluster.broker.session.ms
GROUP_SESSION_MS = 6000
OFFSETS_PARTITIONS = 6
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    """CPU time of ``pid``, to the nanosecond: every thread's time on a CPU
    (/proc/<pid>/task/*/schedstat; /proc/<pid>/stat counts in 10 ms ticks, too coarse
    for a broker's share of a few seconds' run), plus, with ``with_children``, the user
    + system time of the children it has reaped (ticks: all /proc keeps of them)."""
    total = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that just ended
                total += int((task / "schedstat").read_text().split()[0]) / 1e9
        if with_children:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[13]) + int(fields[14])) / CLOCK_TICKS  # cutime, cstime
    except OSError:  # gone
        return total
    return total


def postgres_cpu_seconds(pg: PostgresServer) -> float:
    """The server's CPU: the postmaster with its reaped children, plus every live one."""
    pids = pg.server_pids()
    return cpu_seconds(pids[0], with_children=True) + sum(cpu_seconds(pid) for pid in pids[1:])


@dataclass
class Costs:
    """What one produce phase cost."""

    broker_cpu: list[float] = field(default_factory=list)  # seconds, per broker
    postgres_cpu: float = 0.0
    commits: int = 0  # transactions committed in the cluster's database
    wal_syncs: int = 0  # WAL fsyncs of the server (pg_stat_wal)

    def __str__(self) -> str:
        per_broker = " + ".join(f"{c:.2f}" for c in self.broker_cpu)
        return (
            f"CPU s: brokers {per_broker} = {sum(self.broker_cpu):.2f}, postgres {self.postgres_cpu:.2f}; "
            f"commits {self.commits:,}, WAL syncs {self.wal_syncs:,}"
        )


# Server settings for --statements: count every statement by kind while producing.
STATEMENT_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.max": "1000"}


def reset_statements(server_url: str) -> None:
    import asyncpg

    async def reset() -> None:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await conn.execute("SELECT pg_stat_statements_reset()")
        finally:
            await conn.close()

    asyncio.run(reset())


def autovacuum_runs(server_url: str) -> int:
    """Autovacuum and autoanalyze runs over every table of the server's database so far."""
    import asyncpg

    async def read() -> int:
        conn = await asyncpg.connect(server_url)
        try:
            return int(
                await conn.fetchval("SELECT sum(autovacuum_count + autoanalyze_count) FROM pg_stat_all_tables") or 0
            )
        finally:
            await conn.close()

    return asyncio.run(read())


def statement_counts(server_url: str) -> list[tuple[int, int, float, str]]:
    """(calls, rows, total ms, statement) of every statement run since ``reset_statements``,
    most called first (the reading connection's own left out)."""
    import asyncpg

    async def read() -> list[tuple[int, int, float, str]]:
        conn = await asyncpg.connect(server_url)
        try:
            rows = await conn.fetch(
                "SELECT calls, rows, total_exec_time, query FROM pg_stat_statements "
                "WHERE query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_stat_database%' "
                "ORDER BY calls DESC"
            )
        finally:
            await conn.close()
        return [
            (int(r["calls"]), int(r["rows"]), float(r["total_exec_time"]), " ".join(r["query"].split())) for r in rows
        ]

    return asyncio.run(read())


def database_counters(database_url: str) -> tuple[int, int]:
    """(commits of this database, WAL syncs of the server) as the statistics say now."""
    import asyncpg

    async def read() -> tuple[int, int]:
        conn = await asyncpg.connect(database_url)
        try:
            commits = await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            syncs = await conn.fetchval("SELECT wal_sync FROM pg_stat_wal")
        finally:
            await conn.close()
        return int(commits), int(syncs)

    return asyncio.run(read())


class BrokerSet:
    """Broker subprocesses on free ports; all killed on exit, and with the bench."""

    def __init__(self, tmp: Path, args: list[str], source: str | None = None) -> None:
        """``source``: another tree's ``src`` directory the brokers run from."""
        self.tmp, self.args = tmp, args
        self.env = None if source is None else dict(os.environ, PYTHONPATH=source)
        tmp.mkdir(parents=True, exist_ok=True)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.ports: dict[int, int] = {}

    def start(self, node: int) -> None:
        port = self.ports.setdefault(node, free_port())
        command = [
            sys.executable, "-m", "slipstream", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--data-dir", str(self.tmp / f"data-{node}"), "--log-level", "WARNING",
            "--set", f"node.id={node}", *self.args,
        ]  # fmt: skip
        with open(self.tmp / f"broker-{node}.log", "ab") as out:
            self.procs[node] = subprocess.Popen(
                dying_with_bench(command), stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=self.env
            )
        wait_until_accepting(f"x@127.0.0.1:{port}/", timeout_s=60)

    def kill(self, node: int) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in sorted(self.procs))

    def close(self) -> None:
        for node in list(self.procs):
            self.kill(node)


def wait_led(bootstrap: str, topic: str, partitions: int, brokers: int, timeout: float = 60) -> None:
    """Until Metadata names ``brokers`` brokers and a leader for every partition of ``topic``."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        found = md.topics.get(topic)
        if (
            len(md.brokers) == brokers
            and found is not None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise BenchError(f"{topic}: not every partition has a leader among {brokers} brokers after {timeout:.0f}s")


def throughput(
    name: str,
    brokers: BrokerSet,
    count: int,
    partitions: int,
    costs: tuple[PostgresServer, str] | None = None,
    statements: bool = False,
    distinct_values: int = DISTINCT_VALUES,
    latency: bool = False,
) -> tuple[Rate, Rate]:
    """``costs``: the server and the cluster's database, to log what producing cost;
    ``statements``: also the statements it ran, by kind (the server preloads
    pg_stat_statements)."""
    topic = f"bench-{name.replace(' ', '-')}"
    create_topics(brokers.bootstrap, {WARMUP_TOPIC: 1, topic: partitions}, 30)
    wait_led(brokers.bootstrap, topic, partitions, len(brokers.procs))
    wait_led(brokers.bootstrap, WARMUP_TOPIC, 1, len(brokers.procs))
    log(f"{name}: producing {count} x {VALUE_SIZE} B")

    def sample() -> Costs:
        assert costs is not None
        commits, syncs = database_counters(costs[1])
        return Costs([cpu_seconds(p.pid) for _, p in sorted(brokers.procs.items())],
                     postgres_cpu_seconds(costs[0]), commits, syncs)  # fmt: skip

    before = sample() if costs else None
    vacuums = 0
    if costs and statements:
        reset_statements(costs[0].url)
        vacuums = autovacuum_runs(costs[0].url)
    produced = produce_phase(brokers.bootstrap, topic, partitions, VALUE_SIZE, count, True, 600, distinct_values)
    log(f"{name}: produce {produced}")
    if before is not None:
        time.sleep(1.0)  # backends report their statistics within a second of going idle
        after = sample()
        spent = Costs(
            [a - b for a, b in zip(after.broker_cpu, before.broker_cpu, strict=True)],
            after.postgres_cpu - before.postgres_cpu,
            after.commits - before.commits,
            after.wal_syncs - before.wal_syncs,
        )
        log(f"{name}: produce cost {spent}; per 1,000 records: {per_thousand(spent, count)}")
        if costs is not None and statements:
            log(f"{name}:   autovacuum/autoanalyze runs meanwhile: {autovacuum_runs(costs[0].url) - vacuums}")
            for calls, rows, total_ms, query in statement_counts(costs[0].url)[:25]:
                log(f"{name}:   {calls * 1000 / count:8.2f} calls/1k rec {rows * 1000 / count:8.2f} rows/1k rec "
                    f"{total_ms:9.1f} ms  {query[:150]}")  # fmt: skip
    consumed = consume_phase(brokers.bootstrap, topic, partitions, count, {}, 600)
    log(f"{name}: consume {consumed}")
    if latency:
        p50, p99 = ack_latency(brokers.bootstrap, topic, partitions)
        log(f"{name}: ack latency at {LATENCY_RATE} rec/s: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    return produced, consumed


# The latency probe's pace: far below what any cluster size sustains, so what it
# measures is a produce's own path (linger.ms, the broker, its commit), not a queue.
LATENCY_RATE = 1000
LATENCY_SECONDS = 3.0


def ack_latency(bootstrap: str, topic: str, partitions: int) -> tuple[float, float]:
    """(p50, p99) seconds from produce() to acknowledgement, records sent at LATENCY_RATE."""
    from confluent_kafka import Producer

    latencies: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": "none"})  # fmt: skip

    def delivered(err: object, msg: Any) -> None:
        if err is not None:
            raise BenchError(f"latency probe: {err}")
        latencies.append(msg.latency())

    value = os.urandom(VALUE_SIZE)
    for partition in range(partitions):  # warm up: metadata, connections and the producer id
        producer.produce(topic, value, partition=partition)
    if producer.flush(60):
        raise BenchError("latency probe: warm-up records unacknowledged after 60 s")
    latencies.clear()
    total = int(LATENCY_RATE * LATENCY_SECONDS)
    start = time.perf_counter()
    for i in range(total):
        time.sleep(max(0.0, start + i / LATENCY_RATE - time.perf_counter()))
        producer.produce(topic, value, partition=i % partitions, on_delivery=delivered)
        producer.poll(0)
    if producer.flush(60):
        raise BenchError("latency probe: records unacknowledged after 60 s")
    latencies.sort()
    return latencies[len(latencies) // 2], latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)]


def per_thousand(spent: Costs, count: int) -> str:
    scale = 1000 / count
    return (
        f"broker CPU {sum(spent.broker_cpu) * scale * 1000:.1f} ms, postgres CPU {spent.postgres_cpu * scale * 1000:.1f} ms, "
        f"commits {spent.commits * scale:.1f}, WAL syncs {spent.wal_syncs * scale:.1f}"
    )


def coordinator_of(database_url: str, group: str) -> int:
    """The leader of the group's ``__consumer_offsets`` partition, as the database says."""
    import asyncpg

    from slipstream.coordinator import OFFSETS_TOPIC, partition_for

    async def read() -> int:
        conn = await asyncpg.connect(database_url)
        try:
            owner = await conn.fetchval(
                "SELECT owner FROM partition_leases WHERE topic = $1 AND partition = $2",
                OFFSETS_TOPIC,
                partition_for(group, OFFSETS_PARTITIONS),
            )
        finally:
            await conn.close()
        if owner is None:
            raise BenchError(f"no broker leads the partition of group {group}")
        return int(owner)

    return asyncio.run(read())


@dataclass
class Failover:
    seconds: list[float]  # per round: kill -9 of the coordinator -> the group's next commit
    acked: int
    lost: int  # acknowledged, not in the log
    duplicated: int  # in the log more than once


def failover_rounds(brokers: BrokerSet, database_url: str, rounds: int) -> Failover:
    """Kill the group's coordinator ``rounds`` times while an idempotent producer and
    the group run; then check the log holds every acknowledged record exactly once."""
    from confluent_kafka import Consumer, KafkaException, Producer

    topic, group = "bench-failover", "bench-failover-group"
    create_topics(brokers.bootstrap, {topic: 6}, 30)
    wait_led(brokers.bootstrap, topic, 6, len(brokers.procs))
    stop = threading.Event()
    commits: list[float] = []
    acked: set[int] = set()
    padding = os.urandom(VALUE_SIZE - 10)

    def produce() -> None:
        producer = Producer({"bootstrap.servers": brokers.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 120_000})  # fmt: skip

        def delivered(err: object, msg: Any) -> None:
            if err is None:
                acked.add(int(msg.value()[:10]))

        i = 0
        while not stop.is_set():
            producer.produce(topic, b"%010d" % i + padding, on_delivery=delivered)
            i += 1
            producer.poll(0.002)
        producer.flush(120)

    def consume(bootstrap: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": GROUP_SESSION_MS, "heartbeat.interval.ms": 500,
        })  # fmt: skip
        consumer.subscribe([topic])
        while not stop.is_set():
            if consumer.consume(500, 0.2):
                try:
                    consumer.commit(asynchronous=False)
                    commits.append(time.monotonic())
                except KafkaException:
                    pass
        consumer.close()

    nodes = sorted(brokers.procs)
    threads = [threading.Thread(target=produce, daemon=True)]
    threads += [
        threading.Thread(target=consume, args=(f"127.0.0.1:{brokers.ports[n]}",), daemon=True) for n in nodes[:2]
    ]
    for t in threads:
        t.start()
    times: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while not commits:
            if time.monotonic() > deadline:
                raise BenchError("the failover group never committed")
            time.sleep(0.1)
        for round_ in range(rounds):
            time.sleep(2)
            victim = coordinator_of(database_url, group)
            brokers.kill(victim)
            killed = time.monotonic()
            deadline = killed + 60
            while not any(t > killed for t in commits):
                if time.monotonic() > deadline:
                    raise BenchError(f"round {round_ + 1}: no commit within 60 s of killing broker {victim}")
                time.sleep(0.02)
            took = next(t for t in commits if t > killed) - killed
            log(f"failover round {round_ + 1}: coordinator {victim} killed, next commit after {took:.2f}s")
            times.append(took)
            brokers.start(victim)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=150)
    seen = read_all(brokers.bootstrap, topic, 6)
    counts: dict[int, int] = {}
    for value in seen:
        counts[value] = counts.get(value, 0) + 1
    lost = sum(1 for v in acked if v not in counts)
    duplicated = sum(1 for n in counts.values() if n > 1)
    log(f"failover: {len(acked)} acknowledged, {lost} lost, {duplicated} in the log twice or more")
    return Failover(times, len(acked), lost, duplicated)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The index of every record of ``topic``, read up to the high watermarks."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{os.getpid()}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})  # fmt: skip
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        values: list[int] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 300
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise BenchError(f"could not read {topic} to its end")
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is not None:
                    continue
                value, offset, partition = msg.value(), msg.offset(), msg.partition()
                assert value is not None and offset is not None and partition is not None
                values.append(int(value[:10]))
                if offset + 1 >= ends[partition]:
                    done.add(partition)
        return values
    finally:
        consumer.close()


def median_rates(rates: list[tuple[Rate, Rate]]) -> tuple[Rate, Rate]:
    """The runs' median produce and median consume (each its own median run)."""

    def middle(phase: list[Rate]) -> Rate:
        rate = median(r.msgs_per_s for r in phase)
        return (
            min(phase, key=lambda r: abs(r.msgs_per_s - rate))
            if len(phase) % 2
            else Rate(phase[0].messages, phase[0].value_bytes, phase[0].messages / rate)
        )

    return middle([p for p, _ in rates]), middle([c for _, c in rates])


def share(rate: Rate, of: Rate) -> str:
    return f"{rate.msgs_per_s / of.msgs_per_s:.0%}" if of.seconds and of.msgs_per_s else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke size")
    parser.add_argument("--count", type=int, help="records per run (default 100000, quick 10000)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the measured topic (default 6)")
    parser.add_argument(
        "--values", type=int, default=DISTINCT_VALUES,
        help=f"distinct random values the records cycle through (default {DISTINCT_VALUES}; 1: all alike)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, help="coordinator kills (default 3, quick 1)")
    parser.add_argument("--sizes", default="1,2,3", help="cluster sizes to measure (default 1,2,3)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of every size, in turn; medians reported (default 1)"
    )
    parser.add_argument("--no-disk", action="store_true", help="skip the disk broker (vs disk shows n/a)")
    parser.add_argument(
        "--no-failover", action="store_true",
        help="skip the kill -9 rounds (they run on the last round's 3-broker cluster: only if --sizes has 3)",
    )  # fmt: skip
    parser.add_argument("--costs", action="store_true", help="log CPU, commits and WAL syncs of each produce")
    parser.add_argument(
        "--statements", action="store_true", help="with --costs: log the statements of each produce, by kind"
    )
    parser.add_argument(
        "--server-setting", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the PostgreSQL server (-c NAME=VALUE), e.g. commit_delay=1000; repeatable",
    )
    parser.add_argument(
        "--latency", action="store_true",
        help=f"after each consume, log the p50/p99 ack latency of records sent at {LATENCY_RATE}/s",
    )  # fmt: skip
    parser.add_argument(
        "--broker-setting", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of this tree's postgres brokers (not --against's: a setting against its absence); repeatable",
    )
    parser.add_argument(
        "--against", metavar="SRC", help="also run every cluster from another tree's src directory, interleaved"
    )
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the work directory, the brokers' logs (<cluster>/broker-<node>.log) and PostgreSQL's (postgres.log); its path is logged",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    sizes = [int(n) for n in opts.sizes.split(",")]
    if 3 not in sizes and not opts.no_failover:
        log("no failover rounds: they run on the 3-broker cluster, and --sizes has no 3")
    opts.count = opts.count or (10_000 if opts.quick else 100_000)
    opts.rounds = opts.rounds or (1 if opts.quick else 3)
    if find_postgres_bin() is None:
        log("PostgreSQL is not installed: run scripts/setup_postgres.sh")
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    runs: dict[str, list[tuple[Rate, Rate]]] = {}
    failover: Failover | None = None
    try:
        with work_directory("slipstream-cluster-", opts.keep) as tmp, ExitStack() as stack:
            settings = dict(STATEMENT_SETTINGS if opts.statements else {})
            settings.update(setting.split("=", 1) for setting in opts.server_setting)
            if settings:
                log(f"PostgreSQL settings: {settings}")
            pg = stack.enter_context(
                PostgresServer(settings=settings, keep_log=tmp / "postgres.log" if opts.keep else None)
            )
            # pg_ctl detaches the server: no parent-death signal reaches it. SIGQUIT: its
            # immediate shutdown.
            stack.enter_context(signalled_if_bench_dies(pg.server_pids()[0], signal.SIGQUIT))
            sources: list[str | None] = [None] if opts.against is None else [None, opts.against]
            for run, size, source in ((r, n, s) for r in range(opts.repeat) for n in sizes for s in sources):
                if size == sizes[0] and source is None and not opts.no_disk:  # the disk broker in every round
                    disk = BrokerSet(tmp / f"disk-{run}", ["--storage", "disk"])
                    stack.callback(disk.close)
                    disk.start(1)
                    runs.setdefault("disk, 1 broker", []).append(
                        throughput("disk", disk, opts.count, opts.partitions, distinct_values=opts.values)
                    )
                    disk.close()
                url = fresh_database(pg.url)
                cluster = BrokerSet(tmp / f"pg-{size}-{run}{'-against' if source else ''}", [
                    "--storage", "postgres", "--database-url", url,
                    "--set", f"cluster.broker.session.ms={SESSION_MS}",
                    "--set", f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
                    "--set", "group.initial.rebalance.delay.ms=0",
                    *(arg for setting in opts.broker_setting if source is None for arg in ("--set", setting)),
                ], source)  # fmt: skip
                stack.callback(cluster.close)
                for node in range(1, size + 1):
                    cluster.start(node)
                name = f"postgres, {size} broker{'s' if size > 1 else ''}{' (--against)' if source else ''}"
                runs.setdefault(name, []).append(
                    throughput(
                        f"pg{size}{'-against' if source else ''}",
                        cluster,
                        opts.count,
                        opts.partitions,
                        (pg, url) if opts.costs else None,
                        opts.statements,
                        opts.values,
                        opts.latency,
                    )
                )
                if size == 3 and run == opts.repeat - 1 and not opts.no_failover and source is None:
                    failover = failover_rounds(cluster, url, opts.rounds)
                cluster.close()
    except BenchError as exc:
        log(f"benchmark failed: {exc}")
        return 1
    results = {name: median_rates(rates) for name, rates in runs.items()}
    missing = Rate(0, 0, 0.0)
    disk_produce, disk_consume = results.get("disk, 1 broker", (missing, missing))
    print(
        f"Cluster over PostgreSQL vs one disk broker: {opts.count} x 1 KiB records "
        f"({min(opts.values, opts.count)} distinct values), "
        f"{opts.partitions} partitions, "
        f"acks=all, idempotent, linger.ms=5; median of {opts.repeat} run(s); all brokers, PostgreSQL and the client on one machine "
        f"({platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}), {time.strftime('%Y-%m-%d')}.\n"
    )
    print("| brokers | produce msg/s | produce MB/s | vs disk | consume msg/s | consume MB/s | vs disk |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (produced, consumed) in results.items():
        print(
            f"| {name} | {produced.msgs_per_s:,.0f} | {produced.mb_per_s:.1f} | "
            f"{share(produced, disk_produce)} | {consumed.msgs_per_s:,.0f} | "
            f"{consumed.mb_per_s:.1f} | {share(consumed, disk_consume)} |"
        )
    if len(runs) > 1 and opts.repeat > 1:
        print("\nEvery run's produce msg/s: " + "; ".join(
            f"{name}: " + ", ".join(f"{p.msgs_per_s:,.0f}" for p, _ in rates) for name, rates in runs.items()
        ))  # fmt: skip
    one = results.get("postgres, 1 broker", (missing, missing))[0]
    three = results.get("postgres, 3 brokers", (missing, missing))[0]
    if one.seconds and disk_produce.seconds:
        print(f"\nTarget: 1 postgres broker >= 30% of disk produce: {share(one, disk_produce)} "
              f"({'met' if one.msgs_per_s >= 0.3 * disk_produce.msgs_per_s else 'NOT met'}).")  # fmt: skip
    if one.seconds and three.seconds:
        print(f"Target: 3 brokers >= 1 broker: {share(three, one)} "
              f"({'met' if three.msgs_per_s >= one.msgs_per_s else 'NOT met'}).")  # fmt: skip
    if failover is not None:
        worst = max(failover.seconds)
        limit = GROUP_SESSION_MS / 1000 + 5
        print(
            f"Failover (kill -9 of the group's coordinator -> the group's next commit), {len(failover.seconds)} "
            "rounds: " + ", ".join(f"{t:.1f} s" for t in failover.seconds)
            + f"; target <= session timeout + 5 s = {limit:.0f} s: {'met' if worst <= limit else 'NOT met'}."
        )
        clean = failover.lost == 0 and failover.duplicated == 0
        print(
            f"Across the kills: {failover.acked} records acknowledged, {failover.lost} lost, "
            f"{failover.duplicated} duplicated (target 0 and 0: {'met' if clean else 'NOT met'})."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
