"""A tiny HTTP/1.1 server for the admin listener, on the broker's event loop.

Why our own and not a framework: the listener serves a handful of GET endpoints to
scrapers and scripts, must run on whatever loop the broker runs (uvloop included)
without a thread, and should add no dependency to a broker that has it switched off.
What it does: GET and HEAD, keep-alive (HTTP/1.1 default, ``Connection: close``
honoured), bounded request heads, an idle timeout. Anything else gets a clear 4xx.
The request parsing is a pure function (``parse_head``) so it is tested without sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
IDLE_TIMEOUT_S = 30.0
# Connections served at once; more are answered 503 and closed, so a runaway scraper
# cannot use up the broker's file descriptors.
MAX_CONNECTIONS = 64

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


@dataclass
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    def head(self, keep_alive: bool) -> bytes:
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Status')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
            *(f"{k}: {v}" for k, v in self.headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_head(head: bytes) -> HttpRequest:
    """Parse a request line and headers (without the final blank line)."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        raise BadRequest(400, "undecodable request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"malformed request line {lines[0]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadRequest(400, f"malformed header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    split = urlsplit(target)
    return HttpRequest(method, unquote(split.path) or "/", parse_qs(split.query), version, headers)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpServer:
    def __init__(self, handler: Handler, max_connections: int = MAX_CONNECTIONS) -> None:
        self.handler = handler
        self.max_connections = max_connections
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._clients) >= self.max_connections:
            # Read the request first (briefly): closing on unread data would reset the
            # connection and the client would never see the answer.
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                async with asyncio.timeout(1.0):
                    await reader.readuntil(b"\r\n\r\n")
                await _send(writer, HttpResponse(503, b"too many admin connections\n"), False)
            writer.close()
            return
        self._clients.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except asyncio.CancelledError:
            # Only stop() cancels these; ending quietly keeps asyncio's stream callback
            # from logging the cancellation as an error.
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection should close."""
        try:
            async with asyncio.timeout(IDLE_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            await _send(writer, HttpResponse(413, b"request head too large\n"), False)
            return False
        except asyncio.IncompleteReadError:
            return False
        if len(head) > MAX_HEAD_BYTES:
            await _send(writer, HttpResponse(413, b"request head too large\n"), False)
            return False
        try:
            request = parse_head(head[:-4])
        except BadRequest as exc:
            await _send(writer, HttpResponse(exc.status, f"{exc}\n".encode()), False)
            return False
        if request.headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in request.headers:
            await _send(writer, HttpResponse(400, b"the admin listener takes no request bodies\n"), False)
            return False
        if request.method not in ("GET", "HEAD"):
            response = HttpResponse(405, b"only GET and HEAD are served\n", headers={"Allow": "GET, HEAD"})
        else:
            try:
                response = await self.handler(request)
            except Exception as exc:
                log.exception("admin listener failed answering %s", request.path)
                response = HttpResponse(500, f"internal error: {exc}\n".encode())
        keep_alive = request.keep_alive
        await _send(writer, response, keep_alive, head_only=request.method == "HEAD")
        return keep_alive


async def _send(writer: asyncio.StreamWriter, response: HttpResponse, keep_alive: bool, *, head_only: bool = False) -> None:
    writer.write(response.head(keep_alive))
    if not head_only:
        writer.write(response.body)
    await writer.drain()
