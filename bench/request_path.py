#!/usr/bin/env python3
"""Where one request's broker CPU goes, stage by stage (in-process, no sockets).

    python bench/request_path.py            # Heartbeat, Produce and Fetch, a few seconds
    python bench/request_path.py --quick    # fewer iterations

Produce and Fetch come in two shapes: 8 partitions of small batches, and the one
partition of a few thousand 100 B records per batch that librdkafka sends in
broker_throughput.py's 100 B x 1 partition rows.

An embedded broker (disk storage in a temporary directory, as `slipstream serve`) is driven through its own layers with pre-encoded
request frames; each stage is timed over many iterations with ``time.process_time``
(CPU, not wall time, so other work on the machine skews it less; best of ``--repeat``):

* decode: request header + body (``ApiSpec.decode_request``);
* coordinator / append / read: the layer below the handler alone (Heartbeat: the pure
  coordinator's ``heartbeat``; Produce: ``appends.append`` per partition; Fetch:
  the handler with the log read in it);
* handler: ``handler.handle`` (for Heartbeat: the adapter's lock, the coordinator, carrying
  out its result);
* encode: the response frame (``dispatch._frame``);
* dispatch: ``Dispatcher.dispatch``, all of the above plus the request context and metrics;
* connection: ``KafkaConnection`` fed the frame with a stand-in transport (into the
  buffers it offers, as a socket transport does), through the task, the write-ready
  callback and ``writelines`` (the event-loop hops included).

The figures are microseconds per request; the difference between two rows is what the
layer between them costs. Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from harness import produce_request, sessionless_fetch

from slipstream import Broker
from slipstream.broker.appends import append as append_records
from slipstream.broker.dispatch import Buffers, Dispatcher, _frame
from slipstream.broker.handlers import load_handler
from slipstream.broker.request_context import RequestContext
from slipstream.broker.server import KafkaConnection
from slipstream.protocol import api
from slipstream.protocol.apis import consumer_group_heartbeat as cgh
from slipstream.protocol.apis import fetch as fe
from slipstream.protocol.apis import heartbeat as hb
from slipstream.protocol.apis import join_group as jg
from slipstream.protocol.apis import produce as pr
from slipstream.protocol.apis import sync_group as sg
from slipstream.protocol.records import ProducerRecord, build_batch

PEER = "127.0.0.1:40000"
TOPIC = "path-bench"
PARTITIONS = 8
BIG_TOPIC = "path-bench-one"
BIG_BATCH_RECORDS = 4000
SMALL_TOPIC = "path-bench-small"
SMALL_BATCH_RECORDS = 350  # librdkafka's batch per Produce in the 100 B x 8 partitions rows
_SIZE = struct.Struct(">i")


def joined(parts: Buffers) -> bytes:
    """A response dispatched without a connection: bytes only (no file regions)."""
    return b"".join(cast(list[bytes], parts))


def frame_of(spec: Any, version: int, request: Any, correlation_id: int = 1) -> bytes:
    """A request frame without its size prefix (what the dispatcher is handed)."""
    out = bytearray()
    header = api.RequestHeader(spec.key, version, correlation_id, "path-bench")
    api.encode_request_header(out, header, spec.request_header_version(version))
    return bytes(out) + spec.encode_request(request, version).getvalue()


class StandInTransport:
    """Enough of asyncio.Transport for KafkaConnection: counts what is written."""

    def __init__(self) -> None:
        self.written = 0
        self.waiter: asyncio.Future[None] | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def writelines(self, parts: list[Any]) -> None:
        self.written += 1
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def write(self, data: Any) -> None:
        self.writelines([data])

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def cpu_us(n: int, repeat: int, run: Callable[[int], None]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run(n)
        best = min(best, time.process_time() - start)
    return best / n * 1e6


async def cpu_us_async(n: int, repeat: int, run: Callable[[int], Awaitable[None]]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        await run(n)
        best = min(best, time.process_time() - start)
    return best / n * 1e6


async def join(dispatcher: Dispatcher, group: str) -> tuple[str, int]:
    member = ""
    for _ in range(3):
        request = jg.JoinGroupRequest(
            group_id=group,
            session_timeout_ms=30_000,
            rebalance_timeout_ms=30_000,
            member_id=member,
            protocol_type="consumer",
            protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        parts = await dispatcher.dispatch(bytearray(frame_of(jg.SPEC, 7, request)), PEER)
        assert parts is not None
        raw = memoryview(joined(parts))
        reply: Any = jg.SPEC.decode_response(raw, 4 + 4 + 1, 7)  # size, correlation id, tags
        if reply.error_code == 79:  # MEMBER_ID_REQUIRED
            member = reply.member_id
            continue
        assert reply.error_code == 0, reply.error_code
        sync = sg.SyncGroupRequest(
            group_id=group,
            generation_id=reply.generation_id,
            member_id=reply.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[sg.SyncGroupRequestAssignment(member_id=reply.member_id, assignment=b"")],
        )
        await dispatcher.dispatch(bytearray(frame_of(sg.SPEC, 5, sync)), PEER)
        return reply.member_id, reply.generation_id
    raise RuntimeError("JoinGroup kept asking for a member id")


async def join_consumer_group(dispatcher: Dispatcher, group: str) -> tuple[str, int]:
    """A KIP-848 member (v1: its own member id) heartbeating until it holds its partitions."""
    member = "path-bench-cgh-member"
    epoch = 0
    request = cgh.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[TOPIC],
        topic_partitions=[],
    )
    for _ in range(20):
        parts = await dispatcher.dispatch(bytearray(frame_of(cgh.SPEC, 1, request)), PEER)
        assert parts is not None
        reply: Any = cgh.SPEC.decode_response(memoryview(joined(parts)), 4 + 4 + 1, 1)
        assert reply.error_code == 0, reply.error_code
        epoch = reply.member_epoch
        if reply.assignment is not None:
            owned = [
                cgh.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
                for t in reply.assignment.topic_partitions
            ]
            if sum(len(t.partitions) for t in owned) == PARTITIONS:
                # Acknowledge the assignment once, as a client does, then it is settled.
                ack = cgh.ConsumerGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=epoch, topic_partitions=owned
                )
                await dispatcher.dispatch(bytearray(frame_of(cgh.SPEC, 1, ack)), PEER)
                return member, epoch
        request = cgh.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch)
    raise RuntimeError("the consumer-protocol member never got its partitions")


def receive(conn: KafkaConnection, wire: bytes) -> None:
    """Hand ``wire`` to the connection as a socket transport does: into the buffer it
    offers (the scratch buffer, or a large frame's own), as many reads as that takes."""
    view = memoryview(wire)
    while view:
        buffer = conn.get_buffer(-1)
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]


