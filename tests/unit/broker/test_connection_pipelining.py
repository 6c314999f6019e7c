"""Per-connection ordering in broker/server.py: which requests may overlap, and response order.

Most tests drive a KafkaConnection with a fake transport and a scripted dispatcher,
so each request finishes exactly when the test says; the last ones send pipelined
OffsetCommits over a real socket to an in-process broker.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, TypeVar

import pytest
from test_group_commit_batching import COMMIT_V9, codes, commit, offsets_log_records, started

from slipstream.broker.dispatch import Buffers, CloseConnection
from slipstream.broker.notifier import AppendNotifier
from slipstream.broker.server import PIPELINED_APIS, KafkaConnection
from slipstream.protocol import api
from slipstream.protocol.apis import offset_commit as oc

COMMIT, HEARTBEAT, JOIN, FETCH = 8, 12, 11, 1


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[list[bytes]] = []
        self.closed = False
        self.reading_paused = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def writelines(self, parts: list[bytes]) -> None:
        self.writes.append([bytes(p) for p in parts])

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False

    def written(self) -> list[bytes]:
        return [p for w in self.writes for p in w]


class ScriptedDispatcher:
    """Each request is (api key, name); it finishes when the test resolves ``gates[name]``."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, asyncio.Future[bytes]] = {}
        self.cancelled: list[str] = []

    def gate(self, name: str) -> asyncio.Future[bytes]:
        if name not in self.gates:
            self.gates[name] = asyncio.get_running_loop().create_future()
        return self.gates[name]

    async def dispatch(self, frame: bytearray, client_host: str) -> Buffers | None:
        name = bytes(frame[2:]).decode()
        self.started.append(name)
        try:
            answer = await self.gate(name)
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        if answer == b"raise":
            raise CloseConnection(f"{name} failed")
        return [answer]


def frame(api_key: int, name: str) -> bytes:
    body = struct.pack(">h", api_key) + name.encode()
    return struct.pack(">i", len(body)) + body


D = TypeVar("D", bound=ScriptedDispatcher)


def connect_with(dispatcher: D) -> tuple[KafkaConnection, D, FakeTransport]:
    conn = KafkaConnection(dispatcher, 1 << 20, set())  # type: ignore[arg-type]
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, dispatcher, transport


def connect() -> tuple[KafkaConnection, ScriptedDispatcher, FakeTransport]:
    return connect_with(ScriptedDispatcher())


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_commit_and_heartbeat_are_the_pipelined_apis() -> None:
    assert {COMMIT, HEARTBEAT} <= PIPELINED_APIS
    assert JOIN not in PIPELINED_APIS and FETCH not in PIPELINED_APIS


async def test_pipelined_commits_start_together_and_are_answered_in_order() -> None:
    conn, d, t = connect()
    conn.data_received(b"".join(frame(COMMIT, f"c{i}") for i in range(4)) + frame(HEARTBEAT, "h"))
    await turns()
    assert d.started == ["c0", "c1", "c2", "c3", "h"]  # all in flight at once, in arrival order
    for name in ["h", "c3", "c1", "c2", "c0"]:  # finish in a scrambled order, in one turn
        d.gate(name).set_result(name.encode())
    await turns()
    assert t.written() == [b"c0", b"c1", b"c2", b"c3", b"h"]
    assert len(t.writes) == 1  # ready together: one write


async def test_a_slow_earlier_response_still_goes_out_first() -> None:
    conn, d, t = connect()
    conn.data_received(frame(COMMIT, "slow") + frame(COMMIT, "fast"))
    await turns()
    d.gate("fast").set_result(b"fast")
    await turns()
    assert t.written() == []  # held back behind the slow one
    d.gate("slow").set_result(b"slow")
    await turns()
    assert t.written() == [b"slow", b"fast"]


async def test_a_parked_join_holds_back_the_requests_after_it() -> None:
    conn, d, t = connect()
    conn.data_received(frame(COMMIT, "c1") + frame(JOIN, "join") + frame(COMMIT, "c2") + frame(HEARTBEAT, "h"))
    await turns()
    assert d.started == ["c1"]  # the join waits for the commit before it
    d.gate("c1").set_result(b"c1")
    await turns()
    assert d.started == ["c1", "join"]
    await turns(20)
    assert d.started == ["c1", "join"]  # parked join: nothing after it starts
    d.gate("join").set_result(b"join")
    await turns()
    assert d.started == ["c1", "join", "c2", "h"]
    d.gate("c2").set_result(b"c2")
    d.gate("h").set_result(b"h")
    await turns()
    assert t.written() == [b"c1", b"join", b"c2", b"h"]


