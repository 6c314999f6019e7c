"""Turns one request frame into one response frame (or none, for acks=0 produces)."""

from __future__ import annotations

import asyncio
import logging
from time import perf_counter
from typing import TYPE_CHECKING

from ..protocol import api, codec
from ..protocol import primitives as p
from ..protocol.api import RequestHeader
from ..protocol.apis.api_versions import (
    ApiVersionsResponse,
    ApiVersionsResponseApiVersion,
)
from ..protocol.errors import ErrorCode
from .handlers import API_TABLE, Handler, load_handler
from .request_context import RequestContext
from .security.sasl_answers import AuthenticationFailed, raw_sasl_token
from .security.session import SASL_HANDSHAKE as SASL_HANDSHAKE_KEY
from .security.session import ConnectionSession
from .state import BrokerState

if TYPE_CHECKING:
    # Type-only: the coordinators load after the listener opens (Broker.start).
    from .groups import GroupCoordinatorAdapter
    from .transactions import TransactionCoordinatorAdapter

log = logging.getLogger(__name__)

# A response's parts in order; a FileRegion among them is sent by the connection (direct_sender.py).
Buffers = list[codec.Part]

# After a failed authentication the answer goes out and the connection closes this much
# later, so the client reads the error before it sees the close (Kafka delays by
# connection.failed.authentication.delay.ms, 100 ms by default, as well).
FAILED_AUTHENTICATION_CLOSE_DELAY_S = 0.1


class CloseConnection(Exception):
    """The request cannot be answered; the connection is closed with this reason logged.

    ``response``, when given, is written before the connection closes (a failed SASL
    authentication is answered, then the connection is closed).
    """

    def __init__(self, reason: str, response: Buffers | None = None, close_delay_s: float = 0.0) -> None:
        super().__init__(reason)
        self.response = response
        self.close_delay_s = close_delay_s


