"""Cluster view for the client: bootstrap, metadata cache, one connection per broker."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field

from ..protocol.apis.metadata import SPEC as METADATA
from ..protocol.apis.metadata import MetadataRequest, MetadataRequestTopic
from ..protocol.errors import ErrorCode, KafkaError
from .connection import AuthenticationFailed, BrokerConnection, ConnectionClosed
from .security import PLAINTEXT, ClientSecurity


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    error_code: int
    is_internal: bool
    # partition -> leader node id (-1 when leaderless)
    leaders: dict[int, int] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.leaders)


def parse_bootstrap(bootstrap: str | list[str]) -> list[tuple[str, int]]:
    items = bootstrap.split(",") if isinstance(bootstrap, str) else bootstrap
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} must look like host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class Cluster:
    def __init__(
        self,
        bootstrap: str | list[str],
        *,
        client_id: str = "slipstream",
        request_timeout_s: float = 30.0,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        # How every connection of this client is secured (TLS, SASL).
        self.security = security
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.brokers: dict[int, BrokerNode] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        # Every connection opened and not reaped yet, replaced ones included:
        # close() awaits them all, so no read loop outlives the cluster.
        self._opened: set[BrokerConnection] = set()
        self._lock = asyncio.Lock()

    async def _open(self, host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(
            host, port, client_id=self.client_id, request_timeout_s=self.request_timeout_s, security=self.security
        )
        await conn.connect()  # closes itself if it fails
        self._opened.add(conn)
        return conn

    async def _reap(self, conn: BrokerConnection | None) -> None:
        """Close a connection being replaced (it failed): awaits its read loop."""
        if conn is not None:
            self._opened.discard(conn)
            with contextlib.suppress(Exception):
                await conn.close()

    async def any_connection(self) -> BrokerConnection:
        """A connection for a request any broker answers (Metadata, FindCoordinator): an
        open one, else a new one to a broker the metadata names, else to a bootstrap
        server. The metadata's brokers come before the bootstrap servers (as the Java
        client's least loaded node): in a cluster the broker a client was bootstrapped
        through may be gone for good while the others serve on."""
        for conn in self._connections.values():
            if not conn.closed:
                return conn
        if self._bootstrap_conn is not None and not self._bootstrap_conn.closed:
            return self._bootstrap_conn
        errors = []
        for node_id in list(self.brokers):
            try:
                return await self.connection(node_id)
            except AuthenticationFailed:
                raise
            except (ConnectionClosed, OSError, KafkaError) as exc:
                errors.append(f"broker {node_id}: {exc}")
        await self._reap(self._bootstrap_conn)
        for host, port in self.bootstrap:
            try:
                conn = await self._open(host, port)
            except AuthenticationFailed:
                raise  # wrong credentials: another bootstrap server would refuse them too
            except (ConnectionClosed, OSError, KafkaError) as exc:
                errors.append(str(exc))
                continue
            current = self._bootstrap_conn
            if current is not None and current is not conn and not current.closed:
                await self._reap(conn)  # a concurrent caller won the race
                return current
            self._bootstrap_conn = conn
            return conn
        raise ConnectionClosed("no bootstrap server reachable: " + "; ".join(errors))

    async def connection(self, node_id: int) -> BrokerConnection:
        async with self._lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            if conn is not None:
                del self._connections[node_id]
                await self._reap(conn)
            node = self.brokers.get(node_id)
            if node is None:
                raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata")
            conn = await self._open(node.host, node.port)
            self._connections[node_id] = conn
            return conn

    async def refresh_metadata(
        self, topics: list[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict[str, TopicInfo]:
        """Fetch metadata for ``topics`` (all topics when None); returns those topics."""
        conn = await self.any_connection()
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=allow_auto_create,
        )
        response = await conn.request(METADATA, request)
        self.brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port) for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        result: dict[str, TopicInfo] = {}
        for t in response.topics:
            info = TopicInfo(
                name=t.name or "",
                topic_id=t.topic_id,
                error_code=t.error_code,
                is_internal=t.is_internal,
                leaders={p.partition_index: p.leader_id for p in t.partitions},
            )
            result[info.name] = info
            if info.error_code == 0:
                self.topics[info.name] = info
            else:
                self.topics.pop(info.name, None)
        return result

    async def leader_connection(self, topic: str, partition: int) -> BrokerConnection:
        info = self.topics.get(topic)
        if info is None or partition not in info.leaders:
            await self.refresh_metadata([topic])
            info = self.topics.get(topic)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")
        leader = info.leaders.get(partition)
        if leader is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} has no partition {partition}")
        if leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
        return await self.connection(leader)

    async def controller_connection(self) -> BrokerConnection:
        if self.controller_id < 0:
            await self.refresh_metadata([])
        if self.controller_id >= 0 and self.controller_id in self.brokers:
            return await self.connection(self.controller_id)
        return await self.any_connection()

    async def close(self) -> None:
        """Close every connection this cluster opened and await their read loops."""
        conns = set(self._opened) | set(self._connections.values())
        if self._bootstrap_conn is not None:
            conns.add(self._bootstrap_conn)
        self._connections.clear()
        self._bootstrap_conn = None
        self._opened.clear()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()
