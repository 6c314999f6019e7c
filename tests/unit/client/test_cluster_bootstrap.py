"""A client whose bootstrap server is gone reaches the cluster through the brokers its
metadata names (in a cluster, the broker a client was bootstrapped through may be killed
while the others serve on: the metadata it needs to find the new leaders must still come)."""

from __future__ import annotations

import asyncio
import contextlib

from slipstream.broker.broker import Broker
from slipstream.client.cluster import Cluster


class Proxy:
    """A bootstrap address in front of the broker that can go away (as a killed broker)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self.writers |= {writer, up_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    async def stop(self) -> None:
        """Stop listening and hang up every connection."""
        self.server.close()
        for w in self.writers:
            w.close()
        await self.server.wait_closed()


async def test_metadata_comes_from_a_known_broker_once_the_bootstrap_server_is_gone(
    slipstream_broker: Broker,
) -> None:
    host, port = slipstream_broker.bootstrap_servers.rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    proxy_port = await proxy.start()
    cluster = Cluster(f"127.0.0.1:{proxy_port}")
    try:
        await cluster.refresh_metadata()  # through the bootstrap server: learns the broker
        assert [(b.host, b.port) for b in cluster.brokers.values()] == [(host, int(port))]
        await proxy.stop()
        for _ in range(100):  # the client sees the hang-up
            if cluster._bootstrap_conn is None or cluster._bootstrap_conn.closed:
                break
            await asyncio.sleep(0.01)
        assert not cluster._connections  # no other connection to fall back on

        await cluster.refresh_metadata()  # the bootstrap server is gone: the known broker answers
        conn = await cluster.any_connection()
        assert (conn.host, conn.port) == (host, int(port))
    finally:
        await cluster.close()