class Stages:
    def __init__(self, dispatcher: Dispatcher, key: int, version: int, frame: bytes) -> None:
        self.dispatcher = dispatcher
        self.handler = load_handler(key)
        self.spec = self.handler.SPEC
        self.version = version
        self.frame = frame
        view = memoryview(frame)
        k, v, corr = api.decode_request_header_prefix(view)
        self.header, self.pos = api.decode_request_header_rest(
            view, self.spec.request_header_version(v), k, v, corr
        )

    def decode(self) -> Any:
        view = memoryview(bytearray(self.frame))
        k, v, corr = api.decode_request_header_prefix(view)
        _, pos = api.decode_request_header_rest(
            view, self.spec.request_header_version(v), k, v, corr
        )
        return self.spec.decode_request(view, pos, v)

    def context(self) -> RequestContext:
        d = self.dispatcher
        return RequestContext(
            d.state, d.groups, self.header, self.version, PEER, d.transactions, None
        )

    async def measure(
        self, n: int, repeat: int, below: tuple[str, Callable[[Any], Any]] | None
    ) -> dict[str, float]:
        rows: dict[str, float] = {}

        def decode_n(k: int) -> None:
            for _ in range(k):
                self.decode()

        rows["decode"] = cpu_us(n, repeat, decode_n)
        if below is not None:
            name, call = below

            async def below_n(k: int) -> None:
                for _ in range(k):
                    result = call(self.decode())
                    if asyncio.iscoroutine(result):
                        await result

            rows[name] = await cpu_us_async(n, repeat, below_n) - rows["decode"]

        async def handler_n(k: int) -> None:
            for _ in range(k):
                await self.handler.handle(self.context(), self.decode())

        rows["handler"] = await cpu_us_async(n, repeat, handler_n) - rows["decode"]
        request = self.decode()
        response = await self.handler.handle(self.context(), request)

        def encode_n(k: int) -> None:
            for _ in range(k):
                _frame(self.spec, self.version, 1, response)

        rows["encode"] = cpu_us(n, repeat, encode_n)

        async def dispatch_n(k: int) -> None:
            for _ in range(k):
                await self.dispatcher.dispatch(bytearray(self.frame), PEER)

        rows["dispatch (all of the above)"] = await cpu_us_async(n, repeat, dispatch_n)

        wire = _SIZE.pack(len(self.frame)) + self.frame
        transport = StandInTransport()
        conn = KafkaConnection(self.dispatcher, 100 * 1024 * 1024, set())
        conn.connection_made(transport)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()

        async def connection_n(k: int) -> None:
            for _ in range(k):
                transport.waiter = loop.create_future()
                receive(conn, wire)
                await transport.waiter

        rows["connection (dispatch + loop hops + write)"] = await cpu_us_async(
            n, repeat, connection_n
        )
        conn.connection_lost(None)
        return rows


