"""BrokerConnection / Cluster lifecycle: nothing is left pending when connections go away.

Many open/close cycles -- with requests in flight, with the broker (a proxy in
front of it) hanging up, with ``abort``, with ``connect`` failing or being
cancelled half-way -- under asyncio debug mode. After each scenario no task of
the client is left and the loop reported no "Task was destroyed but it is
pending" (nor any other error). The broker and the fake servers run on threads
of their own, so every task on the test's loop is the client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import socketserver
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from slipstream.broker.broker import Broker
from slipstream.client.cluster import Cluster
from slipstream.client.connection import BrokerConnection, ConnectionClosed
from slipstream.protocol.apis.metadata import SPEC as METADATA
from slipstream.protocol.apis.metadata import MetadataRequest
from slipstream.protocol.errors import KafkaError

pytestmark = pytest.mark.timeout(120)


# ---------------------------------------------------------------------------- fake peers (threads)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[socketserver.BaseRequestHandler], upstream: tuple[str, int] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.upstream = upstream
        self.sockets: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def track(self, *socks: socket.socket) -> None:
        with self.lock:
            self.sockets.update(socks)

    def cut(self) -> None:
        """Hang up every connection (the client sees EOF)."""
        with self.lock:
            socks, self.sockets = self.sockets, set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def stop(self) -> None:
        self.cut()
        self.shutdown()
        self.server_close()


class _ProxyHandler(socketserver.BaseRequestHandler):
    """Forwards bytes both ways to the real broker until either side hangs up."""

    server: _Server

    def handle(self) -> None:
        assert self.server.upstream is not None
        up = socket.create_connection(self.server.upstream)
        self.server.track(self.request, up)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

        t = threading.Thread(target=pump, args=(up, self.request), daemon=True)
        t.start()
        pump(self.request, up)
        t.join(5)


class _HangupHandler(socketserver.BaseRequestHandler):
    """Reads the first request (ApiVersions) and hangs up without answering."""

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            self.request.recv(65536)


class _SilentHandler(socketserver.BaseRequestHandler):
    """Reads everything, answers nothing; forgets a connection once the client closed it."""

    server: _Server

    def handle(self) -> None:
        self.server.track(self.request)
        with contextlib.suppress(OSError):
            while self.request.recv(65536):
                pass
        with self.server.lock:
            self.server.sockets.discard(self.request)


@pytest.fixture
def peers(slipstream_broker: Broker) -> Iterator[dict[str, Any]]:
    host, port = slipstream_broker.bootstrap_servers.rsplit(":", 1)
    servers = {
        "proxy": _Server(_ProxyHandler, (host, int(port))),
        "hangup": _Server(_HangupHandler),
        "silent": _Server(_SilentHandler),
    }
    try:
        yield {"broker": (host, int(port)), **servers}
    finally:
        for s in servers.values():
            s.stop()


# ---------------------------------------------------------------------------- leak detection


class LeakWatch:
    """Debug mode + a loop exception handler that records what the loop reports."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.reports: list[str] = []
        self._old_handler = self.loop.get_exception_handler()
        self._old_debug = self.loop.get_debug()

    def __enter__(self) -> LeakWatch:
        self.loop.set_debug(True)
        self.loop.set_exception_handler(lambda _loop, ctx: self.reports.append(str(ctx.get("message"))))
        self.before = asyncio.all_tasks()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.set_exception_handler(self._old_handler)
        self.loop.set_debug(self._old_debug)

    def leftovers(self) -> list[str]:
        return sorted(
            f"{t.get_name()}: {t.get_coro()!r}" for t in asyncio.all_tasks() - self.before if not t.done()
        )

    async def settle(self, turns: int = 3) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)

    def check(self, what: str) -> None:
        gc.collect()  # a pending task that lost its last reference is reported now
        assert self.leftovers() == [], f"{what}: tasks left pending"
        assert self.reports == [], f"{what}: the loop reported {self.reports[:5]}"


def read_loops(conn: BrokerConnection) -> asyncio.Task[None]:
    task = conn._read_task
    assert task is not None
    return task


async def in_flight(conn: BrokerConnection, n: int) -> list[asyncio.Task[Any]]:
    """``n`` Metadata requests sent and awaiting answers."""
    tasks = [asyncio.create_task(conn.request(METADATA, MetadataRequest(topics=None))) for _ in range(n)]
    await asyncio.sleep(0)  # they are written before the connection goes away
    return tasks


async def outcomes(tasks: list[asyncio.Task[Any]]) -> set[str]:
    done = await asyncio.gather(*tasks, return_exceptions=True)
    return {type(r).__name__ for r in done}


async def cycles(n: int, body: Callable[[int], Awaitable[None]]) -> None:
    for i in range(n):
        await body(i)


# ---------------------------------------------------------------------------- tests


