"""asyncio adapter around ConnectionCore: one TCP connection to one broker.

Requests are pipelined up to ``max_in_flight``; each has a timeout. On connect
the broker's API versions are fetched, and every request then goes out at the
highest version both sides support.

Lifecycle: the connection owns one task, its read loop. ``close`` always
cancels and awaits it (also after a failure, when the broker closed the
connection, or when ``connect`` itself failed or was cancelled: ``connect``
closes before it raises), so nothing is left pending when the event loop ends.
``abort`` (synchronous) cancels it; ``close`` afterwards reaps it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

from ..protocol import apis
from ..protocol.api import REGISTRY, ApiSpec
from ..protocol.apis.api_versions import SPEC as API_VERSIONS
from ..protocol.apis.api_versions import ApiVersionsRequest
from ..protocol.apis.sasl_authenticate import SPEC as SASL_AUTHENTICATE
from ..protocol.apis.sasl_authenticate import SaslAuthenticateRequest
from ..protocol.apis.sasl_handshake import SPEC as SASL_HANDSHAKE
from ..protocol.apis.sasl_handshake import SaslHandshakeRequest
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.scram import MECHANISMS, ScramClient, ScramError, plain_token
from .core import ConnectionCore, ProtocolError, Received
from .failure_log import RateLimitedWarnings
from .security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 1.0
"""How long ``close`` lets the socket flush before aborting it."""

# Failed connects are retried by whoever needs the broker; each address is reported at
# WARNING at most every 10 s, so a client pointed at nothing says so.
connect_failures = RateLimitedWarnings(log)


class ConnectionClosed(ConnectionError):
    pass


class UnsupportedApi(KafkaError):
    """Neither side supports a common version of an API."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class AuthenticationFailed(KafkaError):
    """The broker refused our SASL credentials (or we refused its proof): not retriable."""

    def __init__(self, message: str) -> None:
        super().__init__(58, message)  # SASL_AUTHENTICATION_FAILED


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
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host = host
        self.security = security
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
        # KIP-368: when to re-authenticate (monotonic s), from the broker's session lifetime.
        self._reauthenticate_at: float | None = None
        self._reauthentication: asyncio.Future[None] | None = None
        self.reauthentications = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self) -> BrokerConnection:
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that arrives as the connection completes, and connect() would go on.
            async with asyncio.timeout(self.connect_timeout_s):
                tls = self.security.ssl_context()
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=tls, server_hostname=self.host if tls is not None else None
                )
        except (OSError, TimeoutError) as exc:
            reason = str(exc) or f"no answer within {self.connect_timeout_s:g} s"
            connect_failures.warn(self.address, f"cannot connect to {self.address}: {reason}")
            raise ConnectionClosed(f"cannot connect to {self.address}: {reason}") from exc
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"read-{self.address}"
        )
        try:
            await self._negotiate()
            if self.security.uses_sasl:
                await self._authenticate()
        except BaseException:
            # Nobody holds a connection that failed to connect: reap its read loop now
            # (also when cancelled, e.g. a fetch loop stopped by close, mid-connect).
            await self.close()
            raise
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

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate rounds (PLAIN: one; SCRAM: two)."""
        security = self.security
        mechanism = security.sasl_mechanism
        response = await self._send(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
        if response.error_code != 0:
            raise AuthenticationFailed(
                f"{self.address} does not accept SASL {mechanism} "
                f"(it offers: {', '.join(response.mechanisms) or 'none'})"
            )
        version = self.version_for(SASL_AUTHENTICATE)
        username, password = security.sasl_username or "", security.sasl_password or ""
        if mechanism == "PLAIN":
            await self._sasl_round(version, plain_token(username, password))
            return
        scram = ScramClient(MECHANISMS[mechanism], username, password)
        try:
            server_first = await self._sasl_round(version, scram.first())
            server_final = await self._sasl_round(version, scram.final(server_first))
            scram.verify(server_final)
        except ScramError as exc:
            raise AuthenticationFailed(f"SCRAM with {self.address} failed: {exc}") from None

    async def _sasl_round(self, version: int, token: bytes) -> bytes:
        response = await self._send(SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != 0:
            raise AuthenticationFailed(
                f"SASL authentication with {self.address} failed: {response.error_message or response.error_code}"
            )
        lifetime_ms = getattr(response, "session_lifetime_ms", 0)
        if lifetime_ms > 0:
            # As the Java client does: at 85-95% of the lifetime, so the session never lapses.
            self._reauthenticate_at = time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        return bytes(response.auth_bytes)

    async def _reauthenticate_if_due(self) -> None:
        """Re-authenticate once the session is near its end; other requests wait meanwhile
        (the broker serves nothing else on this connection during the exchange)."""
        running = self._reauthentication
        if running is None:
            due = self._reauthenticate_at
            if due is None or time.monotonic() < due:
                return
            self._reauthenticate_at = None
            running = self._reauthentication = asyncio.get_running_loop().create_future()
            try:
                await self._authenticate()
                self.reauthentications += 1
                running.set_result(None)
            except BaseException as exc:
                running.set_exception(exc if isinstance(exc, Exception) else ConnectionClosed("re-authentication cancelled"))
                running.exception()  # retrieved here; the waiters get it too
                self._fail(ConnectionClosed(f"re-authentication with {self.address} failed: {exc}"))
                raise
            finally:
                self._reauthentication = None
            return
        await asyncio.shield(running)

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
        if spec is SASL_HANDSHAKE or spec is SASL_AUTHENTICATE:
            # The exchange itself: alone on the connection, so it takes no in-flight slot.
            return await self._write_and_wait(spec, version, request, expect_response, timeout_s)
        if self._reauthenticate_at is not None or self._reauthentication is not None:
            await self._reauthenticate_if_due()
        async with self._slots:
            while self._reauthentication is not None:
                # Started while this request waited for its slot: nothing may go between
                # the SaslHandshake and the last SaslAuthenticate.
                await asyncio.shield(self._reauthentication)
            return await self._write_and_wait(spec, version, request, expect_response, timeout_s)

    async def _write_and_wait(
        self, spec: ApiSpec, version: int, request: Any, expect_response: bool, timeout_s: float | None
    ) -> Any:
        if self.closed or self._writer is None:
            raise ConnectionClosed(f"connection to {self.address} is closed")
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
            async with asyncio.timeout(timeout):
                return await fut
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
            raise
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
        task = self._read_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            # Don't leave it waiting for the socket's EOF: it ends on the next loop turn.
            task.cancel()

    def abort(self, reason: str) -> None:
        """Drop the connection now, failing every request in flight (no await needed).

        The read loop is cancelled and ends on the next event-loop turn; ``close``
        awaits it.
        """
        self._fail(ConnectionClosed(f"connection to {self.address} dropped: {reason}"))

    async def close(self) -> None:
        """Fail what is in flight, cancel and await the read loop, close the socket. Idempotent."""
        self._fail(ConnectionClosed(f"connection to {self.address} closed"))
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            # asyncio.wait, not await task: a cancellation of close() itself still propagates.
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: no "exception was never retrieved"
        writer = self._writer
        if writer is not None:
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await writer.wait_closed()
            except TimeoutError:
                # A peer that does not read keeps the write buffer from draining.
                writer.transport.abort()
            except (ConnectionError, OSError):
                pass


def spec_by_name(name: str) -> ApiSpec:
    apis.load_all()  # registers every API in REGISTRY (once; later calls find them loaded)
    for spec in REGISTRY.values():
        if spec.name == name:
            return spec
    raise KeyError(name)
