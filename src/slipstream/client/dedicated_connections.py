"""One connection per broker kept apart from the cluster's shared ones.

The fetcher's long-polling Fetch requests wait up to ``fetch_max_wait_ms`` on the
broker; on their own connections they hold up no other request to that broker.
"""

from __future__ import annotations

import contextlib

from .cluster import Cluster
from .connection import BrokerConnection, ConnectionClosed


class DedicatedConnections:
    """Connections by broker node id, opened from the cluster's metadata on first use
    and reopened once closed."""

    def __init__(self, cluster: Cluster, *, client_id: str, request_timeout_s: float) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self._by_node: dict[int, BrokerConnection] = {}

    def open_connections(self) -> list[BrokerConnection]:
        return list(self._by_node.values())

    async def get(self, node_id: int) -> BrokerConnection:
        conn = self._by_node.get(node_id)
        if conn is not None:
            if not conn.closed:
                return conn
            # Replaced: close it (awaits its read loop) so no task is left pending.
            del self._by_node[node_id]
            with contextlib.suppress(Exception):
                await conn.close()
        node = self.cluster.brokers.get(node_id)
        if node is None:
            raise ConnectionClosed(f"broker {node_id} is not in the metadata")
        conn = BrokerConnection(
            node.host,
            node.port,
            client_id=self.client_id,
            request_timeout_s=self.request_timeout_s,
            security=self.cluster.security,
        )
        await conn.connect()
        self._by_node[node_id] = conn
        return conn

    async def drop(self, node_id: int) -> None:
        """Close the connection to ``node_id`` (after a failure); the next ``get`` reopens it."""
        conn = self._by_node.pop(node_id, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        conns = list(self._by_node.values())
        self._by_node.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()
