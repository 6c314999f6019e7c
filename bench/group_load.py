#!/usr/bin/env python3
"""The classic group protocol's load generators of group_coordinator.py, run as children
(``python bench/group_load.py MODE JSON``, see ``harness.load_generator_main``):

* ``rate``: one member per connection joins a group, then each member's OffsetCommit and
  then Heartbeat requests are pipelined over its own raw connection (one pre-encoded frame
  per member and kind);
* ``capacity``: groups of five members, one connection each, JoinGroup/SyncGroup, then a
  Heartbeat every ``interval`` seconds; counts expired members and heartbeat latency.

consumer_protocol.py runs ``capacity`` too, as its classic comparison, and sums the
outputs of its load generators with ``combine_capacity`` as group_coordinator.py does.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import random
import struct
import sys
import time
from typing import Any

from harness import HOST, BenchError, cpu_of, load_generator_main, pct

SESSION_MS = 30_000
MEMBERS_PER_GROUP = 5
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
NAMED_TOPICS_OFFSET_COMMIT_MAX_VERSION = 9
SCRIPT = os.path.abspath(__file__)  # what the parents run (harness.run_child)


async def connect_members(
    port: int, keys: list[tuple[int, int]]
) -> tuple[dict[tuple[int, int], Any], list[str], float]:
    """One connection per (group, member) key, 200 connecting at a time: the connections,
    the errors of those that failed, and the seconds it took."""
    from slipstream.client.connection import BrokerConnection

    conns: dict[tuple[int, int], Any] = {}
    sem = asyncio.Semaphore(200)

    async def connect(key: tuple[int, int]) -> None:
        async with sem:
            conns[key] = await BrokerConnection(
                HOST, port, max_in_flight=2, request_timeout_s=60, connect_timeout_s=30
            ).connect()

    t0 = time.perf_counter()
    res = await asyncio.gather(*(connect(k) for k in keys), return_exceptions=True)
    return conns, [str(r) for r in res if isinstance(r, Exception)], time.perf_counter() - t0


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
    """Join one group with one member per connection, then pipeline each member's
    OffsetCommit, then Heartbeat requests over its own connection.

    The members join with Slipstream's client; the load itself is one pre-encoded frame per
    member and request kind, sent over raw connections (see ``_Pipelined``) so that the
    generator's own cost per request stays far below the broker's. One member per
    connection, as clients do: the coordinator refuses a member's OffsetCommit from an
    older connection than one it has committed on (coordinator/newest_connections.py).
    """
    from slipstream.protocol.apis import heartbeat as hb
    from slipstream.protocol.apis import offset_commit as oc

    group = f"rate-{os.getpid()}"
    keys = [(0, m) for m in range(connections)]
    conns, connect_errors, _connect_s = await connect_members(port, keys)
    if connect_errors:
        raise BenchError(f"connecting the members failed: {connect_errors[0]}")

    async def join(key: tuple[int, int]) -> tuple[str, int]:
        conn = conns[key]
        member, generation, reply = await join_member(conn, group, topic, 30)
        await sync_member(conn, group, topic, member, generation, reply, 30)
        return member, generation

    # Joined together, the members land in one generation (the group's initial delay).
    joined = await asyncio.gather(*(join(k) for k in keys))
    generations = {generation for _member, generation in joined}
    if len(generations) != 1:
        raise BenchError(f"the members joined in several generations: {sorted(generations)}")

    def commit(index: int, member: str, generation: int) -> Any:
        return oc.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            topics=[
                oc.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        oc.OffsetCommitRequestPartition(
                            partition_index=index, committed_offset=42, committed_metadata=""
                        )
                    ],
                )
            ],
        )

    def beat(_index: int, member: str, generation: int) -> Any:
        return hb.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)

    first = conns[keys[0]]
    out: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    # OffsetCommit v10+ names topics by id; this request names them (v9, as our client).
    for kind, spec, build, max_version in (
        ("commit", oc.SPEC, commit, NAMED_TOPICS_OFFSET_COMMIT_MAX_VERSION),
        ("heartbeat", hb.SPEC, beat, None),
    ):
        version = first.version_for(spec, max_version)
        pipes: list[_Pipelined] = []
        for index, (member, generation) in enumerate(joined):
            frame = request_frame(spec, version, build(index, member, generation))
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
    await asyncio.gather(*(conn.close() for conn in conns.values()))
    return out


def joins_summary(
    members: int, joined: int, connect_s: float, connect_errors: list[str], join_s: float,
    join_errors: list[str],
) -> dict[str, Any]:
    """How a capacity load generator's members connected and joined (either protocol)."""
    return {
        "members": members,
        "joined": joined,
        "connect_s": connect_s,
        "connect_errors": len(connect_errors),
        "first_connect_error": connect_errors[0] if connect_errors else None,
        "join_s": join_s,
        "join_errors": len(join_errors),
        "first_join_error": join_errors[0] if join_errors else None,
    }


def combine_capacity(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """What the capacity reports of either protocol show, over the load generators' outputs."""
    return {
        "members": sum(x["members"] for x in parts),
        "joined": sum(x["joined"] for x in parts),
        "join_s": max(x["join_s"] for x in parts),
        "connect_s": max(x["connect_s"] for x in parts),
        "first_error": next((x["first_join_error"] or x["first_connect_error"] for x in parts
                             if x["first_join_error"] or x["first_connect_error"]), None),
        "heartbeats": sum(x["heartbeats"] for x in parts),
        "latencies": [v for x in parts for v in x["latencies"]],
        "lag_p99": max(x["lag_p99"] or 0 for x in parts),
        "lag_max": max(x["lag_max"] or 0 for x in parts),
    }


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
        **joins_summary(len(keys), len(members), connect_s, connect_errors, join_s, join_errors),
        "heartbeats": sent[0],
        "expired": expired,
        "other_errors": other_errors,
        "latencies": [round(x, 6) for x in latencies],
        "lag_p99": pct(lags, 0.99),
        "lag_max": max(lags) if lags else None,
    }


if __name__ == "__main__":
    sys.exit(load_generator_main({"rate": rate_main, "capacity": capacity_main}))
