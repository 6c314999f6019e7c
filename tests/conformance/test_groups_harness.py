"""Consumer-group conformance harness: member processes, the ownership checker, the scenario.

Every group member runs in a process of its own, so a test can close it
(SIGTERM: commit, give the partitions up, close the consumer) or kill it
(SIGKILL: its sockets close, nothing is sent; the broker only learns of it when
its session expires). Python members are this file run as a program::

    python test_groups_harness.py member '{"client": "confluent", ...}'

Java members are ``SlipstreamDriver group-consume``. Both print one JSON object
per line; every line carries ``t`` = CLOCK_MONOTONIC in ns (Python's
``time.monotonic_ns()``, Java's ``System.nanoTime()`` on Linux), so events of
different processes are ordered on one clock:

- ``assigned`` / ``revoked`` / ``lost``: partitions, and the member's ``owned``
  set after the callback. ``assigned`` is stamped on entry to the callback,
  ``revoked`` on exit (after the commit of what was processed).
- ``record``: a processed record (partition, offset, key).
- ``committed`` / ``commit_failed``: a synchronous OffsetCommit and its outcome.
- ``closed``: the consumer is closed.

The checker turns those into ownership intervals per partition and asserts
that no two members ever own a partition at the same instant, that every record
is processed while its member owns the partition, that offsets are read without
gaps within an ownership, that nothing committed is delivered again, and that
every duplicate is a record its first reader had processed but not committed.
The tests at the end of this file feed the checker synthetic timelines to show
that those assertions bite.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
TOPIC_PARTITIONS = 6
# Short group timeouts so an expiry costs seconds; the broker is started with
# group.min.session.timeout.ms low enough to allow them (see conftest.group_broker).
SESSION_MS = 3000
HEARTBEAT_MS = 300
MAX_POLL_MS = 15000  # also the rebalance timeout of the classic protocol clients


def mono_ns() -> int:
    return time.monotonic_ns()


# =========================================================================================
# Python members (run as a program)
# =========================================================================================


class _MemberBase:
    """Shared bookkeeping: processed/committed offsets, owned partitions, event output."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.topic: str = cfg["topic"]
        self.processed_next: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.owned: set[int] = set()
        self.closing = False
        self.stop = False
        self.resubscribe = False  # SIGUSR1 (a confluent member with ``usr1_topics``)

    @staticmethod
    def emit(event: str, **fields: Any) -> None:
        fields = {"event": event, "t": fields.pop("t", None) or mono_ns(), **fields}
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    def pending(self, parts: Iterable[int]) -> dict[int, int]:
        return {p: self.processed_next[p] for p in parts
                if p in self.processed_next and self.processed_next[p] > self.committed.get(p, -1)}

    def note_committed(self, offsets: dict[int, int], generation: int | None) -> None:
        self.committed.update(offsets)
        self.emit("committed", offsets={str(p): o for p, o in offsets.items()}, generation=generation)

    def note_assigned(self, t: int, parts: Iterable[int], generation: int | None) -> None:
        parts = sorted(parts)
        self.owned |= set(parts)
        # A new ownership: what an earlier one processed (and perhaps failed to commit) is not
        # this one's to commit; committing it on a later revocation would move the group's
        # offset back below what the owners in between committed.
        for p in parts:
            self.processed_next.pop(p, None)
            self.committed.pop(p, None)
        self.emit("assigned", t=t, partitions=parts, owned=sorted(self.owned), generation=generation)

    def note_revoked(self, parts: Iterable[int], reason: str = "rebalance") -> None:
        parts = sorted(parts)
        self.owned -= set(parts)
        self.emit("revoked", partitions=parts, owned=sorted(self.owned), reason=reason)

    def note_lost(self, t: int, parts: Iterable[int]) -> None:
        parts = sorted(parts)
        self.owned -= set(parts)
        self.emit("lost", t=t, partitions=parts, owned=sorted(self.owned))

    def note_record(self, partition: int, offset: int, key: bytes | None) -> None:
        self.emit("record", partition=partition, offset=offset, key=key.decode() if key is not None else None)
        self.processed_next[partition] = offset + 1


