"""The clients of the cluster's failover tests (test_cluster.py): an idempotent acks=all
producer and a two-member consumer group, each member bootstrapped through a different
broker, running until the test stops them, in one of three clients:

- ``confluent``: confluent-kafka (librdkafka) producer and consumers, in threads;
- ``java``: the Java client in driver processes (``produce-until-stopped`` and
  ``group-consume``, see java/SlipstreamDriver.java), classic or consumer protocol;
- ``slipstream``: Slipstream's ``Producer`` and poll ``Consumer``, in threads, classic or
  consumer protocol;
- ``slipstream-asyncio``: Slipstream's ``AIOProducer`` and ``ConsumerGroup`` (the handler
  API: messages marked, the marks committed every 200 ms), each on an event loop of its
  own thread, classic or consumer protocol.

Record i is sent with key and value ``str(i)``. Whatever the client, the run keeps one
account of what happened (``GroupRun``): what was acknowledged where, what the group
consumed and when, and its successful commits, on ``time.monotonic()``'s clock (the Java
processes stamp their lines with ``System.nanoTime()``, the same clock on Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from test_groups_harness import Member, start_java_member

# Imported here, not in the threads: two threads importing the client package at once
# can each see it half-initialized.
from slipstream.client.consumer import Consumer
from slipstream.client.consumer_group import ConsumerGroup
from slipstream.client.consumer_group_session import ConsumerGroupClaim, ConsumerGroupSession
from slipstream.client.producer import AIOProducer, Producer, RecordMetadata
from slipstream.protocol.errors import KafkaError

GROUP_SESSION_MS = 6000  # the classic members' session; the cluster sets the consumer protocol's to it
HEARTBEAT_MS = 500
GROUP_PROTOCOLS = ("classic", "consumer")


class GroupRun:
    """What the producer and the group did, and the waits the tests make on it."""

    def __init__(self, bootstrap: str, member_bootstraps: Sequence[str], topic: str, group_protocol: str) -> None:
        assert group_protocol in GROUP_PROTOCOLS, group_protocol
        self.bootstrap, self.member_bootstraps = bootstrap, list(member_bootstraps)
        self.topic, self.group, self.group_protocol = topic, f"{topic}-group", group_protocol
        # value -> (partition, offset); the offset is None for an implicit ack: librdkafka
        # reports a batch whose answer was an error as delivered once a later batch of
        # the same idempotent producer is acknowledged (the broker had kept it).
        self.acked: dict[int, tuple[int, int | None]] = {}
        self.consumed: list[tuple[float, int]] = []  # (monotonic time, value)
        self.commits: list[float] = []  # times of successful commits
        # In the order seen: ("consumed" | "committed", partition, offset); a commit's
        # offset is the next one to consume.
        self.events: list[tuple[str, int, int]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()

    # ---- what the clients report ---------------------------------------------------------

    def note_ack(self, value: int, partition: int, offset: int | None) -> None:
        with self._lock:
            self.acked[value] = (partition, offset)

    def note_failure(self, what: str) -> None:
        with self._lock:
            self.errors.append(what)

    def note_consumed(self, at: float, records: Sequence[tuple[int, int, int]]) -> None:
        """``records``: (partition, offset, value) in the order the member got them."""
        with self._lock:
            self.consumed.extend((at, v) for _, _, v in records)
            self.events.extend(("consumed", p, o) for p, o, _ in records)

    def note_committed(self, at: float, offsets: Sequence[tuple[int, int]]) -> None:
        with self._lock:
            self.commits.append(at)
            self.events.extend(("committed", p, o) for p, o in offsets)

    # ---- running -------------------------------------------------------------------------

    def __enter__(self) -> GroupRun:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the group (and the producer, if still running)."""
        raise NotImplementedError

    def stop_producing(self) -> None:
        """Stop sending, and wait until every record sent is acknowledged or failed."""
        raise NotImplementedError

    # ---- waits -----------------------------------------------------------------------------

    def last_acked_offsets(self, partitions: int) -> dict[int, int]:
        with self._lock:
            return {
                p: max((o for q, o in self.acked.values() if q == p and o is not None), default=-1)
                for p in range(partitions)
            }

    def wait_all_consumed(self, timeout: float) -> set[int]:
        """Until the group consumed every acknowledged record; the ones it never got."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                missing = set(self.acked) - {v for _, v in self.consumed}
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.2)

    def missing_report(self, missing: set[int]) -> str:
        """Where the records the group never consumed are, against what it did consume and
        commit per partition (for a failure message)."""
        with self._lock:
            where: dict[int, list[int | None]] = {}
            for v in missing:
                partition, offset = self.acked[v]
                where.setdefault(partition, []).append(offset)
            read: dict[int, int] = {}
            committed: dict[int, int] = {}
            for kind, partition, offset in self.events:
                seen = read if kind == "consumed" else committed
                seen[partition] = max(seen.get(partition, -1), offset)
        lines = []
        for partition, offsets in sorted(where.items()):
            known = sorted(o for o in offsets if o is not None)
            span = f"offsets {known[0]}..{known[-1]}" if known else "offsets unknown"
            lines.append(
                f"partition {partition}: {len(offsets)} missing ({span}); highest consumed "
                f"{read.get(partition)}, highest committed {committed.get(partition)}"
            )
        return "; ".join(lines) + self.diagnosis()

    def wait_progress(self, after: float, timeout: float) -> float:
        """The first time after ``after`` at which a record was consumed AND a commit
        succeeded (the group works again); AssertionError past ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                consumed = next((t for t, _ in self.consumed if t > after), None)
                committed = next((t for t in self.commits if t > after), None)
            if consumed is not None and committed is not None:
                return max(consumed, committed)
            time.sleep(0.1)
        raise AssertionError(f"the group did not consume and commit within {timeout}s{self.diagnosis()}")

    def diagnosis(self) -> str:
        """What a failure message adds about the clients (the Java processes' output)."""
        return ""