async def test_close_with_requests_in_flight_leaves_nothing_pending(peers: dict[str, Any]) -> None:
    host, port = peers["broker"]
    seen: set[str] = set()
    with LeakWatch() as watch:

        async def cycle(i: int) -> None:
            conn = await BrokerConnection(host, port).connect()
            tasks = await in_flight(conn, 1 + i % 4)
            await conn.close()
            assert read_loops(conn).done(), "close awaited the read loop"
            seen.update(await outcomes(tasks))
            await conn.close()  # idempotent

        await cycles(40, cycle)
        watch.check("close with requests in flight")
    assert "ConnectionClosed" in seen, "some requests were cut off by close"


async def test_broker_hanging_up_then_close_or_drop_leaves_nothing_pending(peers: dict[str, Any]) -> None:
    proxy: _Server = peers["proxy"]
    with LeakWatch() as watch:

        async def cycle(i: int) -> None:
            conn = await BrokerConnection("127.0.0.1", proxy.port).connect()
            assert (await conn.request(METADATA, MetadataRequest(topics=None))).brokers
            tasks = await in_flight(conn, 2)
            await asyncio.to_thread(proxy.cut)
            got = await outcomes(tasks)
            assert got <= {"MetadataResponse", "ConnectionClosed"}, got
            if i % 2 == 0:
                await conn.close()
                assert read_loops(conn).done()
            else:
                # Nobody closes it: the read loop must still end on its own.
                task = read_loops(conn)
                async with asyncio.timeout(5):
                    while not task.done():
                        await asyncio.sleep(0.001)
                assert conn.closed
                del conn, task

        await cycles(20, cycle)
        await watch.settle()
        watch.check("broker hanging up")


async def test_abort_cancels_the_read_loop_without_await(peers: dict[str, Any]) -> None:
    host, port = peers["broker"]
    with LeakWatch() as watch:

        async def cycle(i: int) -> None:
            conn = await BrokerConnection(host, port).connect()
            tasks = await in_flight(conn, 3)
            conn.abort("test")
            task = read_loops(conn)
            await watch.settle()
            assert task.done(), "the read loop ended within a few loop turns of abort"
            assert await outcomes(tasks) <= {"MetadataResponse", "ConnectionClosed"}
            with pytest.raises(ConnectionClosed):
                await conn.request(METADATA, MetadataRequest(topics=None))
            if i % 2:
                await conn.close()

        await cycles(30, cycle)
        watch.check("abort")


async def test_connect_that_fails_or_is_cancelled_leaves_nothing_pending(peers: dict[str, Any]) -> None:
    hangup: _Server = peers["hangup"]
    silent: _Server = peers["silent"]
    with LeakWatch() as watch:

        async def cycle(i: int) -> None:
            # The peer hangs up during the ApiVersions exchange.
            with pytest.raises(ConnectionClosed):
                await BrokerConnection("127.0.0.1", hangup.port).connect()
            # The peer never answers: the negotiation times out ...
            with pytest.raises(KafkaError):
                await BrokerConnection("127.0.0.1", silent.port, request_timeout_s=0.02).connect()
            # ... or connect is cancelled half-way (e.g. a fetch loop stopped by close).
            task = asyncio.create_task(BrokerConnection("127.0.0.1", silent.port).connect())
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        await cycles(10, cycle)
        await watch.settle()
        watch.check("failed connects")
    # Every socket the client opened was closed by it: the silent peer saw EOF on each.
    for _ in range(100):
        with silent.lock:
            open_at_peer = len(silent.sockets)
        if not open_at_peer:
            break
        await asyncio.sleep(0.02)
    assert open_at_peer == 0, f"{open_at_peer} connection(s) left open by failed connects"


async def test_cluster_reaps_replaced_connections_and_closes_everything(peers: dict[str, Any]) -> None:
    host, port = peers["broker"]
    with LeakWatch() as watch:

        async def cycle(i: int) -> None:
            cluster = Cluster(f"{host}:{port}")
            # Concurrent first calls race to open the bootstrap connection: one wins,
            # the others' connections are closed rather than dropped.
            racing = await asyncio.gather(*(cluster.any_connection() for _ in range(3)))
            assert len({id(c) for c in racing}) == 1
            await cluster.refresh_metadata()
            node_id = next(iter(cluster.brokers))
            first = await cluster.connection(node_id)
            pending = await in_flight(first, 2)
            first.abort("test: connection lost")
            second = await cluster.connection(node_id)  # replaces (and reaps) the failed one
            assert second is not first and read_loops(first).done()
            await outcomes(pending)
            boot = await cluster.any_connection()
            await asyncio.gather(*(cluster.any_connection() for _ in range(3)))
            await cluster.close()
            for conn in (first, second, boot):
                assert conn.closed and read_loops(conn).done()

        await cycles(15, cycle)
        watch.check("cluster")
