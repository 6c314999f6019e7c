"""Churn test of Slipstream's own ConsumerGroup client beside confluent-kafka members.

Six members, four of ``slipstream.client.consumer_group.ConsumerGroup`` and two
confluent-kafka (librdkafka) consumers in the same group, each in a process of
its own (this file run as a program, see ``member`` below), consume a
12-partition topic while Slipstream's ``AIOProducer`` writes a bounded number of
records; for ~20 s members are SIGKILLed and restarted at random (seeded). The
broker is a subprocess started with ``group.min.session.timeout.ms=1000`` and
the members use a 3 s session timeout, so a killed member expires in seconds.

Members print the event lines of test_groups_harness (assigned / revoked /
lost / record / committed / closed, stamped with CLOCK_MONOTONIC), so the
harness's checker applies: every acked record processed at least once, no gaps
within an ownership, nothing committed delivered again, duplicates bounded by
what an owner processed but had not committed; commits never go backwards per
partition (committed lines in time order and the final OffsetFetch); with
cooperative-sticky no partition owned by two live members at the same instant
(a killed member's ownership ends at its kill); with range the owned sets of
one generation are disjoint, and only a member that lost its partitions (its
session expired while it went on) or was killed overlaps the next owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))

from test_groups_harness import (  # noqa: E402
    HEARTBEAT_MS,
    SESSION_MS,
    Member,
    admin_client,
    check_exclusive_ownership,
    check_generations,
    check_processing,
    committed_offsets,
    last_processed,
    mono_ns,
    ownership_intervals,
    start_python_member,
    wait_empty,
    wait_stable,
    wait_until,
)

pytestmark = [pytest.mark.conformance]

PARTITIONS = 12


# =========================================================================================
# The member program: one Slipstream ConsumerGroup (handler API)
# =========================================================================================


def _emit(event: str, **fields: Any) -> None:
    fields = {"event": event, "t": fields.pop("t", None) or mono_ns(), **fields}
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


async def _member_async(cfg: dict[str, Any]) -> None:
    from slipstream.client.consumer_group import ConsumerGroup, ConsumerGroupHandler

    topic = cfg["topic"]
    owned: set[int] = set()
    stop = asyncio.Event()
    commit_every = cfg.get("commit_interval_s", 0.3)

    # One commit at a time, so "committed" lines come in the order the commits went out.
    commit_lock = asyncio.Lock()

    async def commit(session: Any) -> None:
        async with commit_lock:
            pending = {tp[1]: om.offset for tp, om in session.pending_commits().items() if tp[0] == topic}
            if not pending:
                return
            try:
                await session.commit()
            except Exception as e:  # a commit may fail around a rebalance
                _emit("commit_failed", error=f"{type(e).__name__}: {e}", offsets={str(p): o for p, o in pending.items()})
                return
            _emit("committed", offsets={str(p): o for p, o in pending.items()}, generation=session.generation_id)

    class Handler(ConsumerGroupHandler):
        """Ownership is per claim: under cooperative-sticky a claim can be revoked (and one
        added) while the session goes on, so assigned / revoked / lost lines come from
        ``consume_claim``: assigned before its first record, revoked after its last record
        and the commit of its offsets, lost (no commit) when the session lost its partitions."""

        def __init__(self) -> None:
            self.committer: asyncio.Task[None] | None = None

        async def setup(self, session: Any) -> None:
            async def loop() -> None:
                while not session.ended:
                    await asyncio.sleep(commit_every)
                    if not session.ended:
                        await commit(session)

            self.committer = asyncio.get_running_loop().create_task(loop())

        async def consume_claim(self, session: Any, claim: Any) -> None:
            p = claim.partition
            owned.add(p)
            _emit("assigned", partitions=[p], owned=sorted(owned), generation=session.generation_id)
            async for msg in claim.messages():
                _emit("record", partition=msg.partition, offset=msg.offset,
                      key=msg.key.decode() if msg.key is not None else None)
                session.mark_message(msg)
            if session.lost:
                owned.discard(p)
                _emit("lost", partitions=[p], owned=sorted(owned))
                return
            await commit(session)
            owned.discard(p)
            reason = "revoked (cooperative)" if claim.revoked else session.end_reason or "rebalance"
            _emit("revoked", partitions=[p], owned=sorted(owned), reason=reason)

        async def cleanup(self, session: Any) -> None:
            if self.committer is not None:
                self.committer.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.committer
            if not session.lost:
                await commit(session)

    if cfg.get("assignor") == "consumer":
        # KIP-848: the broker assigns and owns the session and heartbeat interval.
        protocol: dict[str, Any] = {"group_protocol": "consumer"}
    else:
        protocol = {
            "partition_assignment_strategy": [cfg.get("assignor", "range")],
            "session_timeout_ms": cfg.get("session_ms", SESSION_MS),
            "heartbeat_interval_ms": cfg.get("heartbeat_ms", HEARTBEAT_MS),
        }
    group = ConsumerGroup(
        cfg["bootstrap"], cfg["group"],
        client_id=cfg["name"],
        max_poll_interval_ms=cfg.get("max_poll_ms", 15000),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        **protocol,
    )
    loop = asyncio.get_running_loop()
    closer: list[asyncio.Task[None]] = []

    def on_term() -> None:
        stop.set()
        if not closer:
            closer.append(loop.create_task(group.close()))

    loop.add_signal_handler(signal.SIGTERM, on_term)
    handler = Handler()
    try:
        while not stop.is_set() and not group.closed:
            await group.consume([topic], handler)
    finally:
        if closer:
            await closer[0]
        else:
            await group.close()
    _emit("closed")


def member_main(cfg: dict[str, Any]) -> int:
    try:
        asyncio.run(_member_async(cfg))
    except BaseException as e:
        _emit("error", type=type(e).__name__, message=str(e))
        raise
    _emit("done")
    return 0


def start_slipstream_member(name: str, bootstrap: str, topic: str, group: str, **opts: Any) -> Member:
    """A Slipstream ConsumerGroup member process (event lines as in test_groups_harness)."""
    import os

    cfg = {"name": name, "bootstrap": bootstrap, "topic": topic, "group": group, **opts}
    proc = subprocess.Popen(
        [sys.executable, str(HERE), "member", json.dumps(cfg)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    m = Member(name, proc)
    m.start_readers()
    return m


# =========================================================================================
# Slipstream's AIOProducer writing a bounded number of records, paced
# =========================================================================================


class SlipProducer:
    """AIOProducer in a thread of its own: k<i>/v<i> at ~``rate``/s, at most ``cap`` records."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 300.0, cap: int = 5000, start: int = 0) -> None:
        self.bootstrap, self.topic, self.rate, self.cap, self.start_index = bootstrap, topic, rate, cap, start
        self.acks: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True, name="slip-producer")

    async def _run(self) -> None:
        from slipstream.client.producer import AIOProducer

        try:
            async with AIOProducer(self.bootstrap, linger_ms=5) as producer:
                futs: list[tuple[str, asyncio.Future[Any]]] = []
                t0 = time.monotonic()
                i = self.start_index
                while not self._stop.is_set() and self.sent < self.cap:
                    key = f"k{i}"
                    futs.append((key, await producer.send(self.topic, f"v{i}".encode(), key=key.encode())))
                    i += 1
                    self.sent += 1
                    delay = t0 + self.sent / self.rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await producer.flush(30)
                for key, fut in futs:
                    try:
                        md = await asyncio.wait_for(fut, 30)
                        self.acks[key] = (md.partition, md.offset)
                    except Exception as e:
                        self.errors.append(f"{key}: {type(e).__name__}: {e}")
        except Exception as e:
            self.errors.append(f"producer: {type(e).__name__}: {e}")

    def start(self) -> SlipProducer:
        self._thread.start()
        return self

    def wait(self, timeout: float = 60) -> dict[str, tuple[int, int]]:
        self._thread.join(timeout=timeout)
        assert not self._thread.is_alive(), "producer did not finish"
        assert not self.errors, f"producer errors: {self.errors[:5]}"
        assert len(self.acks) == self.sent, f"{len(self.acks)} acks for {self.sent} records"
        return dict(self.acks)

    def stop(self) -> dict[str, tuple[int, int]]:
        self._stop.set()
        return self.wait()