class _ThreadedRun(GroupRun):
    """A producer thread and a thread per member, in this process."""

    def start(self) -> None:
        self._stop = threading.Event()
        self._producing_done = threading.Event()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._members = [threading.Thread(target=self._consume, args=(b,), daemon=True) for b in self.member_bootstraps]
        for t in (self._producer, *self._members):
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in (self._producer, *self._members):
            t.join(timeout=60)

    def stop_producing(self) -> None:
        self._producing_done.set()
        self._producer.join(timeout=130)

    def _producing(self) -> bool:
        return not self._stop.is_set() and not self._producing_done.is_set()

    def _produce(self) -> None:
        raise NotImplementedError

    def _consume(self, bootstrap: str) -> None:
        raise NotImplementedError


class ConfluentGroupRun(_ThreadedRun):
    def __init__(self, bootstrap: str, member_bootstraps: Sequence[str], topic: str, group_protocol: str) -> None:
        assert group_protocol == "classic", "the confluent run is the classic protocol's"
        super().__init__(bootstrap, member_bootstraps, topic, group_protocol)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120_000,
        })  # fmt: skip

        def delivered(err: object, msg: Any) -> None:
            value = int(msg.value())
            if err is None:
                self.note_ack(value, msg.partition(), msg.offset())
            else:
                self.note_failure(f"delivery of {value}: {err}")

        i = 0
        while self._producing():
            producer.produce(self.topic, str(i).encode(), key=str(i).encode(), on_delivery=delivered)
            i += 1
            producer.poll(0.01)
        producer.flush(120)

    def _consume(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": GROUP_SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
        })  # fmt: skip
        consumer.subscribe([self.topic])
        while not self._stop.is_set():
            msgs = consumer.consume(100, 0.5)
            records = [m for m in msgs if m.error() is None]
            self.note_consumed(time.monotonic(), [(m.partition(), m.offset(), int(m.value())) for m in records])
            if records:
                try:
                    stored = consumer.commit(asynchronous=False)
                except KafkaException:
                    continue  # the coordinator moved: the next commit goes to the new one
                self.note_committed(time.monotonic(), [(tp.partition, tp.offset) for tp in stored or ()])
        consumer.close()


