"""The capacity scenario of bench/consumer_protocol.py (3) on the coordinator alone, on a manual clock.

Groups of five consumer-protocol members join at random moments over ``--join-spread``
seconds, then every member heartbeats at the interval each answer gives (sending its
assignment back once, as the bench's load generator does), for ``--duration`` seconds
more. No sockets and no waiting: the answers come at once, so the output is what the
coordinator asks of the broker, apart from the machine's load: heartbeats per second,
records written, heartbeats per member until it settles, and how long rebalances take.
The coordinator's own CPU per heartbeat is measured too (records encoded into batches
and applied, as the broker does). Compare budgets with ``--reconciling-budget`` (0: none).

    python bench/consumer_heartbeat_model.py --groups 2000 --join-spread 20 --reconciling-budget 0
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slipstream.broker.offsets_batches import batches_by_producer
from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, ManualTimer, RequestContext
from slipstream.coordinator.consumer.assignors.base import TopicMetadata
from slipstream.coordinator.result import CoordinatorResult
from slipstream.coordinator.topics_image import TopicsImage
from slipstream.protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)

MEMBERS_PER_GROUP = 5
SHORT_MS = 200  # the reconciling interval: an answer above it counts as settled


@dataclass
class ModelMember:
    group_id: str
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    joined_ms: int | None = None
    settled_ms: int | None = None
    last_change_ms: int | None = None
    beats: int = 0
    beats_to_settle: int = 0
    pending: Any = None  # the assignment of the last answer that carried one, to send back


def pct(values: list[int], q: float) -> int | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None


def carry_out(coordinator: GroupCoordinator, result: CoordinatorResult, now_ms: int) -> Any:
    """Write (encode) and apply the records, then run what follows the write: the answer."""
    response = result.response
    while True:
        if result.records:
            batches_by_producer(result.records, now_ms, 1 << 20)
            for record in result.records:
                coordinator.apply(record, now_ms)
        if result.after_append is None:
            return response
        result = result.after_append(0, now_ms)
        response = result.response or response


def run(groups: int, spread_s: float, duration_s: float, reconciling_budget: int) -> dict[str, Any]:
    config = CoordinatorConfig(
        consumer_group_heartbeat_budget_per_s=200,
        consumer_group_reconciling_heartbeat_budget_per_s=reconciling_budget,
    )
    timer = ManualTimer(start_ms=0)
    image = TopicsImage.of(1, [TopicMetadata(uuid.uuid5(uuid.NAMESPACE_OID, "cap"), "cap", MEMBERS_PER_GROUP)])
    coordinator = GroupCoordinator(config, timer=timer, topics=lambda: image)
    coordinator.finish_loading(0)
    ctx = RequestContext(api_version=1, client_id="model", client_host="/127.0.0.1")
    rng = random.Random(1)
    members: list[ModelMember] = []
    due: list[tuple[int, int]] = []
    for g in range(groups):
        at = int(rng.uniform(0, spread_s) * 1000)
        for _ in range(MEMBERS_PER_GROUP):
            members.append(ModelMember(f"c848-{g}"))
            heapq.heappush(due, (at, len(members) - 1))
    per_second: Counter[int] = Counter()
    records = 0
    cpu = 0.0
    end_ms = int((spread_s + duration_s) * 1000)
    while due and due[0][0] <= end_ms:
        at, index = heapq.heappop(due)
        timer.advance(at - timer.now_ms, on_fired=lambda f: carry_out(coordinator, f.result, f.at_ms))
        m = members[index]
        if m.joined_ms is None:
            m.joined_ms = at
            request = ConsumerGroupHeartbeatRequest(
                group_id=m.group_id, member_id=m.member_id, member_epoch=0, rebalance_timeout_ms=60_000,
                subscribed_topic_names=["cap"], topic_partitions=[],
            )
        else:
            owned = None if m.pending is None else [
                ConsumerGroupHeartbeatRequestTopicPartitions(topic_id=t.topic_id, partitions=list(t.partitions))
                for t in m.pending
            ]
            m.pending = None
            request = ConsumerGroupHeartbeatRequest(
                group_id=m.group_id, member_id=m.member_id, member_epoch=m.epoch, topic_partitions=owned
            )
        started = time.process_time()
        result = coordinator.consumer_group_heartbeat(ctx, request, at)
        records += len(result.records)
        response = carry_out(coordinator, result, at)
        cpu += time.process_time() - started
        if response.error_code:
            raise SystemExit(f"member {m.member_id} of {m.group_id}: error {response.error_code}")
        m.beats += 1
        per_second[at // 1000] += 1
        m.epoch = response.member_epoch
        if response.assignment is not None:
            m.pending = response.assignment.topic_partitions
            m.last_change_ms = at
        if response.heartbeat_interval_ms > 2 * SHORT_MS and m.settled_ms is None:
            m.settled_ms, m.beats_to_settle = at, m.beats
        heapq.heappush(due, (at + response.heartbeat_interval_ms, index))
    heartbeats = sum(per_second.values())
    settle = [m.settled_ms - m.joined_ms for m in members if m.settled_ms is not None and m.joined_ms is not None]
    change = [m.last_change_ms - m.joined_ms for m in members if m.last_change_ms is not None and m.joined_ms is not None]
    return {
        "heartbeats": heartbeats,
        "records": records,
        "cpu_us_per_heartbeat": 1e6 * cpu / max(1, heartbeats),
        "settled": sum(1 for m in members if m.settled_ms is not None),
        "members": len(members),
        "join_to_settled_ms": (pct(settle, 0.5), pct(settle, 0.99)),
        "join_to_last_assignment_ms": (pct(change, 0.5), pct(change, 0.99)),
        "beats_to_settle": (pct([m.beats_to_settle for m in members], 0.5), max(m.beats_to_settle for m in members)),
        "peak_per_second": max(per_second.values()),
        "per_second": dict(sorted(per_second.items())),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--groups", type=int, default=2000)
    p.add_argument("--join-spread", type=float, default=20.0)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--reconciling-budget", type=int, action="append",
                   help="heartbeats/s (repeatable; default: 0 and the broker's 1000)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    print("| reconciling budget | heartbeats | peak/s | records | coordinator us/heartbeat | join -> settled"
          " p50, p99 (ms) | join -> last assignment p50, p99 (ms) | heartbeats to settle p50, max |")
    print("|---:|---:|---:|---:|---:|---|---|---|")
    for budget in args.reconciling_budget or [0, 1000]:
        r = run(args.groups, args.join_spread, args.duration, budget)
        print(f"| {budget or 'none'} | {r['heartbeats']:,} | {r['peak_per_second']:,} | {r['records']:,}"
              f" | {r['cpu_us_per_heartbeat']:.0f} | {r['join_to_settled_ms']} | {r['join_to_last_assignment_ms']}"
              f" | {r['beats_to_settle']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
