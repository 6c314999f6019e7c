#!/usr/bin/env python3
"""The consumer group protocol's (KIP-848) capacity load generator of consumer_protocol.py,
run as a child (``python bench/consumer_load.py capacity JSON``, see
``harness.load_generator_main``): groups of five raw members, one connection each, that
join and heartbeat with ConsumerGroupHeartbeat v1 at the interval the broker gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import random
import sys
import time
import uuid
from typing import Any

from group_load import MEMBERS_PER_GROUP, UNKNOWN_MEMBER_ID, connect_members, joins_summary
from harness import load_generator_main, pct

FENCED_MEMBER_EPOCH = 110
# The interval the broker gives members of a changing group (DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS).
RECONCILING_INTERVAL_MS = 200
# While many members change at once the broker stretches the short interval, up to twice
# (coordinator/consumer_intervals.py MAX_STRETCH): anything longer is a settled interval.
CHANGING_INTERVAL_MAX_MS = 2 * RECONCILING_INTERVAL_MS
SCRIPT = os.path.abspath(__file__)  # what the parent runs (harness.run_child)


async def capacity_main(port: int, topic: str, first: int, last: int, duration: float,
                        join_timeout: float, regular_ms: int, join_spread: float) -> dict:
    """Groups first..last-1, five raw consumer-protocol members each, one connection each."""
    from slipstream.protocol.apis import consumer_group_heartbeat as cgh

    keys = [(g, m) for g in range(first, last) for m in range(MEMBERS_PER_GROUP)]
    conns, connect_errors, connect_s = await connect_members(port, keys)

    joined: dict[tuple[int, int], float] = {}
    join_errors: list[str] = []
    fenced: dict[str, int] = {}
    other_errors: dict[str, int] = {}
    samples: list[tuple[float, float, bool]] = []  # (sent at, latency, carried an ack)
    intervals: dict[int, int] = {}  # interval the broker gave -> responses in the window
    settled: dict[tuple[int, int], float] = {}  # first response with a settled interval
    recon: list[tuple[float, float, int]] = []
    sent = [0]
    all_joined = asyncio.get_running_loop().create_future()
    window: list[float] = [0.0, 0.0]

    def to_request(parts: Any) -> list[Any] | None:
        if parts is None:
            return None
        return [cgh.ConsumerGroupHeartbeatRequestTopicPartitions(
            topic_id=tp.topic_id, partitions=list(tp.partitions)) for tp in parts]

    async def member(key: tuple[int, int], delay: float) -> None:
        conn = conns.get(key)
        if conn is None:
            return
        await asyncio.sleep(delay)
        group = f"c848-{key[0]}"
        member_id = str(uuid.uuid4())
        request = cgh.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
            subscribed_topic_names=[topic], topic_partitions=[],
        )
        epoch, pending = 0, None
        beats, last_assignment = 0, 0.0
        while True:
            s = time.perf_counter()
            if window[1] and s >= window[1]:
                return
            try:
                r = await conn.request(cgh.SPEC, request, version=1, timeout_s=join_timeout)
            except Exception as exc:
                name = type(exc).__name__
                if key in joined:
                    other_errors[name] = other_errors.get(name, 0) + 1
                else:
                    join_errors.append(f"{name}: {exc}")
                return
            got = time.perf_counter()
            sent[0] += 1
            beats += 1
            if window[0] and s >= window[0]:
                samples.append((s, got - s, request.topic_partitions is not None))
                intervals[r.heartbeat_interval_ms] = intervals.get(r.heartbeat_interval_ms, 0) + 1
            code = r.error_code
            if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
                fenced[str(code)] = fenced.get(str(code), 0) + 1
                return  # lost its place: counted, not rejoined
            if code:
                other_errors[str(code)] = other_errors.get(str(code), 0) + 1
                if key not in joined:
                    join_errors.append(f"error {code}: {r.error_message}")
                    return
            else:
                if key not in joined:
                    joined[key] = got
                    if len(joined) == len(conns) and not all_joined.done():
                        all_joined.set_result(got)
                epoch = r.member_epoch
                if r.assignment is not None:
                    pending = r.assignment.topic_partitions
                    last_assignment = got
                # Settled: an interval above those a changing group gets (the broker gives
                # settled members the regular interval, or less while it has few members).
                if r.heartbeat_interval_ms > CHANGING_INTERVAL_MAX_MS and key not in settled:
                    settled[key] = got
                    since = joined[key]
                    # (last assignment change, settled) after the join; heartbeats until then
                    recon.append((last_assignment - since, got - since, beats))
            request = cgh.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch,
                topic_partitions=to_request(pending),
            )
            pending = None
            interval = max(r.heartbeat_interval_ms, 50) / 1000
            delay = s + interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)

    t1 = time.perf_counter()
    # The five members of a group join together; groups join at random moments spread over
    # join_spread seconds (all at once, members of every group would heartbeat in phase).
    rng = random.Random(first)
    tasks = []
    for g in range(first, last):
        at = rng.uniform(0, join_spread)
        for m in range(MEMBERS_PER_GROUP):
            tasks.append(asyncio.ensure_future(member((g, m), at)))
    lags: list[float] = []
    lag_by_second: dict[str, float] = {}
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(all_joined), join_spread + join_timeout)
    join_s = time.perf_counter() - t1
    gc.collect()
    gc.freeze()
    window[0] = time.perf_counter()
    window_wall = time.time()
    window[1] = window[0] + duration

    async def lag_monitor() -> None:
        while time.perf_counter() < window[1]:
            s = time.perf_counter()
            await asyncio.sleep(0.01)
            lag = time.perf_counter() - s - 0.01
            lags.append(lag)
            sec = str(int(s - window[0]))
            lag_by_second[sec] = max(lag_by_second.get(sec, 0.0), lag)

    await lag_monitor()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 70)
    for c in conns.values():
        c.abort("done")
    settle_times = [t - t1 for t in settled.values()]
    all_settled = max(settled.values()) if len(settled) == len(joined) and settled else math.inf
    return {
        **joins_summary(len(keys), len(joined), connect_s, connect_errors, join_s, join_errors),
        "settled": len(settled),
        "recon": [(round(a, 4), round(b, 4), n) for a, b, n in recon],
        "settle_s": max(settle_times) if settle_times else None,
        "heartbeats": sent[0],
        "window_heartbeats": len(samples),
        "fenced": fenced,
        "other_errors": other_errors,
        "intervals": {str(k): v for k, v in intervals.items()},
        "latencies": [round(x, 6) for _s, x, _a in samples],
        "ack_latencies": [round(x, 6) for _s, x, a in samples if a],
        "ack_peer_latencies": ack_peer_latencies(samples, window[0]),
        "settled_latencies": [round(x, 6) for s, x, _a in samples if s >= all_settled],
        # Slow answers (> 50 ms) per second of the window, to see when they happen.
        "slow_by_second": slow_by_second(samples, window[0]),
        "lag_p99": pct(lags, 0.99),
        "lag_max": max(lags) if lags else None,
        "lag_by_second": lag_by_second,
        "window_wall": window_wall,
    }


def ack_peer_latencies(samples: list[tuple[float, float, bool]], start: float) -> list[float]:
    """Latencies of the heartbeats without an acknowledgement sent in the same 100 ms as
    one with: whether acknowledgements are slow themselves or only sent at slow moments."""
    slices = {int((s - start) * 10) for s, _x, a in samples if a}
    return [round(x, 6) for s, x, a in samples if not a and int((s - start) * 10) in slices]


def slow_by_second(samples: list[tuple[float, float, bool]], start: float) -> dict[str, int]:
    out: dict[str, int] = {}
    for s, x, _a in samples:
        if x > 0.05:
            key = str(int(s - start))
            out[key] = out.get(key, 0) + 1
    return out


if __name__ == "__main__":
    sys.exit(load_generator_main({"capacity": capacity_main}))