class SlipstreamGroupRun(_ThreadedRun):
    """Slipstream's ``Producer`` (idempotent, acks=all) and poll ``Consumer`` members."""

    def _produce(self) -> None:
        producer = Producer(
            self.bootstrap, enable_idempotence=True, acks="all", linger_ms=5, delivery_timeout_ms=120_000
        )

        def on_delivery(value: int) -> Any:
            def delivered(err: BaseException | None, meta: Any) -> None:
                if err is None:
                    self.note_ack(value, meta.partition, meta.offset)
                else:
                    self.note_failure(f"delivery of {value}: {err!r}")

            return delivered

        i = 0
        try:
            while self._producing():
                producer.produce(self.topic, str(i).encode(), key=str(i).encode(), on_delivery=on_delivery(i))
                i += 1
                producer.poll(0.01)
            producer.flush(120)
        finally:
            producer.close(10)

    def _consume(self, bootstrap: str) -> None:
        consumer = Consumer(bootstrap, group_id=self.group, **_consumer_options(self.group_protocol))
        try:
            consumer.subscribe([self.topic])
            while not self._stop.is_set():
                msgs = consumer.poll(0.5)
                self.note_consumed(time.monotonic(), [(m.partition, m.offset, int(m.value)) for m in msgs])
                if not msgs:
                    continue
                try:
                    stored = consumer.commit_sync()
                except (KafkaError, TimeoutError):
                    continue  # the coordinator moved: the next commit goes to the new one
                self.note_committed(time.monotonic(), [(partition, o) for (_, partition), o in stored.items()])
        finally:
            consumer.close()