async def test_a_non_pipelined_request_waits_for_all_pipelined_ones_before_it() -> None:
    conn, d, t = connect()
    conn.data_received(frame(COMMIT, "c1") + frame(COMMIT, "c2") + frame(FETCH, "fetch"))
    await turns()
    assert d.started == ["c1", "c2"]
    d.gate("c1").set_result(b"c1")
    await turns()
    assert d.started == ["c1", "c2"]
    d.gate("c2").set_result(b"c2")
    await turns()
    assert d.started == ["c1", "c2", "fetch"]
    d.gate("fetch").set_result(b"fetch")
    await turns()
    assert t.written() == [b"c1", b"c2", b"fetch"]


async def test_a_connection_closed_mid_pipeline_leaves_nothing_pending() -> None:
    conn, d, t = connect()
    conn.data_received(b"".join(frame(COMMIT, f"c{i}") for i in range(3)) + frame(JOIN, "join"))
    await turns()
    conn.connection_lost(None)
    await turns()
    assert sorted(d.cancelled) == ["c0", "c1", "c2"]
    assert d.started == ["c0", "c1", "c2"]  # the queued join never starts
    assert conn.worker is None
    assert not conn._in_flight and not conn._frames
    assert t.written() == []
    conn.data_received(frame(COMMIT, "late"))  # a straggler after close is ignored
    await turns()
    assert d.started == ["c0", "c1", "c2"]


async def test_a_request_that_raises_closes_only_that_connection() -> None:
    conn, d, t = connect()
    other, d2, t2 = connect()
    conn.data_received(frame(COMMIT, "ok") + frame(COMMIT, "bad") + frame(COMMIT, "after"))
    other.data_received(frame(COMMIT, "x"))
    await turns()
    d.gate("ok").set_result(b"ok")
    d.gate("bad").set_result(b"raise")
    await turns()
    assert t.closed
    assert t.written() == [b"ok"]  # the answer before the failure still goes out
    assert d.cancelled == ["after"]  # the one after it is dropped
    assert not t2.closed
    d2.gate("x").set_result(b"x")
    await turns()
    assert t2.written() == [b"x"]


async def test_eof_closes_only_after_everything_is_answered() -> None:
    conn, d, t = connect()
    conn.data_received(frame(COMMIT, "c1") + frame(COMMIT, "c2"))
    conn.eof_received()
    await turns()
    assert not t.closed
    d.gate("c1").set_result(b"c1")
    d.gate("c2").set_result(b"c2")
    await turns()
    assert t.written() == [b"c1", b"c2"]
    assert t.closed


async def test_no_new_request_starts_while_writing_is_paused() -> None:
    conn, d, _t = connect()
    conn.pause_writing()
    conn.data_received(frame(COMMIT, "c1"))
    await turns()
    assert d.started == []
    conn.resume_writing()
    await turns()
    assert d.started == ["c1"]


class ParkingDispatcher(ScriptedDispatcher):
    """A request named ``park...`` long-polls as a Fetch does (an AppendNotifier wait on
    partition t-0) and answers ``woken`` or ``ended``; the others are scripted."""

    def __init__(self) -> None:
        super().__init__()
        self.notifier = AppendNotifier()

    async def dispatch(self, frame: bytearray, client_host: str) -> Buffers | None:
        name = bytes(frame[2:]).decode()
        if not name.startswith("park"):
            return await super().dispatch(frame, client_host)
        self.started.append(name)
        woken = await self.notifier.wait([("t", 0)], 3600)
        return [f"{name}:{'woken' if woken else 'ended'}".encode()]


LIST_OFFSETS = 2


async def test_a_request_arriving_behind_a_parked_long_poll_ends_it() -> None:
    conn, d, t = connect_with(ParkingDispatcher())
    conn.data_received(frame(FETCH, "park1"))
    await turns(20)
    assert d.notifier.waiting() == 1 and t.written() == []  # parked, nothing behind it
    conn.data_received(frame(LIST_OFFSETS, "list"))
    await turns()
    # Answered with what it had, so the request behind it need not wait the park out.
    assert t.written() == [b"park1:ended"]
    assert d.started == ["park1", "list"]
    d.gate("list").set_result(b"list")
    await turns()
    assert t.written() == [b"park1:ended", b"list"]
    # The next long-poll parks again (the signal was for the one before)...
    conn.data_received(frame(FETCH, "park2"))
    await turns(20)
    assert d.notifier.waiting() == 1 and t.written() == [b"park1:ended", b"list"]
    d.notifier.notify(("t", 0))  # ... and an append still wakes it
    await turns()
    assert t.written() == [b"park1:ended", b"list", b"park2:woken"]


async def test_a_long_poll_with_a_request_already_behind_it_does_not_park() -> None:
    conn, d, t = connect_with(ParkingDispatcher())
    conn.data_received(frame(FETCH, "park") + frame(HEARTBEAT, "h"))
    await turns()
    assert t.written() == [b"park:ended"]
    assert d.started == ["park", "h"]
    assert d.notifier.waiting() == 0


