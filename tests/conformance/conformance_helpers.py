"""Shared helpers for the conformance tests: the message plan, verification, the Java driver."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slipstream.cli.group_history import fetch_history

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Rec:
    """One consumed record, normalised across clients."""

    partition: int
    offset: int
    key: str | None
    value: str | None
    headers: tuple[tuple[str, str | None], ...] = ()
    timestamp: int | None = None


def to_str(b: bytes | str | None) -> str | None:
    if b is None or isinstance(b, str):
        return b
    return bytes(b).decode()


def norm_headers(headers: Iterable[tuple[str, bytes | str | None]] | None) -> tuple[tuple[str, str | None], ...]:
    return tuple((k, to_str(v)) for k, v in (headers or ()))


def key_index(key: str | None) -> int:
    assert key is not None and key.startswith("k"), f"unexpected key {key!r}"
    return int(key[1:])


def verify_records(
    records: Sequence[Rec],
    indexes: Iterable[int],
    acks: dict[str, tuple[int, int]] | None = None,
    base_ts: int | None = None,
    headers: bool = True,
) -> None:
    """Every planned message ``k<i>``/``v<i>`` exactly once, in order per partition, intact.

    ``acks`` maps key -> (partition, offset) as the producer was told; when
    given, each record must be where its ack said. ``base_ts``: record i was
    produced with CreateTime ``base_ts + i``.
    """
    expected = {f"k{i}" for i in indexes}
    counts = Counter(r.key for r in records)
    dupes = sorted(k for k, c in counts.items() if c > 1 and k is not None)
    assert not dupes, f"duplicated records: {dupes[:20]}"
    got = set(counts)
    missing = sorted(expected - got, key=lambda k: key_index(k))
    extra = sorted(got - expected, key=str)
    assert not missing and not extra, f"missing {missing[:20]} ({len(missing)}), unexpected {extra[:20]}"
    by_partition: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        i = key_index(r.key)
        assert r.value == f"v{i}", f"value of {r.key} is {r.value!r}"
        if headers:
            assert r.headers == (("i", str(i)),), f"headers of {r.key}: {r.headers!r}"
        if base_ts is not None and r.timestamp is not None:
            assert r.timestamp == base_ts + i, f"timestamp of {r.key}: {r.timestamp} != {base_ts + i}"
        if acks is not None:
            assert (r.partition, r.offset) == acks[r.key], (
                f"{r.key} read at {(r.partition, r.offset)}, acked at {acks[r.key]}"
            )
        by_partition[r.partition].append(r)
    for p, recs in by_partition.items():
        offsets = [r.offset for r in recs]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), (
            f"partition {p}: offsets not strictly increasing in delivery order: {offsets}"
        )
        order = [key_index(r.key) for r in recs]
        assert order == sorted(order), f"partition {p}: production order not kept: {order}"


def verify_acks(acks: dict[str, tuple[int, int]], count: int) -> None:
    """Acks of one producer: all there, offsets unique and increasing with i per partition."""
    assert len(acks) == count, f"{len(acks)} acks for {count} messages"
    per: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key, (p, off) in acks.items():
        assert off >= 0, f"{key} acked with offset {off}"
        per[p].append((key_index(key), off))
    for p, items in per.items():
        items.sort()
        offs = [o for _, o in items]
        assert offs == sorted(offs) and len(set(offs)) == len(offs), f"partition {p} ack offsets {offs}"


# ---- Java driver --------------------------------------------------------------------------


@dataclass
class JavaRun:
    """A running driver process whose JSON lines are read by a thread."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[dict | None] = field(default_factory=queue.Queue)
    events: list[dict] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def start_readers(self) -> None:
        def read_out() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                line = line.strip()
                if line.startswith("{"):
                    self.lines.put(json.loads(line))
            self.lines.put(None)

        def read_err() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)

        threading.Thread(target=read_out, daemon=True).start()
        threading.Thread(target=read_err, daemon=True).start()

    def wait_for(self, event: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {event!r} from the Java driver within {timeout}s; {self.diag()}")
            try:
                item = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if item is None:
                raise AssertionError(f"Java driver ended before {event!r}; {self.diag()}")
            self.events.append(item)
            if item.get("event") == "error":
                raise AssertionError(f"Java driver error: {item}; {self.diag()}")
            if item.get("event") == event:
                return item

    def finish(self, timeout: float = 60.0) -> list[dict]:
        """Read until the process exits; return all events. Fails on an error event."""
        done = self.wait_for("done", timeout)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        assert done is not None
        return self.events

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def diag(self) -> str:
        return f"events so far: {self.events[-5:]}; stderr tail:\n{''.join(self.stderr[-30:])}"


@dataclass
class JavaDriver:
    java: str
    classpath: str

    def start(self, bootstrap: str, *args: str) -> JavaRun:
        proc = subprocess.Popen(
            [self.java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", self.classpath,
             "SlipstreamDriver", bootstrap, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        run = JavaRun(proc)
        run.start_readers()
        return run

    def run(self, bootstrap: str, *args: str, timeout: float = 60.0) -> list[dict]:
        run = self.start(bootstrap, *args)
        try:
            return run.finish(timeout)
        finally:
            run.kill()


def java_records(events: Sequence[dict]) -> list[Rec]:
    return [
        Rec(e["partition"], e["offset"], e["key"], e["value"],
            tuple((k, v) for k, v in e["headers"]), e["timestamp"])
        for e in events if e.get("event") == "record"
    ]


def java_acks(events: Sequence[dict]) -> dict[str, tuple[int, int]]:
    return {e["key"]: (e["partition"], e["offset"]) for e in events if e.get("event") == "ack"}


# ---- confluent-kafka (librdkafka): also the "independent observer" of other tests ---------


def ck_create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                    config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10, request_timeout=15,
    )
    futures[topic].result(timeout=20)
    wait_for_partitions(bootstrap, topic, partitions)


def ck_partitions(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=timeout)
    t = md.topics[topic]
    assert t.error is None, f"metadata error for {topic}: {t.error}"
    return sorted(t.partitions)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            got = ck_partitions(bootstrap, topic, timeout=5)
            if got == list(range(partitions)):
                return
            last = got
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} never showed {partitions} partitions: {last}")


def ck_produce(bootstrap: str, topic: str, indexes: Iterable[int], codec: str = "none",
               base_ts: int | None = None, extra: dict[str, object] | None = None,
               timeout: float = 30.0, timestamps: dict[int, int] | None = None,
               ) -> dict[str, tuple[int, int]]:
    """Idempotent, acks=all; key k<i>, value v<i>, header i=<i>. Returns key -> (partition, offset).

    Record i gets CreateTime ``timestamps[i]``, else ``base_ts + i`` when base_ts is given.
    """
    from confluent_kafka import Producer

    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 5,
        "message.timeout.ms": int(timeout * 1000),
    }
    conf.update(extra or {})
    producer = Producer(conf)
    acks: dict[str, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        key = to_str(msg.key())  # type: ignore[attr-defined]
        assert key is not None
        if err is not None:
            errors.append(f"{key}: {err}")
        else:
            acks[key] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    n = 0
    for i in indexes:
        kwargs: dict[str, object] = {"headers": [("i", str(i).encode())]}
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        elif base_ts is not None:
            kwargs["timestamp"] = base_ts + i
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                         on_delivery=on_delivery, **kwargs)
        n += 1
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"{left} messages still undelivered after {timeout}s; errors: {errors[:5]}"
    assert not errors, f"delivery errors: {errors[:10]}"
    assert len(acks) == n
    return acks