def _consumer_options(group_protocol: str) -> dict[str, Any]:
    """Slipstream's consumer settings of a member: the classic session is the client's."""
    options: dict[str, Any] = {
        "group_protocol": group_protocol, "auto_offset_reset": "earliest", "enable_auto_commit": False,
        "fetch_max_wait_ms": 100,
    }  # fmt: skip
    if group_protocol == "classic":
        options.update(session_timeout_ms=GROUP_SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    return options


class SlipstreamAsyncioGroupRun(_ThreadedRun):
    """Slipstream's ``AIOProducer`` and ``ConsumerGroup`` members, each on its own loop."""

    COMMIT_INTERVAL_S = 0.2

    def _produce(self) -> None:
        asyncio.run(self._produce_on_loop())

    async def _produce_on_loop(self) -> None:
        producer = AIOProducer(
            self.bootstrap, enable_idempotence=True, acks="all", linger_ms=5, delivery_timeout_ms=120_000
        )
        await producer.start()
        try:
            i = 0
            while self._producing():
                ack = await producer.send(self.topic, str(i).encode(), key=str(i).encode())
                ack.add_done_callback(functools.partial(self._delivered, i))
                i += 1
                await asyncio.sleep(0.01)
            await producer.flush(120)
        finally:
            await producer.close(10)

    def _delivered(self, value: int, ack: asyncio.Future[RecordMetadata]) -> None:
        if ack.cancelled():
            self.note_failure(f"delivery of {value}: cancelled")
        elif (error := ack.exception()) is not None:
            self.note_failure(f"delivery of {value}: {error!r}")
        else:
            meta = ack.result()
            self.note_ack(value, meta.partition, meta.offset)

    def _consume(self, bootstrap: str) -> None:
        asyncio.run(self._consume_on_loop(bootstrap))

    async def _consume_on_loop(self, bootstrap: str) -> None:
        group = ConsumerGroup(bootstrap, self.group, **_consumer_options(self.group_protocol))

        async def close_when_stopped() -> None:
            while not self._stop.is_set():
                await asyncio.sleep(0.1)
            await group.close()

        closer = asyncio.create_task(close_when_stopped())
        handler = _MarkingHandler(self)
        try:
            while not group.closed:
                try:
                    await group.consume([self.topic], handler)
                except (KafkaError, TimeoutError, ConnectionError) as e:
                    # Not a failure of the run by itself: the group must consume again in time.
                    print(f"{bootstrap}: a session ended with {e!r}")
                    await asyncio.sleep(0.2)
        finally:
            closer.cancel()
            await group.close()


class _MarkingHandler:
    """Marks every message; a task of the session commits the marks every 200 ms."""

    def __init__(self, run: GroupRun) -> None:
        self.run = run
        self._committer: asyncio.Task[None] | None = None

    async def setup(self, session: ConsumerGroupSession) -> None:
        self._committer = asyncio.create_task(self._commit_periodically(session))

    async def cleanup(self, session: ConsumerGroupSession) -> None:
        if self._committer is not None:
            self._committer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._committer

    async def consume_claim(self, session: ConsumerGroupSession, claim: ConsumerGroupClaim) -> None:
        async for msg in claim.messages():
            assert msg.value is not None
            self.run.note_consumed(time.monotonic(), [(msg.partition, msg.offset, int(msg.value))])
            session.mark_message(msg)

    async def _commit_periodically(self, session: ConsumerGroupSession) -> None:
        while not session.ended:
            await asyncio.sleep(SlipstreamAsyncioGroupRun.COMMIT_INTERVAL_S)
            # Read with no await before the commit takes the same marks: exactly what it sends.
            offsets = [(partition, om.offset) for (_, partition), om in session.pending_commits().items()]
            if not offsets:
                continue
            try:
                await session.commit()
            except (KafkaError, TimeoutError, ConnectionError):
                continue  # the coordinator moved: the next commit goes to the new one
            self.run.note_committed(time.monotonic(), offsets)


class JavaGroupRun(GroupRun):
    """The Java client: one ``produce-until-stopped`` process and a ``group-consume``
    process per member, whose lines a thread per process turns into the run's account."""

    def __init__(
        self, bootstrap: str, member_bootstraps: Sequence[str], topic: str, group_protocol: str, java_driver: Any
    ) -> None:
        super().__init__(bootstrap, member_bootstraps, topic, group_protocol)
        self.java_driver = java_driver
        self.members: list[Member] = []

    def start(self) -> None:
        self._producer = self.java_driver.start(self.bootstrap, "produce-until-stopped", self.topic)
        self._producer_pump = threading.Thread(target=self._follow_producer, daemon=True)
        self._producer_pump.start()
        for n, bootstrap in enumerate(self.member_bootstraps):
            member = start_java_member(
                self.java_driver, f"member-{n}", bootstrap, self.topic, self.group,
                session_ms=GROUP_SESSION_MS, heartbeat_ms=HEARTBEAT_MS, group_protocol=self.group_protocol,
            )  # fmt: skip
            self.members.append(member)
            threading.Thread(target=self._follow_member, args=(member,), daemon=True).start()

    def stop_producing(self) -> None:
        if self._producer.proc.poll() is None:
            self._producer.proc.send_signal(signal.SIGTERM)
        self._producer_pump.join(timeout=130)
        self._producer.kill()

    def stop(self) -> None:
        self.stop_producing()
        for member in self.members:
            if member.proc is not None and member.proc.poll() is None:
                try:
                    member.close()
                except AssertionError:
                    member.reap()

    def _follow_producer(self) -> None:
        while (line := self._producer.lines.get()) is not None:
            self._producer.events.append(line)
            if line["event"] == "ack":
                self.note_ack(int(line["key"]), line["partition"], line["offset"])
            elif line["event"] in ("nack", "error"):
                self.note_failure(f"Java producer: {line}")

    def _follow_member(self, member: Member) -> None:
        seen = 0
        while True:
            with member.cond:
                while len(member.events) == seen:
                    member.cond.wait()
                new = member.events[seen:]
            seen += len(new)
            for e in new:
                kind = e["event"]
                if kind == "record":
                    self.note_consumed(e["t"] / 1e9, [(e["partition"], e["offset"], int(e["key"]))])
                elif kind == "committed":
                    self.note_committed(e["t"] / 1e9, [(int(p), o) for p, o in e["offsets"].items()])
                elif kind == "error":
                    self.note_failure(f"{member.name}: {e}")
                elif kind == "eof":
                    return

    def diagnosis(self) -> str:
        return "".join(f"\n{m.diag()}" for m in self.members) + f"\nproducer: {self._producer.diag()}"


def group_run(
    client: str, bootstrap: str, member_bootstraps: Sequence[str], topic: str,
    group_protocol: str = "classic", java_driver: Any = None,
) -> GroupRun:  # fmt: skip
    """A run of ``client`` ("confluent", "java", "slipstream" or "slipstream-asyncio");
    start it with ``with``."""
    if client == "java":
        return JavaGroupRun(bootstrap, member_bootstraps, topic, group_protocol, java_driver)
    runs: dict[str, type[_ThreadedRun]] = {
        "confluent": ConfluentGroupRun, "slipstream": SlipstreamGroupRun, "slipstream-asyncio": SlipstreamAsyncioGroupRun,
    }  # fmt: skip
    return runs[client](bootstrap, member_bootstraps, topic, group_protocol)
