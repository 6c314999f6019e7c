"""What one client's connections may cost the broker: parked requests, sockets, idle time.

Raw sockets against the async in-process broker, so the test can look at the broker's
own count of parked waits and open connections once the client has gone. Waits for a
condition poll the broker with a generous bound; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.protocol import api
from slipstream.protocol.apis import api_versions, fetch
from slipstream.protocol.records import ProducerRecord, build_batch

FOREVER_MS = 2**31 - 1


def request_frame(spec: api.ApiSpec, version: int, correlation_id: int, request: object) -> bytes:
    out = bytearray()
    api.encode_request_header(
        out, api.RequestHeader(spec.key, version, correlation_id, "hostile"), spec.request_header_version(version)
    )
    out += spec.encode_request(request, version).getvalue()
    return struct.pack(">i", len(out)) + bytes(out)


def forever_fetch(topic: str, correlation_id: int = 1) -> bytes:
    request = fetch.FetchRequest(
        max_wait_ms=FOREVER_MS,
        min_bytes=1,
        topics=[
            fetch.FetchRequestTopic(
                topic=topic,
                partitions=[fetch.FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
    )
    return request_frame(fetch.SPEC, 4, correlation_id, request)


async def until(condition: Callable[[], bool], what: str, polls: int = 500) -> None:
    for _ in range(polls):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"still not true after {polls} polls: {what}")


def open_connections(b: Broker) -> int:
    return len(b._connections)


def parked_requests() -> int:
    """Request tasks still running on the broker's loop (this test's loop)."""
    return sum(1 for t in asyncio.all_tasks() if "dispatch" in repr(t.get_coro()))


async def test_a_closed_connection_frees_its_parked_fetches_at_once() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        clients = []
        for _ in range(5):
            reader, writer = await asyncio.open_connection(b.config.host, b.port)
            writer.write(forever_fetch("t"))
            await writer.drain()
            clients.append((reader, writer))
        await until(lambda: parked_requests() == 5, "five fetches parked")
        assert open_connections(b) == 5
        # two clients close their socket; the others stay
        for _reader, writer in clients[:2]:
            writer.close()
            await writer.wait_closed()
        await until(lambda: parked_requests() == 3, "the closed clients' fetches are gone")
        await until(lambda: open_connections(b) == 3, "the closed clients' connections are gone")
        assert b.state.notifier.waiting() == 3
        # the others are still parked and still answered when data arrives
        await append(b.state, "t", 0, memoryview(bytearray(_one_record())), acks=1)
        for reader, writer in clients[2:]:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            assert struct.unpack_from(">i", body)[0] == 1  # correlation id
            writer.close()
        await until(lambda: open_connections(b) == 0, "all connections closed")
        assert b.state.notifier.waiting() == 0



def _one_record() -> bytes:
    return build_batch([ProducerRecord(b"k", b"v")])


# ------------------------------------------------------------------ connection caps


def api_versions_frame(correlation_id: int) -> bytes:
    return request_frame(
        api_versions.SPEC, 3, correlation_id, api_versions.ApiVersionsRequest(client_software_name="h", client_software_version="1")
    )


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, correlation_id: int) -> bool:
    """Send ApiVersions; True if answered, False if the broker closed the connection."""
    writer.write(api_versions_frame(correlation_id))
    try:
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        body = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    return struct.unpack_from(">i", body)[0] == correlation_id


async def test_connections_over_the_per_ip_and_total_caps_are_closed() -> None:
    for settings in ({"max_connections_per_ip": 2}, {"max_connections": 2}):
        async with Broker(storage="memory", port=0, **settings) as b:
            first = await asyncio.open_connection(b.config.host, b.port)
            second = await asyncio.open_connection(b.config.host, b.port)
            third = await asyncio.open_connection(b.config.host, b.port)
            assert await answered(*first, 1)
            assert await answered(*second, 2)
            assert not await answered(*third, 3), settings
            assert open_connections(b) == 2
            # a slot freed by a closing client is taken by the next one
            first[1].close()
            await until(lambda: open_connections(b) == 1, "the first connection released")
            fourth = await asyncio.open_connection(b.config.host, b.port)
            assert await answered(*fourth, 4)
            for _reader, writer in (second, third, fourth):
                writer.close()


async def test_idle_connections_are_closed_on_the_brokers_clock() -> None:
    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("t", 1, {})
        now = [b.state.clock()]
        b.state.clock = lambda: now[0]
        idle = await asyncio.open_connection(b.config.host, b.port)
        parked = await asyncio.open_connection(b.config.host, b.port)
        assert await answered(*idle, 1)
        parked[1].write(forever_fetch("t"))
        await until(lambda: parked_requests() == 1, "the fetch parked")
        now[0] += 599_000  # not yet idle for connections.max.idle.ms (600000)
        active = await asyncio.open_connection(b.config.host, b.port)
        assert await answered(*active, 2)
        now[0] += 2_000
        await until(lambda: open_connections(b) == 2, "the idle connection closed")
        assert await idle[0].read() == b""  # closed by the broker
        assert await answered(*active, 3)  # active within the period: still open
        assert parked_requests() == 1  # the busy one stays
        for _reader, writer in (active, parked):
            writer.close()


async def test_a_frame_claiming_more_than_socket_request_max_bytes_closes_before_its_body() -> None:
    async with Broker(storage="memory", port=0, socket_request_max_bytes=10_000) as b:
        reader, writer = await asyncio.open_connection(b.config.host, b.port)
        writer.write(struct.pack(">i", 10_001) + b"\x00" * 100)  # the body never comes
        await writer.drain()
        assert await reader.read() == b""
        await until(lambda: open_connections(b) == 0, "connection gone")
        fine = await asyncio.open_connection(b.config.host, b.port)
        assert await answered(*fine, 1)
        fine[1].close()


async def test_reading_pauses_on_queued_bytes_not_only_on_queued_frames() -> None:
    from test_connection_pipelining import FETCH, connect, frame, turns

    conn, d, t = connect()
    conn.max_request_bytes = 64 << 20
    big = 6 << 20  # three of these queued pass the 16 MiB bound long before 64 frames
    conn.data_received(frame(FETCH, "a"))
    await turns()
    assert d.started == ["a"]  # holds the ones after it back
    for name in "bcd":
        conn.data_received(frame(FETCH, name * big))
    assert t.reading_paused
    d.gate("a").set_result(b"a")
    for name in "bcd":
        await turns()
        d.gate(name * big).set_result(name.encode())
    await turns()
    assert not t.reading_paused
    assert t.written() == [b"a", b"b", b"c", b"d"]