def ck_consume(bootstrap: str, topic: str, count: int,
               start: dict[int, int] | int | None = None,
               timeout: float = 20.0, drain: float = 0.5) -> list[Rec]:
    """Assign every partition (no group membership) and read ``count`` records.

    ``start``: an offset per partition, one offset for all, or None for the
    beginning. Keeps polling ``drain`` seconds after ``count`` to catch extras.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    parts = ck_partitions(bootstrap, topic)
    if start is None:
        start = OFFSET_BEGINNING
    offsets = start if isinstance(start, dict) else dict.fromkeys(parts, start)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"conformance-unused-{topic}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    })
    records: list[Rec] = []
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, offsets[p]) for p in parts if p in offsets])
        deadline = time.monotonic() + timeout
        drain_until: float | None = None
        while True:
            now = time.monotonic()
            if drain_until is None and len(records) >= count:
                drain_until = now + drain
            if now > (drain_until if drain_until is not None else deadline):
                break
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(str(msg.error()))
                    assert not msg.error().fatal(), f"fatal consumer error: {msg.error()}"
                continue
            records.append(Rec(msg.partition(), msg.offset(), to_str(msg.key()), to_str(msg.value()),
                               norm_headers(msg.headers()), msg.timestamp()[1]))
    finally:
        consumer.close()
    assert len(records) >= count, (
        f"read {len(records)} of {count} records from {topic} in {timeout}s; consumer errors: {errors[:5]}"
    )
    return records


def ck_watermarks(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"conformance-unused-{topic}"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in ck_partitions(bootstrap, topic)}
    finally:
        c.close()


# ---- the rebalance history, read from the broker's admin listener ---------------------------


def wait_ready(base: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the broker never became ready"
        time.sleep(0.1)


def wait_history(
    base: str, group: str, done: Callable[[list[dict[str, Any]]], bool], what: str, timeout: float = 40.0
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            events, _last = fetch_history(base, group)
        except Exception:
            events = []
        if done(events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; history: {[(e['kind'], e.get('member_id')) for e in events]}")


def stable_with(members: set[str]) -> Callable[[list[dict[str, Any]]], bool]:
    """The last generation started with exactly these member ids, and completed."""

    def check(events: list[dict[str, Any]]) -> bool:
        started = [e for e in events if e["kind"] == "generation-started"]
        if not started or set(started[-1]["member_ids"]) != members:
            return False
        gen = started[-1]["generation"]
        return any(e["kind"] == "generation-completed" and e["generation"] == gen for e in events)

    return check


def member_id_of(events: list[dict[str, Any]], client_id: str) -> str:
    ids = [e["member_id"] for e in events if e["kind"] == "member-joined" and e["client_id"] == client_id]
    assert ids, f"{client_id} never joined"
    return ids[-1]


def causes(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(the event that started each rebalance, the cause the coordinator gave)."""
    out = []
    for i, e in enumerate(events):
        if e["kind"] == "rebalance-started":
            trigger = events[i - 1]
            out.append((trigger["kind"], e["cause"]))
    return out