class _ConfluentMember(_MemberBase):
    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

        cfg = self.cfg
        conf: dict[str, Any] = {
            "bootstrap.servers": cfg["bootstrap"],
            "group.id": cfg["group"],
            "client.id": cfg["name"],
            "max.poll.interval.ms": cfg.get("max_poll_ms", MAX_POLL_MS),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "enable.partition.eof": False,
        }
        if cfg.get("group_protocol", "classic") == "consumer":
            # KIP-848: the broker owns the session, the heartbeat interval and the assignor.
            conf["group.protocol"] = "consumer"
            if cfg.get("assignor"):
                conf["group.remote.assignor"] = cfg["assignor"]
        else:
            conf["partition.assignment.strategy"] = cfg.get("assignor", "range")
            conf["session.timeout.ms"] = cfg.get("session_ms", SESSION_MS)
            conf["heartbeat.interval.ms"] = cfg.get("heartbeat_ms", HEARTBEAT_MS)
        if cfg.get("instance_id"):
            conf["group.instance.id"] = cfg["instance_id"]
        conf.update(cfg.get("extra_conf", {}))  # e.g. {"debug": "cgrp"} when diagnosing
        consumer = Consumer(conf)

        def commit(offsets: dict[int, int]) -> None:
            if not offsets:
                return
            tps = [TopicPartition(self.topic, p, o) for p, o in offsets.items()]
            try:
                res = consumer.commit(offsets=tps, asynchronous=False)
                bad = [f"{tp.partition}: {tp.error}" for tp in res or () if tp.error]
                if bad:
                    raise KafkaException(bad[0])
            except KafkaException as e:
                self.emit("commit_failed", error=str(e), offsets={str(p): o for p, o in offsets.items()})
                return
            self.note_committed(offsets, None)

        def on_assign(_c: Any, parts: list[Any]) -> None:
            t = mono_ns()
            if not self.closing:
                self.note_assigned(t, [tp.partition for tp in parts], None)

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            if not self.closing:
                ps = [tp.partition for tp in parts]
                stall = cfg.get("stall_revoke_s")
                if stall:
                    # A member that never gives its partitions up in time (its heartbeats go on).
                    self.emit("stalling", partitions=sorted(ps))
                    time.sleep(stall)
                commit(self.pending(ps))
                self.note_revoked(ps)

        def on_lost(_c: Any, parts: list[Any]) -> None:
            t = mono_ns()
            if not self.closing:
                self.note_lost(t, [tp.partition for tp in parts])

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        self.emit("started")
        while not self.stop:
            if self.resubscribe and cfg.get("usr1_topics"):
                # SIGUSR1: change the subscription (a classic member's JoinGroup with new metadata).
                self.resubscribe = False
                consumer.subscribe(cfg["usr1_topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
                self.emit("resubscribed", topics=cfg["usr1_topics"])
            msgs = consumer.consume(num_messages=50, timeout=0.1)
            batch: dict[int, int] = {}
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.emit("client_error", error=str(m.error()), fatal=bool(m.error().fatal()))
                    continue
                self.note_record(m.partition(), m.offset(), m.key())
                batch[m.partition()] = m.offset() + 1
            # The batch, and what a failed commit (around a rebalance) left behind: an
            # at-least-once application retries, else the last records before the producer
            # stops stay uncommitted until close.
            commit(self.pending(self.owned | set(batch)))
        commit(self.pending(self.owned))
        self.note_revoked(sorted(self.owned), reason="close")
        self.closing = True
        consumer.close()
        self.emit("closed")


def count_pending_join_as_rejoin(coordinator: Any) -> None:
    """Work around a kafka-python 3.0.12 bug that can leave a member joined but never heartbeating.

    ``join_group_async`` loops ``while need_rejoin()`` and leaves its join task in flight
    when a poll's timeout runs out. If the rejoin was caused by a metadata change seen by
    the leader, the leader's own assignment (made inside that task) updates the metadata
    snapshot, so ``need_rejoin()`` is False on the next poll: the finished join is never
    taken, heartbeats stay disabled, and the member's session expires for good. The Java
    client's ``rejoinNeededOrPending()`` also counts a pending join; so does this shim.
    Seen in our lifecycle test as a leader that re-formed the group after learning the
    topic's partitions, then went silent (broker: session expired; client: no rejoin).
    """
    need_rejoin = coordinator.need_rejoin

    def need_rejoin_or_pending() -> bool:
        return bool(need_rejoin()) or getattr(coordinator, "_join_task", None) is not None

    coordinator.need_rejoin = need_rejoin_or_pending


class _KafkaPythonMember(_MemberBase):
    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        cfg = self.cfg
        assignor = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }[cfg.get("assignor", "range")]
        kwargs: dict[str, Any] = {}
        if cfg.get("instance_id"):
            kwargs["group_instance_id"] = cfg["instance_id"]
        consumer = KafkaConsumer(
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            client_id=cfg["name"],
            partition_assignment_strategy=[assignor],
            session_timeout_ms=cfg.get("session_ms", SESSION_MS),
            heartbeat_interval_ms=cfg.get("heartbeat_ms", HEARTBEAT_MS),
            max_poll_interval_ms=cfg.get("max_poll_ms", MAX_POLL_MS),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            **kwargs,
        )
        count_pending_join_as_rejoin(consumer._coordinator)

        def generation() -> int | None:
            try:
                return int(consumer._coordinator._generation.generation_id)
            except Exception:
                return None

        def commit(offsets: dict[int, int]) -> None:
            if not offsets:
                return
            try:
                consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                                 for p, o in offsets.items()})
            except KafkaError as e:
                self.emit("commit_failed", error=repr(e), offsets={str(p): o for p, o in offsets.items()})
                return
            self.note_committed(offsets, generation())

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                if not member.closing:
                    ps = [tp.partition for tp in revoked]
                    commit(member.pending(ps))
                    member.note_revoked(ps)

            def on_partitions_assigned(self, assigned: Any) -> None:
                t = mono_ns()
                if not member.closing:
                    member.note_assigned(t, [tp.partition for tp in assigned], generation())

            def on_partitions_lost(self, lost: Any) -> None:
                t = mono_ns()
                if not member.closing:
                    member.note_lost(t, [tp.partition for tp in lost])

        consumer.subscribe([self.topic], listener=Listener())
        self.emit("started")
        while not self.stop:
            polled = consumer.poll(timeout_ms=100, max_records=50)
            batch: dict[int, int] = {}
            for tp, recs in polled.items():
                for r in recs:
                    self.note_record(tp.partition, r.offset, r.key)
                    batch[tp.partition] = r.offset + 1
            # The batch, and what a failed commit (around a rebalance) left behind: an
            # at-least-once application retries, else the last records before the producer
            # stops stay uncommitted until close.
            commit(self.pending(self.owned | set(batch)))
        commit(self.pending(self.owned))
        self.note_revoked(sorted(self.owned), reason="close")
        self.closing = True
        consumer.close(autocommit=False)
        self.emit("closed")


class _AiokafkaMember(_MemberBase):
    def run(self) -> None:
        import asyncio

        asyncio.run(self._run())

    async def _run(self) -> None:
        import asyncio

        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from aiokafka.errors import KafkaError

        cfg = self.cfg
        assignor = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor,
        }[cfg.get("assignor", "range")]
        kwargs: dict[str, Any] = {}
        if cfg.get("instance_id"):
            kwargs["group_instance_id"] = cfg["instance_id"]
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cfg["bootstrap"],
            group_id=cfg["group"],
            client_id=cfg["name"],
            partition_assignment_strategy=(assignor,),
            session_timeout_ms=cfg.get("session_ms", SESSION_MS),
            heartbeat_interval_ms=cfg.get("heartbeat_ms", HEARTBEAT_MS),
            max_poll_interval_ms=cfg.get("max_poll_ms", MAX_POLL_MS),
            rebalance_timeout_ms=cfg.get("max_poll_ms", MAX_POLL_MS),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            **kwargs,
        )

        def generation() -> int | None:
            try:
                return int(consumer._coordinator.generation)
            except Exception:
                return None

        async def commit(offsets: dict[int, int]) -> None:
            if not offsets:
                return
            try:
                await consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
            except KafkaError as e:
                self.emit("commit_failed", error=repr(e), offsets={str(p): o for p, o in offsets.items()})
                return
            self.note_committed(offsets, generation())

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if not member.closing:
                    ps = [tp.partition for tp in revoked]
                    await commit(member.pending(ps))
                    member.note_revoked(ps)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                t = mono_ns()
                if not member.closing:
                    member.note_assigned(t, [tp.partition for tp in assigned], generation())

        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        self.emit("started")
        try:
            while not stop.is_set():
                polled = await consumer.getmany(timeout_ms=100, max_records=50)
                batch: dict[int, int] = {}
                for tp, recs in polled.items():
                    for r in recs:
                        self.note_record(tp.partition, r.offset, r.key)
                        batch[tp.partition] = r.offset + 1
                # As the other members: the batch and what a failed commit left behind.
                await commit(self.pending(self.owned | set(batch)))
            await commit(self.pending(self.owned))
            self.note_revoked(sorted(self.owned), reason="close")
            self.closing = True
        finally:
            await consumer.stop()
        self.emit("closed")


MEMBER_CLASSES: dict[str, type[_MemberBase]] = {
    "confluent": _ConfluentMember,
    "kafka-python": _KafkaPythonMember,
    "aiokafka": _AiokafkaMember,
}


