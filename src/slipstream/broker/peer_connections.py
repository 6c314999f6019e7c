"""Connections from this broker to the other brokers of its cluster.

The transaction coordinator sends WriteTxnMarkers to partition leaders elsewhere
(``txn_markers.BrokerMarkerTransport``) through :meth:`PeerConnections.request`, which
knows nothing of what it carries. One connection per peer, made on first use
with the client's connection core (``client/connection.py``, imported then: a broker
that never sends to a peer never loads the client), to the endpoint the registry
holds for the peer's inter-broker listener (``inter.broker.listener.name``, default the
first), with that listener's TLS and SASL settings (``inter_broker.py``); a connection
that fails is dropped and made again on the next use, to the address the registry gives
then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ..protocol.api import ApiSpec
from .state import BrokerState

if TYPE_CHECKING:
    from ..client.connection import BrokerConnection
    from ..client.security import ClientSecurity
    from .inter_broker import InterBrokerClient

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 15.0


class PeerUnavailable(ConnectionError):
    """The registry has no live broker with that node id, or it has no inter-broker listener."""


class PeerConnections:
    def __init__(self, state: BrokerState) -> None:
        self.state = state
        # Resolved on first use: only a cluster's brokers connect to peers, and the config
        # checked these settings at start-up for those.
        self._client: InterBrokerClient | None = None
        self._security: ClientSecurity | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    @property
    def client(self) -> InterBrokerClient:
        """The inter-broker listener, and how to connect there."""
        if self._client is None:
            self._client = self.state.config.inter_broker_client()
        return self._client

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id``, made (again) if needed."""
        lock = self._connecting.setdefault(node_id, asyncio.Lock())
        async with lock:
            address = self._address(node_id)
            current = self._connections.get(node_id)
            if current is not None and not current.closed and (current.host, current.port) == address:
                return current
            if current is not None:
                self._connections.pop(node_id, None)
                await current.close()
            from ..client.connection import BrokerConnection  # (only once a peer is needed)

            if self._security is None:
                self._security = self.client.client_security()
            connection = BrokerConnection(
                *address,
                client_id=f"slipstream-broker-{self.state.config.node_id}",
                connect_timeout_s=CONNECT_TIMEOUT_S,
                request_timeout_s=REQUEST_TIMEOUT_S,
                security=self._security,
            )
            await connection.connect()
            self._connections[node_id] = connection
            return connection

    def _address(self, node_id: int) -> tuple[str, int]:
        cluster = self.state.cluster
        row = cluster.broker(node_id) if cluster is not None else None
        if row is None:
            raise PeerUnavailable(f"broker {node_id} is not live")
        endpoint = row.endpoint(self.client.listener)
        if endpoint is None:
            raise PeerUnavailable(
                f"broker {node_id} has no {self.client.listener} listener (inter.broker.listener.name); "
                f"its listeners: {', '.join(e.name for e in row.listeners)}"
            )
        return endpoint

    async def request(self, node_id: int, spec: ApiSpec, request: Any) -> Any:
        """``request`` to ``node_id``, its decoded response."""
        connection = await self.connection(node_id)
        try:
            return await connection.request(spec, request)
        except Exception:
            # A connection that failed once is not trusted again: the next use reconnects.
            self._connections.pop(node_id, None)
            await connection.close()
            raise

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            with contextlib.suppress(Exception):
                await connection.close()


__all__ = ["PeerConnections", "PeerUnavailable"]
