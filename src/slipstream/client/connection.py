"""asyncio adapter around ConnectionCore: one TCP connection to one broker.

Requests are pipelined up to ``max_in_flight``; each has a timeout. On connect
the broker's API versions are fetched, and every request then goes out at the
highest version both sides support.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..protocol import apis as _apis  # noqa: F401  (registers every API)
from ..protocol.api import REGISTRY, ApiSpec
from ..protocol.apis.api_versions import SPEC as API_VERSIONS
from ..protocol.apis.api_versions import ApiVersionsRequest
from ..protocol.errors import ErrorCode, KafkaError
from .core import ConnectionCore, ProtocolError, Received

log = logging.getLogger(__name__)


class ConnectionClosed(ConnectionError):
    pass


class UnsupportedApi(KafkaError):
    """Neither side supports a common version of an API."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "slipstream",
        max_in_flight: int = 5,
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self.core = ConnectionCore(client_id)
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._slots = asyncio.Semaphore(max_in_flight)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._read_task: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self) -> BrokerConnection:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectionClosed(f"cannot connect to {self.address}: {exc}") from exc
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        await self._negotiate()
        return self

    async def _negotiate(self) -> None:
        response = await self._send(API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="slipstream", client_software_version="0.1.0"
        ))
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            response = await self._send(API_VERSIONS, 0, ApiVersionsRequest())
        if response.error_code != 0:
            raise KafkaError(response.error_code, f"ApiVersions failed on {self.address}")
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version_for(self, spec: ApiSpec, max_version: int | None = None) -> int:
        ours_max = spec.max_version if max_version is None else min(max_version, spec.max_version)
        theirs = self.broker_versions.get(spec.key)
        if theirs is None:
            raise UnsupportedApi(f"{self.address} does not support {spec.name}")
        version = min(ours_max, theirs[1])
        if version < max(spec.min_version, theirs[0]):
            raise UnsupportedApi(
                f"no common version of {spec.name}: ours {spec.min_version}-{ours_max}, "
                f"{self.address} {theirs[0]}-{theirs[1]}"
            )
        return version

    def supports(self, spec: ApiSpec) -> bool:
        return spec.key in self.broker_versions

    async def request(
        self, spec: ApiSpec, request: Any, *, version: int | None = None, max_version: int | None = None,
        expect_response: bool = True, timeout_s: float | None = None,
    ) -> Any:
        if version is None:
            version = self.version_for(spec, max_version)
        return await self._send(spec, version, request, expect_response=expect_response, timeout_s=timeout_s)

    async def _send(
        self, spec: ApiSpec, version: int, request: Any, *, expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> Any:
        if self.closed or self._writer is None:
            raise ConnectionClosed(f"connection to {self.address} is closed")
        async with self._slots:
            loop = asyncio.get_running_loop()
            async with self._send_lock:
                correlation_id, parts = self.core.encode(spec, version, request, expect_response=expect_response)
                fut: asyncio.Future[Any] | None = None
                if expect_response:
                    fut = loop.create_future()
                    self._waiters[correlation_id] = fut
                self._writer.writelines(parts)
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                self._fail(ConnectionClosed(f"connection to {self.address} lost: {exc}"))
            if fut is None:
                return None
            timeout = self.request_timeout_s if timeout_s is None else timeout_s
            try:
                return await asyncio.wait_for(fut, timeout)
            except TimeoutError:
                # A late answer would desynchronise the stream: drop the connection.
                self._fail(ConnectionClosed(f"{spec.name} to {self.address} timed out after {timeout}s"))
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"{spec.name} to {self.address} timed out") from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                data = await self._reader.read(256 * 1024)
                if not data:
                    raise ConnectionClosed(f"{self.address} closed the connection")
                for received in self.core.receive(data):
                    self._deliver(received)
        except asyncio.CancelledError:
            self._fail(ConnectionClosed(f"connection to {self.address} closed"))
        except (ProtocolError, ConnectionClosed, OSError) as exc:
            err = exc if isinstance(exc, ConnectionClosed) else ConnectionClosed(str(exc))
            self._fail(err)

    def _deliver(self, received: Received) -> None:
        fut = self._waiters.pop(received.correlation_id, None)
        if fut is not None and not fut.done():
            fut.set_result(received.response)

    def _fail(self, exc: Exception) -> None:
        if not self.closed:
            log.debug("%s", exc)
        self.closed = True
        self.core.fail_all()
        waiters, self._waiters = self._waiters, {}
        for fut in waiters.values():
            if not fut.done():
                fut.set_exception(exc)
        if self._writer is not None:
            self._writer.close()

    def abort(self, reason: str) -> None:
        """Drop the connection now, failing every request in flight (no await needed)."""
        self._fail(ConnectionClosed(f"connection to {self.address} dropped: {reason}"))

    async def close(self) -> None:
        self._fail(ConnectionClosed(f"connection to {self.address} closed"))
        if self._read_task is not None:
            self._read_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._read_task
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


def spec_by_name(name: str) -> ApiSpec:
    for spec in REGISTRY.values():
        if spec.name == name:
            return spec
    raise KeyError(name)