# ------------------------------------------------------------------ real broker, real socket


def commit_frame(correlation_id: int, group: str, offset: int) -> bytes:
    request = commit(group, 0, offset)
    out = bytearray()
    api.encode_request_header(
        out, api.RequestHeader(oc.SPEC.key, 9, correlation_id, "test"), oc.SPEC.request_header_version(9)
    )
    out += oc.SPEC.encode_request(request, 9).getvalue()
    return struct.pack(">i", len(out)) + bytes(out)


async def read_responses(reader: asyncio.StreamReader, n: int) -> list[tuple[int, Any]]:
    out = []
    for _ in range(n):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        body = memoryview(await reader.readexactly(size))
        correlation_id, pos = api.decode_response_header(body, oc.SPEC.response_header_version(9))
        out.append((correlation_id, oc.SPEC.decode_response(body, pos, 9)))
    return out


@pytest.mark.parametrize("storage", ["memory", "disk"])
async def test_pipelined_commits_from_one_connection_are_applied_and_answered_in_order(
    storage: str, tmp_path: Any
) -> None:
    settings: dict[str, Any] = {"storage": storage}
    if storage == "disk":
        settings["data_dir"] = str(tmp_path)
    broker, adapter = await started(**settings)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        n = 100
        before = adapter.appends
        writer.write(b"".join(commit_frame(1000 + i, "g", i) for i in range(n)))
        responses = await read_responses(reader, n)
        assert [c for c, _ in responses] == [1000 + i for i in range(n)]
        assert all(codes(r) == [0] for _, r in responses)
        assert [o for _, _, o in offsets_log_records(adapter, "g")] == list(range(n))
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == n - 1
        assert adapter.appends - before < n  # overlapping commits shared appends
        writer.close()
        await writer.wait_closed()
    finally:
        await broker.stop()


async def test_a_commit_does_not_overtake_an_earlier_one_waiting_for_the_lock() -> None:
    broker, adapter = await started(storage="memory")
    try:
        async with adapter._lock:
            first = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 1)))
            await asyncio.sleep(0)  # now waiting for the lock
            # Runs right after the release, before the first commit wakes up: it must not
            # take the lock-free fast path past the first one.
            second = asyncio.ensure_future(adapter.offset_commit(COMMIT_V9, commit("g", 0, 2)))
        await asyncio.gather(first, second)
        assert [o for _, _, o in offsets_log_records(adapter, "g")] == [1, 2]
        assert adapter.coordinator.committed_offsets("g")[("t", 0)].offset == 2
    finally:
        await broker.stop()


async def test_pipelined_requests_in_flight_are_bounded_by_their_bytes() -> None:
    """A client pipelining big produces holds at most ~16 MiB in flight (plus what is
    queued): the next one starts only once earlier ones are answered."""
    dispatcher = ScriptedDispatcher()
    conn = KafkaConnection(dispatcher, 64 << 20, set())  # type: ignore[arg-type]
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    big = 6 << 20  # three of them pass the bound
    names = [f"p{i}" for i in range(4)]
    conn.data_received(b"".join(frame(0, name + " " * (big - len(name))) for name in names))
    await turns()
    assert [n.strip() for n in dispatcher.started] == ["p0", "p1", "p2"]
    dispatcher.gate(dispatcher.started[0]).set_result(b"p0")
    await turns()
    assert [n.strip() for n in dispatcher.started] == names
    assert transport.written() == [b"p0"]


async def test_a_fetch_parked_on_a_real_broker_answers_when_a_request_comes_behind_it() -> None:
    """librdkafka sends ListOffsets on the connection it fetches on; answered in order, one
    behind a long-poll would wait it out (up to fetch.wait.max.ms)."""
    from test_hostile_connections import api_versions_frame, forever_fetch, until

    from slipstream.broker.broker import Broker
    from slipstream.protocol.apis import fetch

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        reader, writer = await asyncio.open_connection(b.config.host, b.port)
        writer.write(forever_fetch("t", correlation_id=1))
        await writer.drain()
        await until(lambda: b.state.notifier.waiting() == 1, "the fetch parked")
        writer.write(api_versions_frame(2))
        await writer.drain()
        answers = []
        for _ in range(2):  # bounded: without the early answer the fetch would park for ~24 days
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))
            answers.append(memoryview(await reader.readexactly(size)))
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2]  # in order
        _correlation_id, pos = api.decode_response_header(answers[0], fetch.SPEC.response_header_version(4))
        response = fetch.SPEC.decode_response(answers[0], pos, 4)
        (partition,) = response.responses[0].partitions
        assert partition.error_code == 0 and not partition.records  # what it had: nothing yet
        assert b.state.notifier.waiting() == 0
        writer.close()
        await writer.wait_closed()