async def run(n: int, repeat: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="request-path-") as data_dir:
        return await run_in(n, repeat, data_dir)


async def run_in(n: int, repeat: int, data_dir: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    async with Broker(storage="disk", data_dir=data_dir, port=0) as broker:
        state, groups = broker.state, broker.groups
        assert state is not None and groups is not None and broker.transactions is not None
        dispatcher = Dispatcher(state, groups, broker.transactions)
        state.topics.create(TOPIC, PARTITIONS, {})

        member, generation = await join(dispatcher, "path-bench-group")
        beat = hb.HeartbeatRequest(
            group_id="path-bench-group", generation_id=generation, member_id=member
        )
        stages = Stages(dispatcher, hb.SPEC.key, 4, frame_of(hb.SPEC, 4, beat))
        coordinator = groups.coordinator
        ctx = stages.context().coordinator_context()
        out["Heartbeat v4"] = await stages.measure(
            n, repeat, ("coordinator", lambda req: coordinator.heartbeat(ctx, req, state.clock()))
        )

        # ConsumerGroupHeartbeat: a settled member's beat (id and epoch only, as clients send).
        member, epoch = await join_consumer_group(dispatcher, "path-bench-consumer-group")
        beat_848 = cgh.ConsumerGroupHeartbeatRequest(
            group_id="path-bench-consumer-group", member_id=member, member_epoch=epoch
        )
        stages = Stages(dispatcher, cgh.SPEC.key, 1, frame_of(cgh.SPEC, 1, beat_848))
        out["ConsumerGroupHeartbeat v1"] = await stages.measure(
            n,
            repeat,
            (
                "coordinator",
                lambda req: coordinator.consumer_group_heartbeat(ctx, req, state.clock()),
            ),
        )

        # Produce: 8 partitions, one batch of 20 x 100 B records each (acks=1, no producer id).
        batch = build_batch([ProducerRecord(None, os.urandom(100)) for _ in range(20)])
        produce = produce_request(TOPIC, PARTITIONS, batch, acks=1)
        stages = Stages(dispatcher, pr.SPEC.key, 9, frame_of(pr.SPEC, 9, produce))

        async def append_all(req: Any) -> None:
            for part in req.topic_data[0].partition_data:
                await append_records(state, TOPIC, part.index, part.records, acks=1)

        out["Produce v9, 8 partitions x 20 x 100 B"] = await stages.measure(
            n // 4, repeat, ("append x 8", append_all)
        )

        # Fetch: 8 partitions from offset 0 (what the produce stage wrote), sessionless.
        fetch = sessionless_fetch(TOPIC, PARTITIONS, 64 * 1024)
        stages = Stages(dispatcher, fe.SPEC.key, 12, frame_of(fe.SPEC, 12, fetch))
        out["Fetch v12, 8 partitions x 64 KiB"] = await stages.measure(n // 4, repeat, None)

        # The broker_throughput rows of 100 B x 1 partition: librdkafka (linger.ms=5,
        # acks=all) sends one batch of a few thousand records per Produce, and its Fetch
        # asks for max.partition.fetch.bytes=1 MiB of the one partition.
        async def one_partition_produce(topic: str, records: int, count: int) -> dict[str, float]:
            """A Produce (acks=all) of one batch of ``records`` x 100 B to one partition."""
            state.topics.create(topic, 1, {})
            batch = build_batch([ProducerRecord(None, os.urandom(100)) for _ in range(records)])
            request = produce_request(topic, 1, batch, acks=-1)

            async def append(req: Any) -> None:
                await append_records(state, topic, 0, req.topic_data[0].partition_data[0].records, acks=-1)

            stages = Stages(dispatcher, pr.SPEC.key, 9, frame_of(pr.SPEC, 9, request))
            return await stages.measure(count, repeat, ("append", append))

        # The broker_throughput rows of 100 B x 1 partition: librdkafka (linger.ms=5,
        # acks=all) sends one batch of a few thousand records per Produce (each appends
        # about 440 KB to the data file), and its Fetch asks for
        # max.partition.fetch.bytes=1 MiB of the one partition.
        out[f"Produce v9, 1 partition x {BIG_BATCH_RECORDS:,} x 100 B"] = await one_partition_produce(
            BIG_TOPIC, BIG_BATCH_RECORDS, max(n // 500, 5)
        )
        # The 100 B x 8 partitions rows: librdkafka sends one partition per Produce there,
        # a batch of about 350 records (40 KB), so this request's cost is per partition.
        out[f"Produce v9, 1 partition x {SMALL_BATCH_RECORDS} x 100 B"] = await one_partition_produce(
            SMALL_TOPIC, SMALL_BATCH_RECORDS, n // 20
        )
        fetch_big = sessionless_fetch(BIG_TOPIC, 1, 1 << 20)
        stages = Stages(dispatcher, fe.SPEC.key, 12, frame_of(fe.SPEC, 12, fetch_big))
        out["Fetch v12, 1 partition x 1 MiB"] = await stages.measure(n // 20, repeat, None)
    return out


def report(results: dict[str, dict[str, float]], n: int, repeat: int) -> str:
    lines = [
        f"Command: `{' '.join(['python', *sys.argv])}`",
        "",
        f"CPU microseconds per request (best of {repeat} runs of {n} Heartbeats, {n // 4} of the"
        f" 8-partition requests, {max(n // 500, 5)} 1-partition Produces of {BIG_BATCH_RECORDS:,} records,"
        f" {n // 20} of {SMALL_BATCH_RECORDS}, {n // 20} 1-partition Fetches; a stage's figure excludes decoding where it takes a decoded request):",
        "",
    ]
    stages = list(dict.fromkeys(s for rows in results.values() for s in rows))
    lines.append("| Stage | " + " | ".join(results) + " |")
    lines.append("|---|" + "---:|" * len(results))
    for stage in stages:
        cells = [f"{rows[stage]:.1f}" if stage in rows else "-" for rows in results.values()]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("-n", type=int, help="Heartbeats per run (default 20000; quick 2000)")
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs per stage, best kept (default 5)"
    )
    args = parser.parse_args()
    n = args.n or (2000 if args.quick else 20_000)
    try:  # the loop `slipstream serve` runs on, when installed
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    results = asyncio.run(run(n, args.repeat))
    print(report(results, n, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