def member_main(cfg: dict[str, Any]) -> int:
    member = MEMBER_CLASSES[cfg["client"]](cfg)

    def on_term(_sig: int, _frame: Any) -> None:
        member.stop = True

    def on_usr1(_sig: int, _frame: Any) -> None:
        member.resubscribe = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    try:
        member.run()
    except BaseException as e:  # reported to the test, which fails on it
        member.emit("error", type=type(e).__name__, message=str(e))
        raise
    member.emit("done")
    return 0


# =========================================================================================
# Member processes seen from the test
# =========================================================================================


@dataclass
class Member:
    """One member process and the events it printed (read by a thread)."""

    name: str
    proc: subprocess.Popen[str] | None
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    end_t: int | None = None  # when it stopped owning anything: closed, or killed and reaped
    killed: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)
    client_id: str = ""  # what the broker reports for it (defaults to the name)
    instance_id: str | None = None  # group.instance.id of a static member

    def __post_init__(self) -> None:
        self.client_id = self.client_id or self.name

    def start_readers(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self.proc.stderr is not None

        def out() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if not line.startswith("{"):
                    self.stderr.append(line + "\n")
                    continue
                with self.cond:
                    self.events.append(json.loads(line))
                    self.cond.notify_all()
            with self.cond:
                self.events.append({"event": "eof", "t": mono_ns()})
                self.cond.notify_all()

        def err() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)
                del self.stderr[:-200]

        threading.Thread(target=out, daemon=True, name=f"{self.name}-out").start()
        threading.Thread(target=err, daemon=True, name=f"{self.name}-err").start()

    # ---- views ----------------------------------------------------------------------------

    def snapshot(self) -> list[dict[str, Any]]:
        with self.cond:
            return list(self.events)

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in self.snapshot():
            if e["event"] == "assigned":
                owned |= set(e["partitions"])
            elif e["event"] in ("revoked", "lost"):
                owned -= set(e["partitions"])
        return owned

    def records(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["event"] == "record"]

    def errors(self) -> list[dict[str, Any]]:
        """Failures of the member program and fatal client errors (transient ones, such as a
        broker connection lost while the test kills the broker, are only reported)."""
        return [e for e in self.snapshot() if e["event"] == "error" or (e["event"] == "client_error" and e["fatal"])]

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                while seen < len(self.events):
                    e = self.events[seen]
                    seen += 1
                    if pred(e):
                        return e
                    if e["event"] == "error":
                        raise AssertionError(f"{self.name} failed: {e}; {self.diag()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {what} within {timeout}s; {self.diag()}")
                self.cond.wait(min(left, 0.2))

    def diag(self) -> str:
        tail = [e for e in self.events if e["event"] != "record"][-8:]
        return f"last events of {self.name}: {tail}; stderr tail:\n{''.join(self.stderr[-25:])}"

    # ---- ending ---------------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> None:
        """Graceful: SIGTERM; the member commits, gives its partitions up and closes its consumer."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        closed = self.wait_for(lambda e: e["event"] == "closed", timeout, "'closed' after SIGTERM")
        self.proc.wait(timeout=timeout)
        self.end_t = closed["t"]

    def kill(self) -> None:
        """SIGKILL: no commit, no LeaveGroup; the broker must expire the session."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.end_t = mono_ns()
        self.killed = True

    def reap(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            if self.end_t is None:
                self.end_t = mono_ns()


def start_python_member(client: str, name: str, bootstrap: str, topic: str, group: str, **opts: Any) -> Member:
    cfg = {"client": client, "name": name, "bootstrap": bootstrap, "topic": topic, "group": group, **opts}
    proc = subprocess.Popen(
        [sys.executable, str(HERE), "member", json.dumps(cfg)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    m = Member(name, proc, instance_id=opts.get("instance_id"))
    m.start_readers()
    return m


def start_java_member(java_driver: Any, name: str, bootstrap: str, topic: str, group: str, *,
                      assignor: str = "range", instance_id: str | None = None,
                      session_ms: int = SESSION_MS, heartbeat_ms: int = HEARTBEAT_MS,
                      max_poll_ms: int = MAX_POLL_MS, client_id: str | None = None,
                      group_protocol: str = "classic", rebalance_trigger: Path | None = None,
                      stall_assignment: tuple[Path, int] | None = None) -> Member:
    """``client_id`` defaults to ``name``; a restarted instance keeps its predecessor's.
    With ``group_protocol="consumer"`` (KIP-848) ``assignor`` names the broker's assignor and
    the session and heartbeat settings are the broker's. ``assignor`` may list several,
    comma-separated. When ``rebalance_trigger`` appears, the member calls enforceRebalance;
    ``stall_assignment`` (path, ms): as leader, it sleeps ms in an assignment made while path
    exists (range only)."""
    args = [
        java_driver.java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m",
        "-cp", java_driver.classpath, "SlipstreamDriver", bootstrap, "group-consume", topic, group,
        "--assignor", assignor, "--client-id", client_id or name, "--session-timeout-ms", str(session_ms),
        "--heartbeat-ms", str(heartbeat_ms), "--max-poll-interval-ms", str(max_poll_ms),
    ]
    if instance_id:
        args += ["--instance-id", instance_id]
    if group_protocol != "classic":
        args += ["--group-protocol", group_protocol]
    if rebalance_trigger is not None:
        args += ["--rebalance-trigger", str(rebalance_trigger)]
    if stall_assignment is not None:
        args += ["--stall-assignment-file", str(stall_assignment[0]), "--stall-assignment-ms", str(stall_assignment[1])]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    m = Member(name, proc, client_id=client_id or name, instance_id=instance_id)
    m.start_readers()
    return m


# =========================================================================================
# The checker
# =========================================================================================


@dataclass(frozen=True)
class Interval:
    member: str
    partition: int
    start: int
    end: int
    end_reason: str  # revoked | lost | close | killed | open


def ownership_intervals(members: Sequence[Member], now: int | None = None) -> list[Interval]:
    """Ownership intervals of every member; asserts callbacks are consistent per member."""
    out: list[Interval] = []
    for m in members:
        open_: dict[int, int] = {}
        for e in m.snapshot():
            kind = e["event"]
            if kind == "assigned":
                for p in e["partitions"]:
                    assert p not in open_, f"{m.name} was assigned partition {p} it already owned: {e}"
                    open_[p] = e["t"]
            elif kind in ("revoked", "lost"):
                for p in e["partitions"]:
                    assert p in open_, f"{m.name} had partition {p} revoked/lost that it did not own: {e}"
                    out.append(Interval(m.name, p, open_.pop(p), e["t"], e.get("reason") or kind))
        end = m.end_t if m.end_t is not None else (now or mono_ns())
        reason = "killed" if m.killed else "open"
        out.extend(Interval(m.name, p, s, end, reason) for p, s in open_.items())
    return out


def check_exclusive_ownership(intervals: Sequence[Interval], *, zombies: bool = False) -> None:
    """No instant at which two members own the same partition.

    ``zombies``: the classic eager protocol, where a member whose session expired
    while it went on processing keeps owning the partition in its own eyes until it
    learns of it (its ownership ends ``lost``, or ``killed``) -- only such an owner may
    overlap its successor; one that gave the partition up (``revoked``, ``close``) may not."""
    by_p: dict[int, list[Interval]] = defaultdict(list)
    for iv in intervals:
        by_p[iv.partition].append(iv)
    problems = []
    for p, ivs in sorted(by_p.items()):
        ivs.sort(key=lambda iv: (iv.start, iv.end))
        holder: Interval | None = None
        for iv in ivs:
            if holder is not None and iv.start < holder.end and not (
                    zombies and holder.end_reason in ("lost", "killed")):
                problems.append(
                    f"partition {p}: {iv.member} owned it from t={iv.start} while {holder.member} still owned it "
                    f"until t={holder.end} ({holder.end_reason}); overlap {(holder.end - iv.start) / 1e6:.1f} ms"
                )
            if holder is None or iv.end > holder.end:
                holder = iv
    assert not problems, "partition owned by two members at once:\n" + "\n".join(problems)


def check_generations(members: Sequence[Member]) -> None:
    """Members that report generations: within a generation the owned sets are disjoint.

    A static member restarted without a rebalance continues its predecessor's generation
    and assignment, so owners are keyed by instance id when there is one."""
    by_gen: dict[int, dict[str, set[int]]] = defaultdict(dict)
    for m in members:
        for e in m.snapshot():
            if e["event"] == "assigned" and e.get("generation") is not None and e["generation"] >= 0:
                by_gen[e["generation"]][m.instance_id or m.name] = set(e["owned"])
    for gen, owners in sorted(by_gen.items()):
        seen: dict[int, str] = {}
        for name, owned in sorted(owners.items()):
            for p in owned:
                assert p not in seen, f"generation {gen}: partition {p} assigned to {seen[p]} and {name}: {owners}"
                seen[p] = name


@dataclass
class ProcessingReport:
    processed: int
    distinct: int
    duplicates: int
    duplicate_bound: int
    commits: int
    failed_commits: dict[str, int]  # error -> count (a commit may fail around a rebalance)


def check_processing(members: Sequence[Member], acks: dict[str, tuple[int, int]],
                     now: int | None = None) -> ProcessingReport:
    """Every acked record processed by an owner, no gaps within an ownership, nothing committed re-read.

    Duplicates may only be records processed by an earlier owner that did not
    commit past them before it stopped owning the partition.

    A re-read the client itself caused fails too. One seen: librdkafka (2.16) rewinds a
    partition it is fetching to auto.offset.reset when a ListOffsets answer comes back
    after the partition was restarted by a new assignment (the "outdated" answer arms a
    500 ms offset-query timer that nothing stops). The answer was late because it waited
    behind a Fetch long-poll on the same connection; the broker now ends such a long-poll
    when a request arrives behind it (broker/parked_waits.py), so the answer comes back in
    milliseconds and the race is left a window of one round trip.
    """
    intervals = ownership_intervals(members, now)
    by_member: dict[tuple[str, int], list[Interval]] = defaultdict(list)
    for iv in intervals:
        by_member[(iv.member, iv.partition)].append(iv)
    # Successful commits of anyone, by partition: (t, offset, member).
    commits: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    failed: list[str] = []
    for m in members:
        for e in m.snapshot():
            if e["event"] == "committed":
                for p, o in e["offsets"].items():
                    commits[int(p)].append((e["t"], o, m.name))
            elif e["event"] == "commit_failed":
                failed.append(f"{m.name}: {e['error']}")
    for lst in commits.values():
        lst.sort()

    def committed_before(p: int, t: int) -> int:
        """The offset a consumer fetching at ``t`` gets: the latest successful commit before
        ``t`` (not the highest: if a commit ever went backwards, that is what it reads;
        check_commits_monotonic reports the regression itself)."""
        latest = -1
        for ct, o, _who in commits.get(p, ()):
            if ct >= t:
                break
            latest = o
        return latest

    starts: dict[int, list[int]] = defaultdict(list)
    for iv in intervals:
        starts[iv.partition].append(iv.start)

    def handover(iv: Interval) -> int | None:
        """When the partition went on from ``iv``'s ownership to the next one (which reads
        from what was committed then), or None if no ownership began after ``iv`` did.

        Normally the next owner starts after ``iv`` ended. A member whose session expired
        while it went on processing (it learns of it late: ``lost``) still owns the
        partition in its own eyes when the next owner has already fetched the committed
        offset: then the handover is that start, not ``iv``'s end."""
        later = [t for t in starts[iv.partition] if t > iv.start]
        if not later:
            return None
        return min(iv.end + 1, min(later))

    by_pos = {v: k for k, v in acks.items()}
    seen: Counter[tuple[int, int]] = Counter()
    # Per record: every reading (member, interval, t) and how many of them the bound counts.
    readings: dict[tuple[int, int], list[tuple[str, Interval, int]]] = defaultdict(list)
    allowed: Counter[tuple[int, int]] = Counter()
    problems: list[str] = []
    dup_bound = 0
    total = 0
    for m in members:
        # Records of one ownership interval, in order.
        per_iv: dict[Interval, list[dict[str, Any]]] = defaultdict(list)
        for e in m.snapshot():
            if e["event"] != "record":
                continue
            total += 1
            p, off = e["partition"], e["offset"]
            seen[(p, off)] += 1
            if (p, off) in by_pos and by_pos[(p, off)] != e["key"]:
                problems.append(f"{m.name} read key {e['key']} at {(p, off)}, acked there: {by_pos[(p, off)]}")
            owner = [iv for iv in by_member.get((m.name, p), ()) if iv.start <= e["t"] <= iv.end]
            if not owner:
                problems.append(f"{m.name} processed {(p, off)} at t={e['t']} without owning partition {p}")
                continue
            per_iv[owner[0]].append(e)
            readings[(p, off)].append((m.name, owner[0], e["t"]))
        for iv, recs in per_iv.items():
            floor = committed_before(iv.partition, iv.start)
            offs = [r["offset"] for r in recs]
            if offs[0] < floor:
                problems.append(
                    f"{m.name} got partition {iv.partition} at t={iv.start} when {floor} was committed, "
                    f"but read from offset {offs[0]} (committed records delivered again)"
                )
            gaps = [(a, b) for a, b in itertools.pairwise(offs) if b != a + 1]
            if gaps:
                problems.append(f"{m.name} partition {iv.partition}: offsets not consecutive: {gaps[:5]}")
            # What this owner processed at or beyond the offset committed when the partition
            # went on to its next owner may be read again by that owner.
            handed_over = handover(iv)
            if handed_over is not None:
                last_commit = committed_before(iv.partition, handed_over)
                for o in offs:
                    if o >= last_commit:
                        dup_bound += 1
                        allowed[(iv.partition, o)] += 1
    missing = sorted(set(by_pos) - set(seen))
    if missing:
        problems.append(f"{len(missing)} acked records never processed, e.g. {missing[:10]}")
    dups = sum(c - 1 for c in seen.values() if c > 1)
    if dups > dup_bound:
        problems.append(f"{dups} duplicate deliveries, but only {dup_bound} records were processed and "
                        f"left uncommitted by an owner that lost its partition")
        problems.append(_explain_unbounded_duplicates(members, intervals, commits, seen, readings, allowed))
    assert not problems, "processing problems:\n" + "\n".join(problems[:30])
    n_commits = sum(len(v) for v in commits.values())
    failures = Counter(f.split(":", 2)[1].strip()[:60] for f in failed)
    return ProcessingReport(total, len(seen), dups, dup_bound, n_commits, dict(failures))


def _explain_unbounded_duplicates(members: Sequence[Member], intervals: Sequence[Interval],
                                  commits: dict[int, list[tuple[int, int, str]]],
                                  seen: Counter[tuple[int, int]],
                                  readings: dict[tuple[int, int], list[tuple[str, Interval, int]]],
                                  allowed: Counter[tuple[int, int]]) -> str:
    """The event log behind duplicates the bound does not explain: for each such record its
    readings (member, ownership interval, time), then the timeline of its partition around
    them: ownerships with the offsets read in each, commits and failed commits, by whom."""
    extra = sorted(k for k, c in seen.items() if c - 1 > allowed[k])
    if not extra:
        return "(no single record exceeds its own bound: the excess is spread over records)"
    t0 = min(iv.start for iv in intervals)

    def ms(t: int) -> str:
        return f"{(t - t0) / 1e6:.1f}ms"

    lines = [f"{len(extra)} records read more often than the bound allows, e.g. {extra[:10]}"]
    for p in sorted({p for p, _ in extra})[:3]:
        offs = [o for q, o in extra if q == p]
        lines.append(f"partition {p}, unexplained offsets {offs[:20]}:")
        for o in offs[:3]:
            lines.append(f"  offset {o}: read {seen[(p, o)]}x, bound allows {allowed[(p, o)]} re-reads: "
                         + "; ".join(f"{who} at {ms(t)} (owning {ms(iv.start)}..{ms(iv.end)} {iv.end_reason})"
                                     for who, iv, t in readings[(p, o)]))
        lo = min(iv.start for _who, iv, _t in readings[(p, offs[0])]) - 5_000_000_000
        hi = max(iv.end for _who, iv, _t in readings[(p, offs[-1])]) + 1_000_000_000
        timeline: list[tuple[int, str]] = []
        for iv in intervals:
            if iv.partition == p and iv.end >= lo and iv.start <= hi:
                read = sorted(o for (q, o), rs in readings.items() if q == p for who, r, _t in rs
                              if who == iv.member and r == iv)
                span = f"read {read[0]}..{read[-1]} ({len(read)})" if read else "read nothing"
                timeline.append((iv.start, f"{iv.member} owns p{p} until {ms(iv.end)} ({iv.end_reason}), {span}"))
        for ct, co, who in commits.get(p, ()):
            if lo <= ct <= hi:
                timeline.append((ct, f"{who} committed {co}"))
        for m in members:
            for e in m.snapshot():
                if lo <= e.get("t", lo - 1) <= hi and (
                        (e["event"] == "commit_failed" and str(p) in e.get("offsets", {}))
                        or (e["event"] in ("assigned", "revoked", "lost") and p in e.get("partitions", ()))):
                    detail = {k: v for k, v in e.items() if k not in ("t", "event")}
                    timeline.append((e["t"], f"{m.name} {e['event']} {detail}"))
            if m.end_t is not None and lo <= m.end_t <= hi:
                timeline.append((m.end_t, f"{m.name} {'killed' if m.killed else 'ended'}"))
        lines += [f"    {ms(t)} {what}" for t, what in sorted(timeline)]
    return "\n".join(lines)


def last_processed(members: Sequence[Member]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in members:
        for e in m.records():
            out[e["partition"]] = max(out.get(e["partition"], -1), e["offset"])
    return out


# =========================================================================================
# Observing the group through confluent-kafka's AdminClient
# =========================================================================================


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def describe_group(admin: Any, group: str) -> Any:
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


def assignment_of(member_desc: Any) -> set[int]:
    return {tp.partition for tp in member_desc.assignment.topic_partitions}


def wait_stable(admin: Any, group: str, members: Sequence[Member], partitions: int = TOPIC_PARTITIONS,
                timeout: float = 30.0) -> Any:
    """Until the broker says Stable with exactly these members (by client id), each owning on the
    client side what the broker says it was assigned, and the assignments partitioning the topic."""
    from confluent_kafka import ConsumerGroupState

    deadline = time.monotonic() + timeout
    want = {m.client_id for m in members}
    last: Any = None
    while True:
        for m in members:
            if m.errors():
                raise AssertionError(f"{m.name} reported errors: {m.errors()[:3]}; {m.diag()}")
        try:
            desc = describe_group(admin, group)
            last = desc
            by_client = {md.client_id: md for md in desc.members}
            assigned = [assignment_of(md) for md in desc.members]
            union = set().union(*assigned) if assigned else set()
            if (desc.state == ConsumerGroupState.STABLE and set(by_client) == want
                    and len(by_client) == len(desc.members)
                    and union == set(range(partitions)) and sum(map(len, assigned)) == partitions
                    and all(m.owned() == assignment_of(by_client[m.client_id]) for m in members)):
                return desc
        except Exception as e:  # describe may fail transiently (e.g. while the broker loads)
            last = e
        if time.monotonic() > deadline:
            seen = last if isinstance(last, Exception) else (
                f"state={last.state} members=" + str({md.client_id: sorted(assignment_of(md)) for md in last.members}))
            owned = {m.name: sorted(m.owned()) for m in members}
            raise AssertionError(f"group {group} not stable with {sorted(want)} within {timeout}s: broker says {seen}; "
                                 f"members own {owned}\n" + "\n".join(m.diag() for m in members))
        time.sleep(0.1)


def wait_gone(admin: Any, group: str, client_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        desc = describe_group(admin, group)
        if client_id not in {md.client_id for md in desc.members}:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{client_id} still a member of {group} {timeout:.1f}s after it left")
        time.sleep(0.05)


def progressed(ms: Sequence[Member], since: int, timeout: float = 20.0) -> None:
    """Each member processes a record after ``since`` (so processing flows through it)."""
    for m in ms:
        m.wait_for(lambda e: e["event"] == "record" and e["t"] > since, timeout, "a record after the change")


def wait_empty(admin: Any, group: str, timeout: float = 20.0) -> Any:
    from confluent_kafka import ConsumerGroupState

    deadline = time.monotonic() + timeout
    while True:
        desc = describe_group(admin, group)
        if desc.state == ConsumerGroupState.EMPTY and not desc.members:
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"group {group} not Empty within {timeout}s: {desc.state}, {len(desc.members)} members")
        time.sleep(0.1)


def committed_offsets(admin: Any, group: str, topic: str, partitions: int = TOPIC_PARTITIONS,
                      timeout: float = 20.0) -> dict[int, int]:
    """OffsetFetch through AdminClient.list_consumer_group_offsets; retried while the coordinator loads."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    deadline = time.monotonic() + timeout
    while True:
        try:
            req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
            res = admin.list_consumer_group_offsets([req], request_timeout=10)[group].result(timeout=15)
            errs = [tp.error for tp in res.topic_partitions if tp.error]
            assert not errs, f"OffsetFetch errors: {errs}"
            return {tp.partition: tp.offset for tp in res.topic_partitions}
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def listed_groups(admin: Any, states: set[str] | None = None) -> dict[str, Any]:
    from confluent_kafka import ConsumerGroupState

    kwargs: dict[str, Any] = {}
    if states is not None:
        kwargs["states"] = {ConsumerGroupState[s] for s in states}
    res = admin.list_consumer_groups(request_timeout=10, **kwargs).result(timeout=15)
    assert not res.errors, f"ListGroups errors: {res.errors}"
    return {g.group_id: g for g in res.valid}


def wait_until(cond: Callable[[], bool], timeout: float, what: Callable[[], str] | str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")
        time.sleep(0.05)


# =========================================================================================
# A producer writing continuously (bounded) while the group changes
# =========================================================================================


class PacedProducer:
    """Produces k<i>/v<i> at about ``rate`` per second until stopped (at most ``cap`` records)."""

    def __init__(self, bootstrap: str, topic: str, start: int = 0, rate: float = 200.0, cap: int = 20_000) -> None:
        self.bootstrap, self.topic, self.start_index = bootstrap, topic, start
        self.rate, self.cap = rate, cap
        self.acks: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="paced-producer")

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 30_000})

        def on_delivery(err: Any, msg: Any) -> None:
            key = msg.key().decode()
            if err is not None:
                self.errors.append(f"{key}: {err}")
            else:
                self.acks[key] = (msg.partition(), msg.offset())

        t0 = time.monotonic()
        i = self.start_index
        while not self._stop.is_set() and self.sent < self.cap:
            producer.produce(self.topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
            i += 1
            self.sent += 1
            producer.poll(0)
            delay = t0 + self.sent / self.rate - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
        left = producer.flush(30)
        if left:
            self.errors.append(f"{left} records undelivered after flush")

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> dict[str, tuple[int, int]]:
        self._stop.set()
        self._thread.join(timeout=40)
        assert not self._thread.is_alive(), "producer did not finish"
        assert not self.errors, f"producer errors: {self.errors[:5]}"
        assert len(self.acks) == self.sent, f"{len(self.acks)} acks for {self.sent} records"
        return dict(self.acks)


def _client_and_broker_logs(members: Sequence[Member], broker: Any) -> str:
    """What the clients and the broker logged, for a failure's message: a client that
    moved its position by itself (librdkafka warns of an offset reset caused by an error),
    or the group's moves and warnings on the broker, say where to look."""
    parts = [f"{m.name} stderr (last lines):\n{''.join(m.stderr[-15:])}" for m in members if m.stderr]
    log_tail = getattr(broker, "log_tail", None)
    if log_tail is not None:
        parts.append(f"broker log (last lines):\n{log_tail(30)}")
    return "\n".join(parts)


def finish_and_verify(admin: Any, broker: Any, group: str, topic: str, members: Sequence[Member],
                      acks: dict[str, tuple[int, int]], after_close: Callable[[], None] | None = None,
                      empty_timeout: float = 20.0) -> tuple[dict[int, int], ProcessingReport]:
    """Wait until every acked record is processed, close the live members, then check the
    ownership timeline, the processing and that the committed offsets are what was processed
    (last processed offset + 1 == log end offset, per partition). ``after_close`` runs once the
    members are closed (e.g. to remove static members, which do not leave by themselves)."""
    from conformance_helpers import ck_watermarks

    wait_until(lambda: {(e["partition"], e["offset"]) for m in members for e in m.records()}
               >= set(acks.values()), 20, lambda: "every acked record to be processed")
    for m in members:
        if m.end_t is None:
            m.close()
    if after_close is not None:
        after_close()
    wait_empty(admin, group, timeout=empty_timeout)
    for m in members:
        assert not m.errors(), f"{m.name}: {m.errors()[:3]}"
    check_exclusive_ownership(ownership_intervals(members))
    check_generations(members)
    try:
        report = check_processing(members, acks)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_client_and_broker_logs(members, broker)}") from None
    committed = committed_offsets(admin, group, topic)
    hw = {p: hi for p, (_lo, hi) in ck_watermarks(broker.bootstrap, topic).items()}
    done = last_processed(members)
    assert committed == {p: done.get(p, -1) + 1 for p in hw} == hw, (
        f"committed {committed}, last processed + 1 {({p: done.get(p, -1) + 1 for p in hw})}, log end {hw}"
    )
    return committed, report


# =========================================================================================
# The scenario
# =========================================================================================


def group_scenario(broker: Any, topic: str, group: str, launch: Callable[[str], Member], *,
                   protocol: str, expiry_timeout: float = 15.0) -> dict[str, Any]:
    """Three members join a 6-partition topic while a producer writes; one closes, one is killed
    and expires, a new one joins; then everyone closes, the broker is killed (-9) and restarted,
    and a new member resumes from the committed offsets. ``launch(name)`` starts a member."""
    from conformance_helpers import ck_create_topic, ck_produce, ck_watermarks

    ck_create_topic(broker.bootstrap, topic, partitions=TOPIC_PARTITIONS)
    admin = admin_client(broker.bootstrap)
    members: list[Member] = []
    phases: dict[str, float] = {}
    t_start = time.monotonic()

    def new(name: str) -> Member:
        m = launch(name)
        members.append(m)
        return m

    def balanced(desc: Any) -> None:
        sizes = sorted(len(assignment_of(md)) for md in desc.members)
        assert sizes[-1] - sizes[0] <= 1 and sizes[0] >= 1, f"unbalanced assignment: {sizes}"

    producer = PacedProducer(broker.bootstrap, topic).start()
    try:
        m1, m2, m3 = new("m1"), new("m2"), new("m3")
        desc = wait_stable(admin, group, [m1, m2, m3])
        balanced(desc)
        assert desc.partition_assignor == protocol, desc.partition_assignor
        assert not desc.is_simple_consumer_group
        assert all("127.0.0.1" in md.host for md in desc.members), [md.host for md in desc.members]
        assert len({md.member_id for md in desc.members}) == 3
        listing = listed_groups(admin)
        assert group in listing, f"{group} not in ListGroups: {sorted(listing)}"
        assert not listing[group].is_simple_consumer_group
        assert listing[group].state.name == "STABLE", listing[group]
        assert group in listed_groups(admin, states={"STABLE"}), "ListGroups state filter STABLE"
        assert group not in listed_groups(admin, states={"EMPTY"}), "ListGroups state filter EMPTY"
        progressed([m1, m2, m3], mono_ns())
        phases["three members"] = time.monotonic() - t_start

        m1.close()  # graceful: LeaveGroup
        t = mono_ns()
        # Gone at once (LeaveGroup), not after its session timeout.
        wait_gone(admin, group, m1.client_id, timeout=SESSION_MS / 1000 * 0.8)
        balanced(wait_stable(admin, group, [m2, m3]))
        progressed([m2, m3], t)
        phases["one left"] = time.monotonic() - t_start

        m2.kill()  # its session must expire on the broker
        t = mono_ns()
        wait_stable(admin, group, [m3], timeout=SESSION_MS / 1000 + expiry_timeout)
        # The broker did not drop it when its connection closed, only when its session expired
        # (the session timer restarted at its last heartbeat, at most ~1 s before the kill).
        first_move = min(e["t"] for e in m3.snapshot() if e["event"] in ("assigned", "revoked") and e["t"] > t)
        assert (first_move - t) / 1e9 >= (SESSION_MS - 1000) / 1000, (
            f"killed member removed {(first_move - t) / 1e9:.2f}s after the kill, before its session timeout"
        )
        progressed([m3], t)
        phases["one expired"] = time.monotonic() - t_start

        m4 = new("m4")
        t = mono_ns()
        balanced(wait_stable(admin, group, [m3, m4]))
        progressed([m3, m4], t)
        phases["one joined"] = time.monotonic() - t_start

        acks = producer.stop()
        committed, report = finish_and_verify(admin, broker, group, topic, members, acks)
        phases["all closed"] = time.monotonic() - t_start
        listing = listed_groups(admin)
        assert group in listing and str(listing[group].state.name) == "EMPTY", listing.get(group)

        # kill -9 the broker; the group comes back Empty with its offsets.
        broker.kill9()
        broker.start()
        admin = admin_client(broker.bootstrap)
        assert committed_offsets(admin, group, topic) == committed, "committed offsets changed across kill -9"
        wait_empty(admin, group)
        listing = listed_groups(admin)
        assert group in listing and listing[group].state.name == "EMPTY", listing.get(group)
        phases["broker restarted"] = time.monotonic() - t_start

        m5 = new("m5")
        wait_stable(admin, group, [m5])
        n0 = max(int(k[1:]) for k in acks) + 1
        more = ck_produce(broker.bootstrap, topic, range(n0, n0 + 60))
        wait_until(lambda: {(e["partition"], e["offset"]) for e in m5.records()} >= set(more.values()), 20,
                   lambda: f"m5 to process the 60 new records; {m5.diag()}")
        m5.close()
        wait_empty(admin, group)
        first = {}
        for e in m5.records():
            first.setdefault(e["partition"], e["offset"])
        assert {(e["partition"], e["offset"]) for e in m5.records()} == set(more.values()), (
            "after the restart the new member must read exactly the records produced after the last commit"
        )
        assert all(first[p] == committed[p] for p in first), f"resumed at {first}, committed {committed}"
        final = committed_offsets(admin, group, topic)
        hw = {p: hi for p, (_lo, hi) in ck_watermarks(broker.bootstrap, topic).items()}
        assert final == hw, f"committed {final} after the restart, log end {hw}"
        check_exclusive_ownership(ownership_intervals(members))
        check_processing(members, {**acks, **more})
        phases["resumed"] = time.monotonic() - t_start
        return {"report": report, "phases": phases, "records": len(acks)}
    finally:
        producer._stop.set()
        for m in members:
            m.reap()



def live_broker_crash_scenario(broker: Any, topic: str, group: str, launch: Callable[[str], Member]) -> dict[str, Any]:
    """Two members consume while a producer writes; the broker is killed (-9) under them and
    restarted on the same port. The members carry on (rejoining if need be): no record is lost,
    nothing committed is delivered again, ownership never overlaps, and the committed offsets
    are what was processed."""
    from conformance_helpers import ck_create_topic

    ck_create_topic(broker.bootstrap, topic, partitions=TOPIC_PARTITIONS)
    admin = admin_client(broker.bootstrap)
    members = [launch("c1"), launch("c2")]
    producer = PacedProducer(broker.bootstrap, topic, rate=150).start()
    try:
        wait_stable(admin, group, members)
        progressed(members, mono_ns())
        committed_before = committed_offsets(admin, group, topic)
        broker.kill9()
        t_down = mono_ns()
        broker.start()
        admin = admin_client(broker.bootstrap)
        after = committed_offsets(admin, group, topic)
        assert all(after[p] >= committed_before[p] for p in after), (
            f"committed offsets went back across kill -9: {committed_before} -> {after}"
        )
        wait_stable(admin, group, members, timeout=30)
        progressed(members, mono_ns())
        acks = producer.stop()
        _committed, report = finish_and_verify(admin, broker, group, topic, members, acks)
        # Moves caused by the crash: after it, before the first member closed (a close hands
        # its partitions to the others, which is not the crash's doing).
        closed_at = min((e["t"] for m in members for e in m.snapshot() if e.get("reason") == "close"),
                        default=mono_ns())
        moves = [e for m in members for e in m.snapshot()
                 if e["event"] in ("assigned", "revoked", "lost") and t_down < e["t"] < closed_at]
        return {"report": report, "rebalance_events_after_crash": len(moves), "records": len(acks)}
    finally:
        producer._stop.set()
        for m in members:
            m.reap()


# =========================================================================================
# Self-tests of the checker (synthetic timelines)
# =========================================================================================


def _fake(name: str, events: list[dict[str, Any]], end_t: int | None = None, killed: bool = False) -> Member:
    m = Member(name, None, events=events, end_t=end_t, killed=killed)
    return m


def _a(t: int, *ps: int, gen: int | None = None, owned: Sequence[int] | None = None) -> dict[str, Any]:
    return {"event": "assigned", "t": t, "partitions": list(ps), "generation": gen,
            "owned": list(owned if owned is not None else ps)}


def _r(t: int, *ps: int) -> dict[str, Any]:
    return {"event": "revoked", "t": t, "partitions": list(ps)}


def _rec(t: int, p: int, off: int) -> dict[str, Any]:
    return {"event": "record", "t": t, "partition": p, "offset": off, "key": f"k{p}-{off}"}


def _c(t: int, **offs: int) -> dict[str, Any]:
    return {"event": "committed", "t": t, "offsets": {k[1:]: v for k, v in offs.items()}}


def test_checker_accepts_a_clean_handoff() -> None:
    a = _fake("a", [_a(10, 0, 1), _rec(11, 0, 0), _rec(12, 0, 1), _c(13, p0=2), _r(20, 0, 1)], end_t=30)
    b = _fake("b", [_a(21, 0, 1), _rec(22, 0, 2), _c(23, p0=3)], end_t=40)
    check_exclusive_ownership(ownership_intervals([a, b]))
    acks = {f"k0-{o}": (0, o) for o in range(3)}
    rep = check_processing([a, b], acks)
    assert rep.duplicates == 0 and rep.distinct == 3


def test_checker_catches_double_ownership() -> None:
    a = _fake("a", [_a(10, 0, 1), _r(25, 0, 1)], end_t=30)
    b = _fake("b", [_a(21, 1)], end_t=40)
    with pytest.raises(AssertionError, match="partition 1: b owned it"):
        check_exclusive_ownership(ownership_intervals([a, b]))


def test_checker_catches_a_zombie_that_was_killed_late() -> None:
    a = _fake("a", [_a(10, 0)], end_t=50, killed=True)
    b = _fake("b", [_a(40, 0)], end_t=60)
    with pytest.raises(AssertionError, match="owned by two members"):
        check_exclusive_ownership(ownership_intervals([a, b]))


def test_checker_allows_only_zombie_overlaps_under_eager() -> None:
    a = _fake("a", [_a(10, 0), {"event": "lost", "t": 40, "partitions": [0]}], end_t=50)
    b = _fake("b", [_a(30, 0)], end_t=60)
    check_exclusive_ownership(ownership_intervals([a, b]), zombies=True)
    with pytest.raises(AssertionError, match="owned by two members"):
        check_exclusive_ownership(ownership_intervals([a, b]))
    revoked_late = _fake("a", [_a(10, 0), _r(40, 0)], end_t=50)
    with pytest.raises(AssertionError, match="owned by two members"):
        check_exclusive_ownership(ownership_intervals([revoked_late, b]), zombies=True)


def test_checker_catches_same_generation_overlap() -> None:
    a = _fake("a", [_a(10, 0, 1, gen=3)])
    b = _fake("b", [_a(11, 1, 2, gen=3)])
    with pytest.raises(AssertionError, match="generation 3: partition 1"):
        check_generations([a, b])


def test_checker_catches_redelivery_of_committed_records() -> None:
    a = _fake("a", [_a(10, 0), _rec(11, 0, 0), _rec(12, 0, 1), _c(13, p0=2), _r(20, 0)], end_t=30)
    b = _fake("b", [_a(21, 0), _rec(22, 0, 1), _rec(23, 0, 2)], end_t=40)
    acks = {f"k0-{o}": (0, o) for o in range(3)}
    with pytest.raises(AssertionError, match="committed records delivered again"):
        check_processing([a, b], acks)


def test_checker_allows_duplicates_of_uncommitted_records_only() -> None:
    # a is killed after processing 0..2 and committing 1: offsets 1 and 2 may be read again.
    a = _fake("a", [_a(10, 0), _rec(11, 0, 0), _c(12, p0=1), _rec(13, 0, 1), _rec(14, 0, 2)], end_t=15,
              killed=True)
    b = _fake("b", [_a(30, 0), _rec(31, 0, 1), _rec(32, 0, 2), _rec(33, 0, 3)], end_t=40)
    acks = {f"k0-{o}": (0, o) for o in range(4)}
    rep = check_processing([a, b], acks)
    assert (rep.duplicates, rep.duplicate_bound) == (2, 2)


def test_checker_bounds_duplicates_by_what_was_committed_at_the_handover() -> None:
    # a's session expired while it went on (it learns at t=40: lost); b got the partition at
    # t=30 and read from a's commit 1. a's later reads (2, 3) are re-read by b: allowed, and
    # not more: b re-reading 0 (committed before it started) is not.
    a = _fake("a", [_a(10, 0), _rec(11, 0, 0), _c(12, p0=1), _rec(13, 0, 1), _rec(35, 0, 2), _rec(36, 0, 3),
                    {"event": "lost", "t": 40, "partitions": [0]}], end_t=50)
    b = _fake("b", [_a(30, 0), _rec(31, 0, 1), _rec(37, 0, 2), _rec(38, 0, 3), _rec(39, 0, 4)], end_t=60)
    acks = {f"k0-{o}": (0, o) for o in range(5)}
    rep = check_processing([a, b], acks)
    assert (rep.duplicates, rep.duplicate_bound) == (3, 3)
    b_rereads_committed = _fake("b", [_a(30, 0), _rec(31, 0, 0), _rec(32, 0, 1), _rec(37, 0, 2), _rec(38, 0, 3),
                                      _rec(39, 0, 4)], end_t=60)
    with pytest.raises(AssertionError, match="committed records delivered again"):
        check_processing([a, b_rereads_committed], acks)


def test_checker_reads_the_latest_commit_not_the_highest() -> None:
    # A commit that went backwards (3 after 5) is what the next owner fetches: its re-reads
    # from 3 are bounded by it (check_commits_monotonic is what reports the regression).
    a = _fake("a", [_a(10, 0), *[_rec(11 + o, 0, o) for o in range(6)], _c(20, p0=6), _c(21, p0=3),
                    _rec(22, 0, 6)], end_t=25, killed=True)
    b = _fake("b", [_a(30, 0), *[_rec(31 + o, 0, o) for o in range(3, 8)]], end_t=40)
    acks = {f"k0-{o}": (0, o) for o in range(8)}
    rep = check_processing([a, b], acks)
    assert (rep.duplicates, rep.duplicate_bound) == (4, 4)


def test_checker_explains_duplicates_beyond_the_bound() -> None:
    # a committed 2 before it was killed, yet b re-reads 1 and 2: the failure names the
    # record, its readers and the partition's commits.
    a = _fake("a", [_a(10, 0), _rec(11, 0, 0), _rec(12, 0, 1), _rec(13, 0, 2), _c(14, p0=2)], end_t=15,
              killed=True)
    b = _fake("b", [_a(30, 0), _rec(31, 0, 1), _rec(32, 0, 2), _rec(33, 0, 3)], end_t=40)
    acks = {f"k0-{o}": (0, o) for o in range(4)}
    with pytest.raises(AssertionError, match=r"(?s)offset 1: read 2x, bound allows 0 .*a committed 2"):
        check_processing([a, b], acks)


def test_checker_catches_lost_records_and_gaps() -> None:
    a = _fake("a", [_a(10, 0), _rec(11, 0, 0), _rec(12, 0, 2)], end_t=20)
    acks = {f"k0-{o}": (0, o) for o in range(3)}
    with pytest.raises(AssertionError, match=r"not consecutive(.|\n)*never processed"):
        check_processing([a], acks)


def test_checker_catches_processing_without_ownership() -> None:
    a = _fake("a", [_a(10, 0), _r(20, 0), _rec(21, 0, 0)], end_t=30)
    with pytest.raises(AssertionError, match="without owning partition 0"):
        check_processing([a], {"k0-0": (0, 0)})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        sys.exit(member_main(json.loads(sys.argv[2])))
    sys.exit(f"usage: {sys.argv[0]} member CONFIG_JSON")
