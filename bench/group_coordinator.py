#!/usr/bin/env python3
"""Consumer-group coordinator benchmark: Slipstream, with Tansu and noida-db where they can.

    python bench/group_coordinator.py            # full run, a few minutes
    python bench/group_coordinator.py --quick    # smoke run, about a minute

Measures, with confluent-kafka (librdkafka) as the client:

1. one consumer: subscribe -> first record (median of several runs, each a new group),
   against every broker;
2. 10 and 50 consumers started together (threads, one process) on a 60-partition topic,
   several runs each for Slipstream (--herd-runs):
   time until every consumer has its assignment and how many generations it took;
3. sustained OffsetCommit and Heartbeat requests per second, from a separate load-generator
   process that speaks the protocol directly (one pre-encoded frame per request kind,
   pipelined over raw connections; only the correlation id changes per request);
4. capacity: G groups x 5 members heartbeating every 3 s (one connection per member,
   load generator in two processes): expired members, heartbeat latency p50/p99, broker RSS.

Brokers run one after another as subprocesses on 127.0.0.1 only; every wait is bounded
and every process is killed on exit. Progress goes to stderr; the Markdown report to stdout.
The process, broker and topic helpers come from ``bench/broker_throughput.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer
from harness import (
    HOST,
    MB,
    BenchError,
    BrokerSpec,
    RssSampler,
    collect,
    connect_members,
    cpu_of,
    create_topics,
    discover_brokers,
    kill_children,
    log,
    mark,
    ms,
    on_signal,
    pct,
    run_child,
    spec_broker,
    stop_all,
)

SESSION_MS = 30_000
MEMBERS_PER_GROUP = 5
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
NAMED_TOPICS_OFFSET_COMMIT_MAX_VERSION = 9
SCRIPT = os.path.abspath(__file__)  # the load generators run this script as children


def _quiet(_err: Any) -> None:
    return None


# --------------------------------------------------------------------------- (1) first record


def first_record_once(bootstrap: str, topic: str, group: str, timeout: float) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            # The only non-default setting: the record was produced before subscribing.
            "auto.offset.reset": "earliest",
            "error_cb": _quiet,
            "log.connection.close": False,
        }
    )
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        deadline = start + timeout
        while time.perf_counter() < deadline:
            msg = consumer.poll(0.005)
            if msg is None:
                continue
            if msg.error():
                continue
            return time.perf_counter() - start
        raise BenchError(f"no record within {timeout:.0f}s")
    finally:
        closer = threading.Thread(target=consumer.close, daemon=True)
        closer.start()
        closer.join(10)


def produce_one(bootstrap: str, topic: str, timeout: float) -> None:
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "on_delivery": on_delivery, "error_cb": _quiet}
    )
    producer.produce(topic, b"hello", partition=0)
    if producer.flush(timeout) or errors:
        raise BenchError(f"produce failed: {errors[0] if errors else 'timeout'}")


@dataclass
class FirstRecord:
    times: list[float] = field(default_factory=list)
    error: str | None = None


def measure_first_record(bootstrap: str, runs: int, timeout: float) -> FirstRecord:
    result = FirstRecord()
    try:
        create_topics(bootstrap, {"first-record": 1}, timeout)
        produce_one(bootstrap, "first-record", timeout)
        for i in range(runs):
            result.times.append(first_record_once(bootstrap, "first-record", f"fr-{i}", timeout))
    except Exception as exc:
        result.error = str(exc).splitlines()[0]
    return result


# --------------------------------------------------------------------------- (2) many consumers


@dataclass
class Herd:
    consumers: int
    stable_after: float | None = None
    generations: int | None = None
    assigned: int = 0
    error: str | None = None


def measure_herd(bootstrap: str, topic: str, n: int, timeout: float, settle: float) -> Herd:
    """Start n consumers in threads at once; wait until all have assignments and settle."""
    group = f"herd-{n}-{random.randrange(1 << 30)}"
    assigns: list[list[float]] = [[] for _ in range(n)]
    current: list[int] = [0] * n
    stop = threading.Event()
    start_gate = threading.Barrier(n + 1)
    start = 0.0
    consumers: list[Consumer] = []
    callbacks: list[tuple[Any, Any]] = []

    def make(i: int) -> Consumer:
        def on_assign(_c: Any, parts: list[Any]) -> None:
            assigns[i].append(time.perf_counter())
            current[i] = len(parts)

        def on_revoke(_c: Any, _parts: list[Any]) -> None:
            current[i] = 0

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "error_cb": _quiet,
                "log.connection.close": False,
            }
        )
        callbacks.append((on_assign, on_revoke))
        return c

    def run(i: int) -> None:
        c = consumers[i]
        start_gate.wait(30)
        on_assign, on_revoke = callbacks[i]
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            c.poll(0.02)

    consumers = [make(i) for i in range(n)]
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    result = Herd(consumers=n)
    try:
        start_gate.wait(30)
        start = time.perf_counter()
        deadline = start + timeout
        while time.perf_counter() < deadline:
            if all(current[i] > 0 for i in range(n)):
                break
            time.sleep(0.005)
        # Keep polling a while to catch any further rebalance.
        time.sleep(settle)
        result.assigned = sum(1 for i in range(n) if current[i] > 0)
        if result.assigned < n:
            result.error = f"only {result.assigned}/{n} consumers assigned within {timeout:.0f}s"
        else:
            result.stable_after = max(a[-1] for a in assigns) - start
            result.generations = max(len(a) for a in assigns)
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        closers = [threading.Thread(target=c.close, daemon=True) for c in consumers]
        for t in closers:
            t.start()
        for t in closers:
            t.join(15)
    return result


# --------------------------------------------------------------------------- protocol load


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    return struct.pack(">hi", 0, 1) + _str(topic) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    body = struct.pack(">hi", 0, 1) + _str(topic) + struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">i", p) for p in partitions)
    return body + struct.pack(">i", -1)


async def join_member(conn: Any, group: str, topic: str, timeout: float) -> tuple[str, int, Any]:
    """JoinGroup (with the MEMBER_ID_REQUIRED round trip); returns member, generation, reply."""
    from slipstream.protocol.apis import join_group as jg

    member = ""
    for _ in range(3):
        reply = await conn.request(
            jg.SPEC,
            jg.JoinGroupRequest(
                group_id=group,
                session_timeout_ms=SESSION_MS,
                rebalance_timeout_ms=SESSION_MS,
                member_id=member,
                protocol_type="consumer",
                protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=subscription(topic))],
            ),
            timeout_s=timeout,
        )
        if reply.error_code == MEMBER_ID_REQUIRED:
            member = reply.member_id
            continue
        if reply.error_code:
            raise BenchError(f"JoinGroup error {reply.error_code}")
        return reply.member_id, reply.generation_id, reply
    raise BenchError("JoinGroup kept asking for a member id")


async def sync_member(
    conn: Any, group: str, topic: str, member: str, generation: int, reply: Any, timeout: float
) -> None:
    from slipstream.protocol.apis import sync_group as sg

    assignments = []
    if reply.leader == member:
        ids = sorted(m.member_id for m in reply.members)
        assignments = [
            sg.SyncGroupRequestAssignment(member_id=m, assignment=assignment(topic, [i]))
            for i, m in enumerate(ids)
        ]
    answer = await conn.request(
        sg.SPEC,
        sg.SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments,
        ),
        timeout_s=timeout,
    )
    if answer.error_code:
        raise BenchError(f"SyncGroup error {answer.error_code}")


_CORR = struct.Struct(">i")
_SIZE_CORR = struct.Struct(">ii")


class _Pipelined(asyncio.Protocol):
    """One load-generator connection: keeps ``depth`` copies of one pre-encoded request in flight.

    Each send only patches the correlation id; each response is checked for that id (so
    out-of-order answers fail the run) and byte-compared with a known-good body; a body that
    differs is decoded and its error codes counted, never served.
    """

    def __init__(self, frame: bytes, depth: int, spec: Any, version: int, ok_body: bytes | None) -> None:
        # frame = size(4) api_key(2) api_version(2) correlation_id(4) rest
        self.head, self.tail = frame[:8], frame[12:]
        self.depth = depth
        self.spec, self.version = spec, version
        self.ok_body = ok_body
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.next_send = 0
        self.next_recv = 0
        self.sending = True
        self.ok = 0
        self.errors: dict[str, int] = {}
        self.idle = asyncio.get_running_loop().create_future()
        self.failed: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def _frames(self, n: int) -> list[bytes]:
        head, tail, pack = self.head, self.tail, _CORR.pack
        c = self.next_send
        self.next_send = c + n
        return [head + pack(i & 0x7FFFFFFF) + tail for i in range(c, c + n)]

    def start(self) -> None:
        assert self.transport is not None
        self.transport.writelines(self._frames(self.depth))

    def stop(self) -> None:
        self.sending = False
        if self.next_recv == self.next_send and not self.idle.done():
            self.idle.set_result(None)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end, got = 0, len(buf), 0
        unpack, ok_body = _SIZE_CORR.unpack_from, self.ok_body
        while end - pos >= 8:
            size, corr = unpack(buf, pos)
            if end - pos - 4 < size:
                break
            if corr != self.next_recv & 0x7FFFFFFF:
                self.fail(f"response {corr} arrived when {self.next_recv} was due")
                return
            self.next_recv += 1
            body = buf[pos + 8 : pos + 4 + size]
            if ok_body is not None and body == ok_body:
                self.ok += 1
            else:
                self.check(body)
            pos += 4 + size
            got += 1
        if pos:
            del buf[:pos]
        if self.sending and got:
            assert self.transport is not None
            self.transport.writelines(self._frames(got))
        elif not self.sending and self.next_recv == self.next_send and not self.idle.done():
            self.idle.set_result(None)

    def check(self, body: bytes | bytearray) -> None:
        """Decode a body that is not the known-good one; count it as served only if error-free."""
        view = memoryview(body)
        pos = 1 if self.spec.response_header_version(self.version) >= 1 else 0  # header tags
        r = self.spec.decode_response(view, pos, self.version)
        codes = [x.error_code for t in r.topics for x in t.partitions] if hasattr(r, "topics") else [r.error_code]
        bad = [c for c in codes if c]
        if bad:
            key = str(bad[0])
            self.errors[key] = self.errors.get(key, 0) + 1
        else:
            self.ok += 1
            if self.ok_body is None:
                self.ok_body = bytes(body)

    def fail(self, why: str) -> None:
        self.failed = why
        if self.transport is not None:
            self.transport.close()
        if not self.idle.done():
            self.idle.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.idle.done():
            self.failed = self.failed or f"connection lost: {exc}"
            self.idle.set_result(None)


def request_frame(spec: Any, version: int, request: Any) -> bytes:
    """One complete request frame (size prefix included) with correlation id 0."""
    from slipstream.protocol import api as proto_api

    out = bytearray()
    proto_api.encode_request_header(
        out, proto_api.RequestHeader(spec.key, version, 0, "rate-bench"), spec.request_header_version(version)
    )
    body = spec.encode_request(request, version).getvalue()
    return _CORR.pack(len(out) + len(body)) + bytes(out) + body


async def rate_main(
    port: int, topic: str, duration: float, connections: int, depth: int, broker_pid: int
) -> dict:
    """Join one group as one member, then pipeline OffsetCommit, then Heartbeat requests.

    The member joins with Slipstream's client; the load itself is one pre-encoded frame per
    request kind, sent over raw connections (see ``_Pipelined``) so that the generator's own
    cost per request stays far below the broker's.
    """
    from slipstream.client.connection import BrokerConnection
    from slipstream.protocol.apis import heartbeat as hb
    from slipstream.protocol.apis import offset_commit as oc

    group = f"rate-{os.getpid()}"
    conn = await BrokerConnection(HOST, port, request_timeout_s=30).connect()
    member, generation, reply = await join_member(conn, group, topic, 30)
    await sync_member(conn, group, topic, member, generation, reply, 30)
    commit = oc.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        topics=[
            oc.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    oc.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=42, committed_metadata=""
                    )
                ],
            )
        ],
    )
    beat = hb.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)
    out: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    # OffsetCommit v10+ names topics by id; this request names them (v9, as our client).
    for kind, spec, request, max_version in (
        ("commit", oc.SPEC, commit, NAMED_TOPICS_OFFSET_COMMIT_MAX_VERSION),
        ("heartbeat", hb.SPEC, beat, None),
    ):
        version = conn.version_for(spec, max_version)
        frame = request_frame(spec, version, request)
        pipes: list[_Pipelined] = []
        for _ in range(connections):
            _t, pipe = await loop.create_connection(
                functools.partial(_Pipelined, frame, depth, spec, version, None), HOST, port
            )
            pipes.append(pipe)
        cpu0 = time.process_time()
        bcpu0 = cpu_of(broker_pid)
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.start()
        await asyncio.sleep(duration)
        for pipe in pipes:
            pipe.stop()
        await asyncio.wait_for(asyncio.gather(*(pipe.idle for pipe in pipes)), 30)
        elapsed = time.perf_counter() - t0
        errors: dict[str, int] = {}
        for pipe in pipes:
            for code, n in pipe.errors.items():
                errors[code] = errors.get(code, 0) + n
            if pipe.failed:
                errors[pipe.failed] = errors.get(pipe.failed, 0) + 1
            if pipe.transport is not None:
                pipe.transport.close()
        out[kind] = {
            "ok": sum(pipe.ok for pipe in pipes),
            "seconds": elapsed,
            "errors": errors,
            "version": version,
            "client_cpu": time.process_time() - cpu0,
            "broker_cpu": cpu_of(broker_pid) - bcpu0,
        }
    await conn.close()
    return out


async def capacity_main(
    port: int, topic: str, first: int, last: int, interval: float, duration: float,
    join_timeout: float,
) -> dict:
    """Groups first..last-1, five members each, one connection per member; heartbeat."""
    from slipstream.protocol.apis import heartbeat as hb

    keys = [(g, m) for g in range(first, last) for m in range(MEMBERS_PER_GROUP)]
    conns, connect_errors, connect_s = await connect_members(port, keys)

    members: dict[tuple[int, int], tuple[str, int]] = {}
    join_errors: list[str] = []

    async def join(key: tuple[int, int]) -> None:
        g, _m = key
        conn = conns.get(key)
        if conn is None:
            return
        group = f"cap-{g}"
        try:
            member, gen, reply = await join_member(conn, group, topic, join_timeout)
            await sync_member(conn, group, topic, member, gen, reply, join_timeout)
            members[key] = (member, gen)
        except Exception as exc:
            join_errors.append(f"{type(exc).__name__}: {exc}")

    t1 = time.perf_counter()
    # Group by group: all five members of a group join together; groups start staggered.
    tasks = []
    for g in range(first, last):
        for m in range(MEMBERS_PER_GROUP):
            tasks.append(asyncio.ensure_future(join((g, m))))
        if g % 50 == 49:
            await asyncio.sleep(0.05)
    await asyncio.wait_for(asyncio.gather(*tasks), join_timeout + 30)
    join_s = time.perf_counter() - t1

    # The load generator's own event-loop lag bounds how exact its latencies are.
    gc.collect()
    gc.freeze()
    lags: list[float] = []

    async def lag_monitor() -> None:
        while time.perf_counter() < end:
            s = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - s - 0.01)

    latencies: list[float] = []
    expired: dict[str, int] = {}
    other_errors: dict[str, int] = {}
    sent = [0]
    measure_from = time.perf_counter()
    end = measure_from + duration

    async def beat(key: tuple[int, int]) -> None:
        member, gen = members[key]
        conn = conns[key]
        group = f"cap-{key[0]}"
        nxt = time.perf_counter() + random.uniform(0, interval)
        while True:
            delay = nxt - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if time.perf_counter() >= end:
                return
            s = time.perf_counter()
            try:
                r = await conn.request(
                    hb.SPEC,
                    hb.HeartbeatRequest(group_id=group, generation_id=gen, member_id=member),
                    timeout_s=30,
                )
            except Exception as exc:
                other_errors[type(exc).__name__] = other_errors.get(type(exc).__name__, 0) + 1
                return
            latencies.append(time.perf_counter() - s)
            sent[0] += 1
            if r.error_code in (UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, 22):
                expired[str(r.error_code)] = expired.get(str(r.error_code), 0) + 1
                return  # this member has lost its place; do not rejoin
            if r.error_code:
                other_errors[str(r.error_code)] = other_errors.get(str(r.error_code), 0) + 1
            nxt += interval

    await asyncio.gather(lag_monitor(), *(beat(k) for k in members))
    for c in conns.values():
        c.abort("done")
    return {
        "members": len(keys),
        "joined": len(members),
        "connect_s": connect_s,
        "connect_errors": len(connect_errors),
        "first_connect_error": connect_errors[0] if connect_errors else None,
        "join_s": join_s,
        "join_errors": len(join_errors),
        "first_join_error": join_errors[0] if join_errors else None,
        "heartbeats": sent[0],
        "expired": expired,
        "other_errors": other_errors,
        "latencies": [round(x, 6) for x in latencies],
        "lag_p99": pct(lags, 0.99),
        "lag_max": max(lags) if lags else None,
    }


class _Skipped(Exception):
    """A section left out with --sections."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Consumer-group coordinator benchmark (Markdown).")
    p.add_argument("--quick", action="store_true", help="smoke run (200 groups for 15 s, ...)")
    p.add_argument("--brokers", default="slipstream,tansu,noida-db")
    p.add_argument("--groups", type=int, help="capacity groups (default 2000; quick 200)")
    p.add_argument("--duration", type=float, help="capacity seconds (default 60; quick 15)")
    p.add_argument("--herd-runs", type=int, help="(2): Slipstream runs per herd size (default 5; quick 1)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument(
        "--sections", default="1,2,3,4",
        help="comma-separated sections to run (default 1,2,3,4); (2) needs (1) to pass",
    )
    p.add_argument("--child", choices=["rate", "capacity"], help=argparse.SUPPRESS)
    p.add_argument("--child-args", help=argparse.SUPPRESS)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        a = json.loads(args.child_args)
        coro = rate_main(**a) if args.child == "rate" else capacity_main(**a)
        print(json.dumps(asyncio.run(coro)))
        return 0

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    quick = args.quick
    groups = args.groups or (200 if quick else 2000)
    duration = args.duration or (15.0 if quick else 60.0)
    fr_runs = 3 if quick else 7
    herd_runs = args.herd_runs or (1 if quick else 5)
    rate_s = 3.0 if quick else 5.0
    workdir = Path(tempfile.mkdtemp(prefix="slipstream-groups-bench-"))
    began = time.perf_counter()
    specs, missing = discover_brokers([b.strip() for b in args.brokers.split(",") if b.strip()])
    first: dict[str, FirstRecord] = {}
    herds: dict[str, dict[int, list[Herd]]] = {}
    rates: dict[str, Any] = {}
    cap: dict[str, Any] = {}
    errors: list[str] = []
    sections = {int(x) for x in args.sections.split(",") if x.strip()}
    try:
        for spec in specs:
            if 1 in sections:
                log(f"{spec.label}: (1) first record x{fr_runs}")
                try:
                    with spec_broker(spec, workdir, spec.key + "-1") as b:
                        first[spec.key] = measure_first_record(b.bootstrap, fr_runs, 30)
                except BenchError as exc:
                    first[spec.key] = FirstRecord(error=str(exc).splitlines()[0])
                if first[spec.key].error:
                    log(f"{spec.label}: (1) failed: {first[spec.key].error}")
                    continue
            if 2 in sections:
                log(f"{spec.label}: (2) 10 and 50 consumers")
                herds[spec.key] = {}
            # Peers get one run each (Tansu takes ~25 s per herd); Slipstream's target is
            # "one generation", so it is checked over several runs, each on a fresh broker.
            runs = herd_runs if spec.key == "slipstream" else 1
            for n in (10, 50) if 2 in sections else ():
                for run in range(runs):
                    try:
                        with spec_broker(spec, workdir, f"{spec.key}-2-{n}-{run}") as b:
                            create_topics(b.bootstrap, {"herd": 60}, 30)
                            herd = measure_herd(b.bootstrap, "herd", n, 60, 3.0)
                    except BenchError as exc:
                        herd = Herd(consumers=n, error=str(exc).splitlines()[0])
                    herds[spec.key].setdefault(n, []).append(herd)
                    log(f"{spec.label}: (2) run {run + 1}/{runs}: {herd}")
            if spec.key != "slipstream":
                continue
            if 3 in sections:
                log("Slipstream: (3) OffsetCommit / Heartbeat rate")
            try:
                if 3 not in sections:
                    raise _Skipped
                with spec_broker(spec, workdir, "slipstream-3") as b:
                    create_topics(b.bootstrap, {"commits": 1}, 30)
                    cpu0 = cpu_of(b.pid)
                    child = run_child(
                        SCRIPT, ["--child", "rate", "--child-args", json.dumps(
                            {"port": b.port, "topic": "commits", "duration": rate_s,
                             "connections": 4, "depth": 32, "broker_pid": b.pid})],
                        workdir,
                    )
                    rates = collect(child, 2 * rate_s + 60)
                    rates["broker_cpu"] = cpu_of(b.pid) - cpu0
            except _Skipped:
                pass
            except BenchError as exc:
                errors.append(f"(3) {exc}")
            if 4 in sections:
                log(f"Slipstream: (4) capacity, {groups} groups x 5 for {duration:.0f} s")
            try:
                if 4 not in sections:
                    raise _Skipped
                with spec_broker(spec, workdir, "slipstream-4") as b:
                    create_topics(b.bootstrap, {"cap": 5}, 30)
                    sampler = RssSampler(b.pid, 0.2)
                    join_timeout = 120.0 if not quick else 60.0
                    halves = [(0, groups // 2), (groups // 2, groups)]
                    cpu0 = cpu_of(b.pid)
                    t0 = time.perf_counter()
                    kids = []
                    for lo, hi in halves:
                        kid = run_child(
                            SCRIPT, ["--child", "capacity", "--child-args", json.dumps(
                                {"port": b.port, "topic": "cap", "first": lo, "last": hi,
                                 "interval": 3.0, "duration": duration,
                                 "join_timeout": join_timeout})],
                            workdir,
                        )
                        kids.append(kid)
                    parts = [collect(k, join_timeout + duration + 120) for k in kids]
                    wall = time.perf_counter() - t0
                    cap = {
                        "members": sum(x["members"] for x in parts),
                        "joined": sum(x["joined"] for x in parts),
                        "join_s": max(x["join_s"] for x in parts),
                        "connect_s": max(x["connect_s"] for x in parts),
                        "join_errors": sum(x["join_errors"] for x in parts),
                        "connect_errors": sum(x["connect_errors"] for x in parts),
                        "first_error": next(
                            (x["first_join_error"] or x["first_connect_error"] for x in parts
                             if x["first_join_error"] or x["first_connect_error"]), None),
                        "heartbeats": sum(x["heartbeats"] for x in parts),
                        "expired": sum(sum(x["expired"].values()) for x in parts),
                        "expired_codes": [x["expired"] for x in parts],
                        "other_errors": [x["other_errors"] for x in parts],
                        "latencies": [v for x in parts for v in x["latencies"]],
                        "lag_p99": max(x["lag_p99"] or 0 for x in parts),
                        "lag_max": max(x["lag_max"] or 0 for x in parts),
                        "rss_end": sampler.current(),
                        "broker_cpu": cpu_of(b.pid) - cpu0,
                        "wall": wall,
                    }
                    cap["rss_peak"] = sampler.stop()
            except _Skipped:
                pass
            except BenchError as exc:
                errors.append(f"(4) {exc}")
        print(report(specs, missing, first, herds, rates, cap, groups, duration, rate_s, errors,
                     time.perf_counter() - began))
        return 1 if errors else 0
    finally:
        kill_children()
        stop_all()
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


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
        row(f"(3) OffsetCommit v{c.get('version', '?')}/s, one member, 4 connections x 32 in flight,"
            f" {rate_s:.0f} s",
            [f"{cr:,.0f}/s (errors {c['errors'] or 0}; CPU broker {c['broker_cpu']:.1f} s,"
             f" load-gen {c['client_cpu']:.1f} s in {c['seconds']:.1f} s)",
             *others], "≥ 20,000/s" + mark(cr >= 20_000))
        row(f"(3) Heartbeat v{h.get('version', '?')}/s, same member and connections",
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
        " (3) joins with that client, then sends one pre-encoded request per kind (the same"
        " group, member, partition and offset each time; only the correlation id changes) over"
        " raw pipelined connections, checking each response's correlation id (in order) and"
        " error codes; a response with an error is not counted."
        " (4) runs in two processes, one TCP connection per member, session timeout 30 s;"
        " expired = heartbeat answered UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS or"
        " ILLEGAL_GENERATION after the member was stable."
    )
    if errors:
        out.append("")
        out.append("Failures:")
        out.extend(f"- {e}" for e in errors)
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
