"""What one client's connections may cost the broker: parked requests, sockets, idle time.

Raw sockets against the async in-process broker, so the test can look at the broker's
own count of parked waits and open connections once the client has gone. Waits for a
condition poll the broker with a generous bound; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

from slipstream.broker.broker import Broker
from slipstream.protocol import api
from slipstream.protocol.apis import fetch
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
        await b.state.append("t", 0, memoryview(bytearray(_one_record())), acks=1)
        for reader, writer in clients[2:]:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            assert struct.unpack_from(">i", body)[0] == 1  # correlation id
            writer.close()
        await until(lambda: open_connections(b) == 0, "all connections closed")
        assert b.state.notifier.waiting() == 0



def _one_record() -> bytes:
    return build_batch([ProducerRecord(b"k", b"v")])