# =========================================================================================
# Checks shared with the interop tests
# =========================================================================================


def check_commits_monotonic(members: list[Member], final: dict[int, int]) -> int:
    """Successful commits in time order never go backwards per partition, and the final
    OffsetFetch is at least the highest of them. Returns the number of commits seen."""
    commits: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for m in members:
        for e in m.snapshot():
            if e["event"] == "committed":
                for p, o in e["offsets"].items():
                    commits[int(p)].append((e["t"], o, m.name))
    problems = []
    for p, lst in commits.items():
        lst.sort()
        for (t1, o1, n1), (t2, o2, n2) in itertools.pairwise(lst):
            if o2 < o1:
                problems.append(f"partition {p}: {n1} committed {o1} at t={t1}, then {n2} committed {o2} at t={t2}")
        if final.get(p, -1) < lst[-1][1]:
            problems.append(f"partition {p}: final committed {final.get(p)} below last commit {lst[-1][1]}")
    assert not problems, "commits went backwards:\n" + "\n".join(problems[:20])
    return sum(len(v) for v in commits.values())


def verify_end(admin: Any, bootstrap: str, group: str, topic: str, members: list[Member],
               acks: dict[str, tuple[int, int]], *, cooperative: bool, partitions: int = PARTITIONS) -> Any:
    from conformance_helpers import ck_watermarks

    wait_until(lambda: {(e["partition"], e["offset"]) for m in members for e in m.records()} >= set(acks.values()),
               30, lambda: "every acked record to be processed; "
               + "\n".join(m.diag() for m in members if m.end_t is None))
    # Records a killed member processed but never committed are processed again by their
    # next owner: wait for the live group to commit up to the log end before closing it.
    log_end = {p: hi for p, (_lo, hi) in ck_watermarks(bootstrap, topic).items()}
    wait_until(lambda: committed_offsets(admin, group, topic, partitions) == log_end, 30,
               lambda: f"the live members to commit up to the log end {log_end}: "
               f"{committed_offsets(admin, group, topic, partitions)}")
    for m in members:
        if m.end_t is None:
            m.close()
    wait_empty(admin, group)
    for m in members:
        assert not m.errors(), f"{m.name}: {m.errors()[:3]}; {m.diag()}"
    intervals = ownership_intervals(members)
    # Eager: a member whose session expired may go on until it learns it lost its
    # partitions, but one that revoked them never overlaps the next owner.
    check_exclusive_ownership(intervals, zombies=not cooperative)
    check_generations(members)
    # Commits first: the duplicate bound of check_processing reads each partition's latest
    # commit, which is only the right bound while commits never go backwards.
    final = committed_offsets(admin, group, topic, partitions)
    check_commits_monotonic(members, final)
    report = check_processing(members, acks)
    hw = {p: hi for p, (_lo, hi) in ck_watermarks(bootstrap, topic).items()}
    done = last_processed(members)
    assert final == {p: done.get(p, -1) + 1 for p in hw} == hw, (
        f"committed {final}, last processed + 1 {({p: done.get(p, -1) + 1 for p in hw})}, log end {hw}"
    )
    return report