class Dispatcher:
    """Decodes a request, runs its API's handler, encodes the answer.

    Made without coordinators, it answers only SERVED_WHILE_STARTING: a starting broker
    opens its listener before it loads the group and transaction coordinators (most of
    its code), and every other request waits until ``attach_coordinators``.
    """

    SERVED_WHILE_STARTING = frozenset((api.API_VERSIONS_KEY, api.METADATA_KEY))

    def __init__(
        self,
        state: BrokerState,
        groups: GroupCoordinatorAdapter | None = None,
        transactions: TransactionCoordinatorAdapter | None = None,
    ) -> None:
        self.state = state
        self.groups: GroupCoordinatorAdapter | None = None
        self.transactions: TransactionCoordinatorAdapter | None = None
        self._coordinators_attached = asyncio.Event()
        # Handler modules by API key, each imported on its API's first request; those
        # answered while starting are imported now, so that answer imports nothing.
        self.handlers: dict[int, Handler] = {key: load_handler(key) for key in self.SERVED_WHILE_STARTING}
        state.api_versions = self.supported_versions()
        if groups is not None and transactions is not None:
            self.attach_coordinators(groups, transactions)

    def attach_coordinators(self, groups: GroupCoordinatorAdapter, transactions: TransactionCoordinatorAdapter) -> None:
        """From now on every API is served (requests waiting for the coordinators go on)."""
        self.groups = groups
        self.transactions = transactions
        self._coordinators_attached.set()

    def supported_versions(self) -> list[ApiVersionsResponseApiVersion]:
        return [
            ApiVersionsResponseApiVersion(
                api_key=key, min_version=entry.min_version, max_version=entry.max_version
            )
            for key, entry in sorted(API_TABLE.items())
        ]

    async def dispatch(
        self, frame: bytearray, client_host: str, session: ConnectionSession | None = None, file_regions: bool = False
    ) -> Buffers | None:
        if session is not None and session.raw_tokens:
            # After a v0 SaslHandshake: a bare SASL token, answered bare (no Kafka header).
            try:
                return list(raw_sasl_token(session, frame))
            except AuthenticationFailed as exc:
                raise CloseConnection(f"SASL authentication failed: {exc.message}") from None
        view = memoryview(frame)
        try:
            api_key, api_version, correlation_id = api.decode_request_header_prefix(view)
        except p.DecodeError as exc:
            raise CloseConnection(str(exc)) from None
        if session is not None:
            if not session.admits(api_key):
                # Kafka closes a connection that sends anything else before authenticating.
                raise CloseConnection(
                    f"API key {api_key} before SASL authentication completed on listener {session.listener.name}"
                )
            if session.expires_at_ms is not None and api_key != SASL_HANDSHAKE_KEY and session.expired():
                # KIP-368: a session past its lifetime is closed unless it re-authenticates.
                raise CloseConnection(
                    f"SASL session of {session.principal} expired (connections.max.reauth.ms) without re-authentication"
                )
        handler = self.handlers.get(api_key)
        if handler is None:
            if api_key not in API_TABLE:
                raise CloseConnection(f"unknown API key {api_key}")
            if self.groups is None:
                # Still starting: this API is not in SERVED_WHILE_STARTING (those are loaded).
                await self._coordinators_attached.wait()
            handler = self.handlers.get(api_key)  # (a request that waited too may have loaded it)
            if handler is None:
                handler = self.handlers[api_key] = load_handler(api_key)
        spec: api.ApiSpec = handler.SPEC
        if not handler.MIN_VERSION <= api_version <= handler.MAX_VERSION:
            if api_key == api.API_VERSIONS_KEY:
                # Kafka answers an unknown ApiVersions version with v0 + UNSUPPORTED_VERSION
                # and its version list, so the client can retry with one both know.
                body = ApiVersionsResponse(
                    error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self.supported_versions()
                )
                return _frame(spec, 0, correlation_id, body)
            raise CloseConnection(
                f"{spec.name} v{api_version} is not supported (supported: "
                f"v{handler.MIN_VERSION}-v{handler.MAX_VERSION})"
            )
        try:
            header, pos = api.decode_request_header_rest(
                view, spec.request_header_version(api_version), api_key, api_version, correlation_id
            )
            request = spec.decode_request(view, pos, api_version)
        except p.DecodeError as exc:
            raise CloseConnection(f"malformed {spec.name} v{api_version} request: {exc}") from None
        ctx = RequestContext(
            self.state, self.groups, header, api_version, client_host, self.transactions, session, file_regions=file_regions
        )
        started = perf_counter()
        try:
            response = await handler.handle(ctx, request)
        except CloseConnection:
            raise
        except AuthenticationFailed as exc:
            raise CloseConnection(
                f"SASL authentication failed: {exc.message}",
                _frame(spec, api_version, header.correlation_id, exc.response),
                FAILED_AUTHENTICATION_CLOSE_DELAY_S,
            ) from None
        except Exception as exc:
            log.exception("%s v%d handler failed", spec.name, api_version)
            raise CloseConnection(f"internal error handling {spec.name}: {exc}") from exc
        self.state.metrics.observe_request(api_key, api_version, perf_counter() - started)
        if response is None:
            return None
        return _frame(spec, api_version, header.correlation_id, response)


def _frame(spec: api.ApiSpec, version: int, correlation_id: int, body: object) -> Buffers:
    w = codec.Writer()
    w.buf += b"\0\0\0\0"  # size, filled in below
    api.encode_response_header(w.buf, correlation_id, spec.response_header_version(version))
    first = w.buf
    spec.encode_response(body, version, w)  # type: ignore[arg-type]
    parts = w.finish()
    size = sum(map(len, parts)) - 4
    p.INT32.pack_into(first, 0, size)
    return parts


def request_header_for_logs(header: RequestHeader) -> str:
    return f"{header.client_id}#{header.correlation_id}"
