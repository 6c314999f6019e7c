"""Finding a group's coordinator (FindCoordinator) and keeping a connection to it."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..protocol.apis.find_coordinator import SPEC as FIND_COORDINATOR
from ..protocol.apis.find_coordinator import FindCoordinatorRequest
from ..protocol.errors import ErrorCode, KafkaError, is_retriable
from ..protocol.errors import name as error_name
from .cluster import BrokerNode, Cluster
from .connection import BrokerConnection, ConnectionClosed
from .consumer_config import ConsumerConfig
from .group_errors import FatalGroupError, GroupError

log = logging.getLogger(__name__)


class CoordinatorLocator:
    """Finds a group's coordinator and keeps a dedicated connection to it.

    The connection is separate from the cluster's per-broker ones (as the Java
    client's), so blocking JoinGroup/SyncGroup never queue behind fetches and
    vice versa. Shared by the group member and the offsets client.
    """

    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        if not config.group_id:
            raise ValueError("a coordinator lookup needs a group_id")
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id
        self.node: BrokerNode | None = None
        self._conn: BrokerConnection | None = None
        # Dropped by mark_unknown (sync, so it can only abort): closed later, awaited.
        self._dropped: set[BrokerConnection] = set()
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def known(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def mark_unknown(self, reason: str) -> None:
        if self._conn is not None:
            log.info(
                "group %s: coordinator %s marked unknown: %s", self.group_id, self.node, reason
            )
            conn, self._conn = self._conn, None
            self.node = None
            conn.abort(f"coordinator connection dropped: {reason}")
            self._dropped.add(conn)

    async def _reap_dropped(self) -> None:
        while self._dropped:
            with contextlib.suppress(Exception):
                await self._dropped.pop().close()

    async def connection(self) -> BrokerConnection:
        """The coordinator connection, discovering the coordinator (with backoff) if needed.

        Retries retriable failures forever; callers bound it with a timeout.
        Raises FatalGroupError for non-retriable FindCoordinator errors.
        """
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        async with self._lock:
            await self._reap_dropped()
            attempt = 0
            while True:
                if self._closed:
                    raise ConnectionClosed(f"group {self.group_id}: consumer closed")
                conn = self._conn
                if conn is not None and not conn.closed:
                    return conn
                try:
                    node = await self._find()
                    conn = BrokerConnection(
                        node.host,
                        node.port,
                        client_id=self.config.client_id,
                        request_timeout_s=self.config.request_timeout_ms / 1000.0,
                        security=self.cluster.security,
                    )
                    await conn.connect()
                    self.node, self._conn = node, conn
                    log.debug("group %s: coordinator is %s", self.group_id, node)
                    return conn
                except FatalGroupError:
                    raise
                except (ConnectionClosed, OSError, KafkaError) as exc:
                    if (
                        isinstance(exc, KafkaError)
                        and not exc.retriable
                        and not isinstance(exc, GroupError)
                    ):
                        raise
                    delay = self.config.retry_backoff().delay_s(attempt)
                    attempt += 1
                    log.debug(
                        "group %s: coordinator lookup failed (%s); retrying in %.3fs",
                        self.group_id,
                        exc,
                        delay,
                    )
                    await asyncio.sleep(delay)

    async def _find(self) -> BrokerNode:
        conn = await self.cluster.any_connection()
        version = conn.version_for(FIND_COORDINATOR)
        request = FindCoordinatorRequest(
            key=self.group_id, key_type=0, coordinator_keys=[self.group_id]
        )
        response = await conn.request(FIND_COORDINATOR, request, version=version)
        if version >= 4:
            if not response.coordinators:
                raise GroupError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "FindCoordinator answered no coordinator"
                )
            c = response.coordinators[0]
            code, node_id, host, port, message = (
                c.error_code,
                c.node_id,
                c.host,
                c.port,
                c.error_message,
            )
        else:
            code, node_id, host, port = (
                response.error_code,
                response.node_id,
                response.host,
                response.port,
            )
            message = getattr(response, "error_message", None)
        if code != ErrorCode.NONE:
            text = f"FindCoordinator for group {self.group_id!r}: {error_name(code)}" + (
                f" ({message})" if message else ""
            )
            if is_retriable(code):
                raise GroupError(code, text)
            raise FatalGroupError(code, text)
        return BrokerNode(node_id, host, port)

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        await self._reap_dropped()
