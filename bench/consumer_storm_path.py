#!/usr/bin/env python3
"""The broker's CPU per ConsumerGroupHeartbeat during a join storm, by kind (in-process).

    python bench/consumer_storm_path.py                 # 1,000 groups x 5 members
    python bench/consumer_storm_path.py --profile 25    # and the top 25 functions (cProfile)

An embedded broker (disk storage in a temporary directory, as `slipstream serve`) is
driven through its dispatcher with encoded ConsumerGroupHeartbeat v1 frames, as the
capacity load generator of bench/consumer_protocol.py (3) sends them: groups of five
members join, then every member heartbeats (sending its assignment back once, the
acknowledgement) until each has been given a settled interval. ``--wave`` groups join
per round, so the heartbeats of many changing groups are handled between one another
as in a storm. Each request is timed with ``time.process_time`` (CPU, so other work on
the machine skews it less) and counted by kind: join (epoch 0), acknowledgement (carries
its owned partitions), reconciling (any other before the member settled) and settled.
No sockets, no waiting: this is what the broker spends, not how long an answer takes.
Afterwards: the objects the garbage collector tracks per member (what the storm left in
the broker, measured after a full pass; the driver's own member records subtracted) and
how long a full pass over them takes (best of three): the broker stalls that long
whenever the collector runs one.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from request_path import PEER, frame_of, joined

from slipstream import Broker
from slipstream.broker.dispatch import Dispatcher
from slipstream.protocol.apis import consumer_group_heartbeat as cgh

TOPIC = "storm-path"
PARTITIONS = 10
MEMBERS_PER_GROUP = 5
SETTLED_ABOVE_MS = 400  # the stretched reconciling interval at most (consumer_load.py)
KINDS = ("join", "ack", "reconciling", "settled")


@dataclass
class Member:
    group_id: str
    member_id: str
    epoch: int = 0
    pending: Any = None  # the assignment of the last answer that carried one
    settled: bool = False
    joined: bool = False


def request_of(member: Member) -> tuple[str, cgh.ConsumerGroupHeartbeatRequest]:
    if not member.joined:
        return "join", cgh.ConsumerGroupHeartbeatRequest(
            group_id=member.group_id, member_id=member.member_id, member_epoch=0,
            rebalance_timeout_ms=60_000, subscribed_topic_names=[TOPIC], topic_partitions=[],
        )
    owned = None if member.pending is None else [
        cgh.ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=t.topic_id, partitions=list(t.partitions))
        for t in member.pending
    ]
    kind = "ack" if owned is not None else ("settled" if member.settled else "reconciling")
    return kind, cgh.ConsumerGroupHeartbeatRequest(
        group_id=member.group_id, member_id=member.member_id, member_epoch=member.epoch, topic_partitions=owned
    )


async def storm(dispatcher: Dispatcher, groups: int, wave: int, settled_rounds: int) -> dict[str, list[float]]:
    cpu: dict[str, list[float]] = {k: [] for k in KINDS}
    members = [Member(f"storm-{g}", str(uuid.uuid4())) for g in range(groups) for _ in range(MEMBERS_PER_GROUP)]
    active: list[Member] = []
    rounds_after = 0
    correlation = 0
    while members or rounds_after < settled_rounds:
        if members:
            active += members[: wave * MEMBERS_PER_GROUP]
            del members[: wave * MEMBERS_PER_GROUP]
        elif all(m.settled for m in active):
            rounds_after += 1
        for member in active:
            if member.settled and rounds_after == 0 and members:
                continue  # settled members beat rarely (5 s) while others change every 200 ms
            kind, request = request_of(member)
            correlation += 1
            frame = bytearray(frame_of(cgh.SPEC, 1, request, correlation))
            start = time.process_time()
            parts = await dispatcher.dispatch(frame, PEER)
            cpu[kind].append(time.process_time() - start)
            assert parts is not None
            reply: Any = cgh.SPEC.decode_response(memoryview(joined(parts)), 4 + 4 + 1, 1)
            assert reply.error_code == 0, (reply.error_code, reply.error_message)
            member.joined = True
            member.epoch = reply.member_epoch
            member.pending = None if reply.assignment is None else reply.assignment.topic_partitions
            member.settled = reply.heartbeat_interval_ms > SETTLED_ABOVE_MS
    return cpu


async def run(groups: int, wave: int, settled_rounds: int, profile: int) -> tuple[dict[str, list[float]], int, str]:
    with tempfile.TemporaryDirectory(prefix="storm-path-") as data_dir:
        async with Broker(storage="disk", data_dir=data_dir, port=0) as broker:
            state, adapter = broker.state, broker.groups
            assert state is not None and adapter is not None and broker.transactions is not None
            await adapter.loaded()
            dispatcher = Dispatcher(state, adapter, broker.transactions)
            state.topics.create(TOPIC, PARTITIONS, {})
            profiler = cProfile.Profile() if profile else None
            if profiler is not None:
                profiler.enable()
            gc.collect()
            tracked = len(gc.get_objects())
            young = gc.get_stats()[0]["collections"]
            cpu = await storm(dispatcher, groups, wave, settled_rounds)
            heartbeats = sum(len(v) for v in cpu.values())
            cpu["young passes per 1000"] = [(gc.get_stats()[0]["collections"] - young) * 1000 / heartbeats]
            gc.collect()
            members = groups * MEMBERS_PER_GROUP
            # Each driver member is one tracked object (its assignment is None once settled).
            cpu["tracked per member"] = [(len(gc.get_objects()) - tracked - members) / members]
            passes = []
            for _ in range(3):
                start = time.perf_counter()
                gc.collect()
                passes.append(time.perf_counter() - start)
            cpu["full pass"] = [min(passes)]
            text = ""
            if profiler is not None:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(profile)
                text = out.getvalue()
            return cpu, adapter.appends, text


def report(cpu: dict[str, list[float]], appends: int, args: argparse.Namespace) -> str:
    lines = [
        f"Command: `{' '.join(['python', *sys.argv])}`",
        "",
        f"{args.groups:,} groups x {MEMBERS_PER_GROUP} members, {args.wave} groups joining per round;"
        f" {appends:,} appends to __consumer_offsets.",
        "",
        "| heartbeat kind | count | CPU µs, mean | p50 | p99 | CPU total, s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines[2] += (f" Afterwards the collector tracks {cpu['tracked per member'][0]:.1f} objects per member;"
                 f" a full pass takes {cpu['full pass'][0] * 1000:.0f} ms. Young passes (threshold"
                 f" {gc.get_threshold()[0]}) per 1,000 heartbeats: {cpu['young passes per 1000'][0]:.1f}.")
    everything = [x for k in KINDS for x in cpu[k]]
    for name, xs in [*((k, cpu[k]) for k in KINDS), ("all", everything)]:
        if not xs:
            continue
        ordered = sorted(xs)
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        lines.append(
            f"| {name} | {len(xs):,} | {sum(xs) / len(xs) * 1e6:.0f} | {p50 * 1e6:.0f} | {p99 * 1e6:.0f}"
            f" | {sum(xs):.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000, help="groups (default 1000)")
    parser.add_argument("--wave", type=int, default=20, help="groups joining per round (default 20)")
    parser.add_argument("--settled-rounds", type=int, default=2, help="rounds once all settled (default 2)")
    parser.add_argument("--profile", type=int, default=0, help="print this many top functions (cProfile)")
    args = parser.parse_args()
    cpu, appends, text = asyncio.run(run(args.groups, args.wave, args.settled_rounds, args.profile))
    print(report(cpu, appends, args))
    if text:
        print("\n```\n" + text + "```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
