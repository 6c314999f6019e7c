"""asyncio transport for the Kafka protocol: framing, per-connection ordering, flow control.

Requests on one connection are read ahead and answered strictly in request order,
as Kafka clients require. Like Kafka, a connection normally works on one request
at a time. The exception is a run of requests whose APIs are all in
``PIPELINED_APIS``: each of those may start while earlier ones of the run are still
pending (e.g. a queued OffsetCommit waiting for its group-commit write), so a
pipelining client gets its commits batched. The rule, per connection:

- a request of a pipelined API starts when nothing is in flight, or when everything
  in flight is of a pipelined API too;
- any other request starts only when nothing is in flight, and nothing after it
  starts until it is answered (a parked JoinGroup or a Fetch long-poll holds the
  requests behind it back, exactly as before);
- requests start in arrival order, and a pipelined API's handler makes every effect
  that orders it against other requests (coordinator state, the commit queue)
  synchronously before its first await, so their effects apply in arrival order;
- responses are written in request order however the handlers finish; those ready
  together go out in one write. While the transport asks us to pause writing no new
  request starts, which bounds what we buffer.

On a plaintext listener a Fetch may answer with file regions (record batches left in
their segment files); such a response, and everything after it until it is all out,
is written by ``direct_sender.py`` (splice through a pipe) instead of the transport, and no request
starts meanwhile, as when the transport pauses writing.

Reading is a ``BufferedProtocol``: the transport receives into a per-thread scratch
buffer, complete small frames are copied out of it once, and a large frame (from
``_OWN_BUFFER_BYTES`` on, e.g. a Produce of big batches) gets a buffer of its own as soon
as its size is known, which the rest of it is received into directly: no copy of its
bytes in Python at all. An idle connection holds no buffer.

When the client closes (EOF) or the connection is lost, the connection's gone-signal
(parked_waits.py) ends its parked long-polls at once: they answer with what they
have (or are cancelled), so a departed client holds no task, waiter or socket. A
request that arrives behind a parked long-poll ends it too (it would wait it out).

A frame longer than socket.request.max.bytes, a request we cannot parse, or a
handler that fails closes that connection only (responses to the requests before
it are written first; requests after it are dropped).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, cast

from ..protocol.file_region import FileRegion
from .connection_limits import ConnectionLimits
from .connection_seq import CONNECTION_SEQ, next_connection_seq
from .direct_sender import DirectSender
from .dispatch import Buffers, CloseConnection, Dispatcher
from .parked_waits import ParkedWaitEnds, context_for_connection
from .security.session import ConnectionSession

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
# Frames read ahead before we stop reading from the socket, and their bytes: whichever
# bound is reached first pauses reading (one frame is always taken, however large).
_MAX_QUEUED = 64
_MAX_QUEUED_BYTES = 16 * 1024 * 1024
# Requests of pipelined APIs in flight at once on one connection, and their bytes (a
# client pipelining big produces holds at most this much besides what is queued).
_MAX_IN_FLIGHT = 128
_MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024
# What the transport receives into (shared by the connections of one thread's loop: each
# read is handled, and anything kept copied out, before the next one), and the frame size
# from which a frame is received into a buffer of its own instead.
_SCRATCH_BYTES = 256 * 1024
_OWN_BUFFER_BYTES = 64 * 1024
_scratch = threading.local()


def _scratch_view() -> memoryview:
    view: memoryview | None = getattr(_scratch, "view", None)
    if view is None:
        view = _scratch.view = memoryview(bytearray(_SCRATCH_BYTES))
    return view

# API keys whose handlers perform all their ordering-relevant effects synchronously
# before their first await (audited: OffsetCommit queues its coordinator result in
# GroupCoordinatorAdapter._commit, or waits for the adapter's lock behind earlier
# waiters; Heartbeat runs under the adapter's lock, taken without suspending when free,
# FIFO otherwise; Produce appends every partition through appends.start_append
# before it waits for the durability barrier, so a client's in-flight produces share
# group commits instead of each waiting for the one before to be answered). Add an API
# only after auditing its handler and testing it.
PIPELINED_APIS = frozenset({0, 8, 12})


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatcher: Dispatcher,
        max_request_bytes: int,
        connections: set[KafkaConnection],
        limits: ConnectionLimits | None = None,
        session_factory: Callable[[asyncio.BaseTransport], ConnectionSession] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self._admitted_ip: str | None = None  # counted in limits until the connection is lost
        # Broker-clock time of the last byte read or written (connections.max.idle.ms).
        self.last_active_ms = 0
        self._queued_bytes = 0
        # The listener's session (authentication state) is made once the transport exists.
        self.session_factory = session_factory
        self.session: ConnectionSession | None = None
        self._dispatch: Callable[[bytearray, str], Coroutine[Any, Any, Buffers | None]] = dispatcher.dispatch
        self.max_request_bytes = max_request_bytes
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # The start of a frame not complete yet (size prefix included), when small...
        self._partial = bytearray()
        # ... or a large frame's own buffer (without its size prefix) and how much is in.
        self._own: bytearray | None = None
        self._own_filled = 0
        # Frames read but not started, and requests started but not yet answered (in order).
        self._frames: deque[bytearray] = deque()
        self._in_flight: deque[asyncio.Task[Buffers | None]] = deque()
        self._in_flight_sizes: deque[int] = deque()  # the frame size of each, in order
        self._in_flight_bytes = 0
        self._in_flight_pipelined = False
        self._eof = False
        self._write_scheduled = False
        self._reading_paused = False
        self._writing_paused = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Ends parked long-polls: the client gone, or a request behind them (parked_waits.py).
        self._parked: ParkedWaitEnds | None = None
        self._context: contextvars.Context | None = None
        # Writes responses holding file regions (plaintext sockets only; None otherwise).
        self._sender: DirectSender | None = None

    @property
    def worker(self) -> asyncio.Future[Any] | None:
        """Everything in flight as one awaitable (Broker.stop cancels and awaits it)."""
        if not self._in_flight:
            return None
        return asyncio.gather(*self._in_flight, return_exceptions=True)

    # -------------------------------------------------------------- transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the Transport interface without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.limits is not None:
            ip = str(peer[0]) if peer else "?"
            refused = self.limits.admit(ip)
            if refused is not None:
                log.warning("refusing connection from %s: %s", self.peer, refused)
                self._closed = True
                self.transport.close()
                return
            self._admitted_ip = ip
            self.last_active_ms = self.limits.clock()
        self.connections.add(self)
        self._loop = asyncio.get_running_loop()
        self._parked = ParkedWaitEnds(self._loop.create_future(), lambda: bool(self._frames))
        self._context = context_for_connection(self._parked)
        self._context.run(CONNECTION_SEQ.set, next_connection_seq())
        if self.session_factory is not None:
            self.session = self.session_factory(transport)
        self._sender = self._direct_sender(self.transport, self._loop)
        if self.session is not None or self._sender is not None:
            self._dispatch = partial(
                self.dispatcher.dispatch, session=self.session, file_regions=self._sender is not None
            )

    def _direct_sender(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> DirectSender | None:
        """A sender of file regions when the bytes may go to the socket as they are: a
        stream socket without TLS, on a system with sendfile (the fallback when no pipe is had)."""
        if not hasattr(os, "sendfile") or transport.get_extra_info("sslcontext") is not None:
            return None
        if self.session is not None and self.session.listener.uses_tls:
            return None
        sock = transport.get_extra_info("socket")
        if sock is None or sock.type != socket.SOCK_STREAM:
            return None
        return DirectSender(loop, transport, sock.fileno(), self._sent, self._send_failed)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._own is not None:
            return memoryview(self._own)[self._own_filled :]
        return _scratch_view()

    def buffer_updated(self, nbytes: int) -> None:
        if self._own is not None:
            if not self._closed:
                self._own_filled += nbytes
                self._own_done()
                self._received()
            return
        self.data_received(_scratch_view()[:nbytes])

    def _own_done(self) -> None:
        own = self._own
        if own is not None and self._own_filled == len(own):
            self._frames.append(own)
            self._queued_bytes += len(own)
            self._own = None

    def data_received(self, data: bytes | bytearray | memoryview) -> None:
        """Frames out of ``data`` (what was read after what came before)."""
        if self._closed:
            return
        if self._own is not None:  # data handed over, not read into get_buffer's view
            take = min(len(self._own) - self._own_filled, len(data))
            self._own[self._own_filled : self._own_filled + take] = data[:take]
            self._own_filled += take
            self._own_done()
            data = data[take:]
            if self._own is not None or not data:
                self._received()
                return
        if self._partial:
            self._partial += data
            buf: bytes | bytearray | memoryview = self._partial
        else:
            buf = data
        start = 0
        end = len(buf)
        frames = self._frames
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_request_bytes:
                self.close(f"request size {size} is outside 0..{self.max_request_bytes} (socket.request.max.bytes)")
                return
            if end - start - 4 < size:
                if size >= _OWN_BUFFER_BYTES:
                    # Received straight into its own buffer from here on (get_buffer).
                    own = self._own = bytearray(size)
                    self._own_filled = end - start - 4
                    own[: self._own_filled] = buf[start + 4 : end]
                    start = end
                break
            frames.append(bytearray(buf[start + 4 : start + 4 + size]))
            self._queued_bytes += size
            start += 4 + size
        # What is left is the start of the next frame: kept (a copy: ``data`` may be the scratch).
        self._partial = bytearray(buf[start:end]) if start < end else bytearray()
        self._received()

    def _received(self) -> None:
        if self.limits is not None:
            self.last_active_ms = self.limits.clock()
        self._pump()
        frames = self._frames
        too_much = len(frames) >= _MAX_QUEUED or self._queued_bytes >= _MAX_QUEUED_BYTES
        if too_much and not self._reading_paused and self.transport and not self._closed:
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._eof = True
        if self._parked is not None:
            self._parked.signal_gone()  # parked long-polls answer now with what they have
        self._pump()
        if self.session is not None and self.session.listener.uses_tls:
            return None  # TLS cannot half-close: the transport closes itself
        return True  # keep the transport open until queued responses are written

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._admitted_ip is not None and self.limits is not None:
            self.limits.release(self._admitted_ip)
            self._admitted_ip = None
        self.connections.discard(self)
        if self._parked is not None:
            self._parked.signal_gone()
        self._drop_pending()
        if self._sender is not None:
            self._sender.abandon()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()

    # -------------------------------------------------------------- processing

    def _pump(self) -> None:
        """Start every request the ordering rule (module docstring) allows to start now."""
        if self._closed:
            return
        frames = self._frames
        in_flight = self._in_flight
        sender = self._sender
        sending = sender is not None and sender.busy
        while frames and not self._writing_paused and not sending and len(in_flight) < _MAX_IN_FLIGHT:
            frame = frames[0]
            pipelined = len(frame) >= 2 and _API_KEY.unpack_from(frame)[0] in PIPELINED_APIS
            if in_flight and not (pipelined and self._in_flight_pipelined):
                break
            if in_flight and self._in_flight_bytes >= _MAX_IN_FLIGHT_BYTES:
                break
            frames.popleft()
            self._queued_bytes -= len(frame)
            self._in_flight_sizes.append(len(frame))
            self._in_flight_bytes += len(frame)
            assert self._loop is not None
            task = self._loop.create_task(self._dispatch(frame, self.peer), context=self._context)
            task.add_done_callback(self._on_done)
            in_flight.append(task)
            # Only reached with something in flight when all of it is pipelined.
            self._in_flight_pipelined = pipelined
        if frames and in_flight and self._parked is not None:
            self._parked.signal_request_behind()  # a parked long-poll answers now
        drained = len(frames) < _MAX_QUEUED // 2 and self._queued_bytes < _MAX_QUEUED_BYTES // 2
        if self._reading_paused and drained and self.transport:
            self._reading_paused = False
            self.transport.resume_reading()
        if self._eof and not frames and not in_flight and not sending:
            self.close(None)

    def _on_done(self, task: asyncio.Task[Buffers | None]) -> None:
        if self._closed:
            if not task.cancelled():
                task.exception()  # nobody will write it: keep asyncio from logging it as lost
            return
        if len(self._in_flight) == 1 and self._in_flight[0] is task and not self._write_scheduled:
            # The only request in flight: nothing could join its write, so no extra turn.
            self._write_ready()
            return
        # Deferred one loop turn so responses finishing together share one write.
        if not self._write_scheduled and self._loop is not None:
            self._write_scheduled = True
            self._loop.call_soon(self._write_ready)

    def _write_ready(self) -> None:
        """Write the responses now ready at the head of the line, in order, then start more."""
        self._write_scheduled = False
        if self._closed:
            return
        in_flight = self._in_flight
        out: Buffers = []
        failure: str | None = None
        close_delay_s = 0.0
        while in_flight and in_flight[0].done():
            task = in_flight.popleft()
            self._in_flight_bytes -= self._in_flight_sizes.popleft()
            if task.cancelled():
                failure = "request cancelled"
                break
            exc = task.exception()
            if exc is not None:
                failure = str(exc) if isinstance(exc, CloseConnection) else f"internal error: {exc!r}"
                if isinstance(exc, CloseConnection) and exc.response:
                    out.extend(exc.response)  # answered, then closed (a failed SASL authentication)
                    close_delay_s = exc.close_delay_s
                break
            parts = task.result()
            if parts:
                out.extend(parts)
        if out and self.transport is not None:
            sender = self._sender
            if sender is not None and (sender.busy or any(part.__class__ is FileRegion for part in out)):
                sender.send(out)
            else:
                self.transport.writelines(cast(list[bytes | bytearray | memoryview], out))  # no regions
            if self.limits is not None:
                self.last_active_ms = self.limits.clock()
        if failure is not None:
            if close_delay_s and self._loop is not None:
                # Serve nothing more, but let the client read the answer before the close.
                self._closed = True
                self._drop_pending()
                self._loop.call_later(close_delay_s, self.close, failure)
            else:
                self.close(failure)
            return
        self._pump()

    def _sent(self) -> None:
        """The direct sender, after waiting for the socket, has written all it held:
        requests may start again."""
        self._pump()

    def _send_failed(self, reason: str) -> None:
        self.close(reason)

    @property
    def busy(self) -> bool:
        """Requests read and not yet answered (an idle sweep leaves such a connection be;
        one whose client stopped reading is closed, whoever holds the unsent bytes)."""
        return bool(self._frames or self._in_flight)

    def _drop_pending(self) -> None:
        self._frames.clear()
        self._queued_bytes = 0
        in_flight, self._in_flight = self._in_flight, deque()
        self._in_flight_sizes.clear()
        self._in_flight_bytes = 0
        for task in in_flight:
            task.cancel()

    def close(self, reason: str | None) -> None:
        if reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        self._drop_pending()
        if self._sender is not None:
            self._sender.abandon()  # a close with nothing left to write, or one that gives up on it
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