# =========================================================================================
# The churn test
# =========================================================================================


# Of the six member slots, these are confluent-kafka (librdkafka) members; the rest ours.
CONFLUENT_SLOTS = 2

@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range", "consumer"])
def test_churn_kill_and_restart(request, topic_name, assignor):
    """``assignor`` "consumer": the consumer (KIP-848) group protocol, the broker assigning."""
    from conformance_helpers import ck_create_topic

    group_broker = request.getfixturevalue("consumer_broker" if assignor == "consumer" else "group_broker")

    rng = random.Random(f"churn-{assignor}-4")
    group = f"g-churn-{assignor}-{uuid.uuid4().hex[:8]}"
    bootstrap = group_broker.bootstrap
    ck_create_topic(bootstrap, topic_name, partitions=PARTITIONS)
    admin = admin_client(bootstrap)
    members: list[Member] = []
    slots: dict[int, Member] = {}
    counter = [0]

    def launch(slot: int) -> Member:
        counter[0] += 1
        if slot < CONFLUENT_SLOTS:
            # librdkafka members in the same group: our client interoperates with theirs.
            protocol = {"group_protocol": "consumer"} if assignor == "consumer" else {"assignor": assignor}
            m = start_python_member("confluent", f"c{slot}-{counter[0]}", bootstrap, topic_name, group, **protocol)
        else:
            m = start_slipstream_member(f"s{slot}-{counter[0]}", bootstrap, topic_name, group, assignor=assignor)
        members.append(m)
        slots[slot] = m
        return m

    producer = None
    try:
        for s in range(6):
            launch(s)
        wait_stable(admin, group, list(slots.values()), partitions=PARTITIONS, timeout=30)
        producer = SlipProducer(bootstrap, topic_name, rate=250, cap=5000).start()
        churn_end = time.monotonic() + 20
        kills = 0
        while time.monotonic() < churn_end:
            time.sleep(rng.uniform(0.5, 2.0))
            slot = rng.randrange(6)
            victim = slots[slot]
            victim.kill()
            kills += 1
            if rng.random() < 0.7:
                time.sleep(rng.uniform(0.0, 1.0))
                launch(slot)
        for s in range(6):
            if slots[s].end_t is not None:
                launch(s)
        acks = producer.stop()
        # Every slot alive again: the group settles on six members partitioning the topic.
        wait_stable(admin, group, list(slots.values()), partitions=PARTITIONS, timeout=30)
        report = verify_end(admin, bootstrap, group, topic_name, members, acks,
                            cooperative=assignor in ("cooperative-sticky", "consumer"))
        incremental = sum(1 for m in members for e in m.snapshot()
                          if e["event"] == "revoked" and e.get("reason") == "revoked (cooperative)")
        print(f"{assignor}: {len(acks)} records, {kills} kills, {len(members)} member processes, "
              f"{incremental} claims revoked incrementally, {report}")
        assert kills >= 8
        if assignor == "range":
            # Only a cooperative rebalance revokes single claims out of a running session.
            # (Under cooperative-sticky how many it moves depends on timing: partitions of a
            # killed member are handed out without revoking anyone's.)
            assert incremental == 0
    finally:
        if producer is not None:
            producer._stop.set()
        for m in members:
            m.reap()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        sys.exit(member_main(json.loads(sys.argv[2])))
    sys.exit(f"usage: {sys.argv[0]} member JSON")
