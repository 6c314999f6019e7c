"""Writing responses that hold file regions straight to a plaintext socket.

A Fetch answer's record batches can stay in their segment files (``FileRegion``) and
go out by ``os.splice`` through a pipe: page cache to socket in the kernel, where the
transport would need them copied into Python first. Neither asyncio's selector loop
nor uvloop sends a region as part of a transport's stream (uvloop has no
``loop.sendfile``), so a connection hands such responses here, and this writes them
to the socket itself:

- only when the transport has nothing buffered (what it holds was answered earlier,
  so it goes first);
- everything given after it here too, until all of it is written, so responses keep
  their order (the connection starts no request while this is busy, which bounds it);
- the in-memory parts between regions with one gathered write (``os.writev``);
- a region through a pipe of up to 1 MiB, made for the busy spell and closed after it
  (bytes spliced into it are sent before anything else). Measured on loopback with
  1 MiB answers, a broker sending with ``os.sendfile`` (its internal pipe moves 64 KiB
  at a time) was preempted 4-7 times as often as with the copy it replaces, through a
  1 MiB pipe about twice as often; hence the pipe, and the floor on the answer size in
  handlers/fetch.py. ``os.sendfile`` is the fallback when no pipe can be had;
- when the socket is full, it waits for it to be writable through a duplicate of the
  socket's descriptor (the loop refuses a second watcher on a transport's own one).

TLS connections never get here (the bytes must be encrypted in Python).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable, Iterable

from ..protocol.codec import Part
from ..protocol.file_region import FileRegion
from .send_queue import SendQueue

PIPE_BYTES = 1 << 20  # asked for; a pipe may get less (fs.pipe-max-size, per-user limits)
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_SPLICE_FLAGS = getattr(os, "SPLICE_F_NONBLOCK", 2)


class DirectSender:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.WriteTransport,
        socket_fd: int,
        on_drained: Callable[[], None],
        on_failed: Callable[[str], None],
    ) -> None:
        """``on_drained``: everything is written after a wait for the socket (``send``
        returning with nothing busy needs no call). ``on_failed(reason)``: a write failed,
        what was queued is dropped."""
        self._loop = loop
        self._transport = transport
        self._fd = socket_fd
        self._on_drained = on_drained
        self._on_failed = on_failed
        self._queue = SendQueue()
        self._watch_fd = -1  # the duplicate the loop watches for writability (made at the first wait)
        self._watching = False
        # (read end, write end, capacity) while busy with regions; -1s: none (yet, or to be had)
        self._pipe = (-1, -1, 0)
        self._in_pipe = 0  # bytes of the head region in the pipe, not yet in the socket

    @property
    def busy(self) -> bool:
        """Something is queued here: whatever comes next must be given here too."""
        return bool(self._queue)

    def send(self, parts: Iterable[Part]) -> None:
        self._queue.add(parts)
        if not self._watching:
            self._write()

    def abandon(self) -> None:
        """Drop what is queued and stop watching (the connection is closing or gone)."""
        self._queue.clear()
        self._stop_watching()
        self._close_pipe()
        fd, self._watch_fd = self._watch_fd, -1
        if fd >= 0:
            os.close(fd)

    def _writable(self) -> None:
        if self._write():
            self._on_drained()

    def _write(self) -> bool:
        """Write what the socket takes now; True once nothing is left to wait for."""
        queue = self._queue
        if self._transport.is_closing():
            self.abandon()
            return False
        if self._transport.get_write_buffer_size():
            self._watch()  # the transport's earlier bytes go first
            return False
        fd = self._fd
        try:
            while queue:
                item = queue.next_write()
                if isinstance(item, FileRegion):
                    count = self._send_region(item)
                else:
                    count = os.writev(fd, item)
                queue.sent(count)
        except BlockingIOError:
            self._watch()
            return False
        except OSError as exc:
            self.abandon()
            self._on_failed(f"sending a response failed: {exc}")
            return False
        self._stop_watching()
        self._close_pipe()
        return True

    def _send_region(self, region: FileRegion) -> int:
        """Bytes of ``region`` (the rest of the head) the socket took."""
        reader, writer, capacity = self._pipe
        if reader < 0:
            reader, writer, capacity = self._pipe = self._open_pipe()
            if reader < 0:
                count = os.sendfile(self._fd, region.file.fileno(), region.offset, region.length)
                if not count:
                    raise OSError(f"file ended inside {region!r}")
                return count
        if not self._in_pipe:
            self._in_pipe = os.splice(
                region.file.fileno(), writer, min(region.length, capacity), offset_src=region.offset, flags=_SPLICE_FLAGS
            )
            if not self._in_pipe:
                # The file ended inside the region: the frame cannot be completed.
                raise OSError(f"file ended inside {region!r}")
        count = os.splice(reader, self._fd, self._in_pipe, flags=_SPLICE_FLAGS)
        self._in_pipe -= count
        return count

    def _open_pipe(self) -> tuple[int, int, int]:
        try:
            reader, writer = os.pipe()
        except OSError:
            return (-1, -1, 0)  # out of descriptors: sendfile needs none
        try:
            capacity = fcntl.fcntl(writer, _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            capacity = 65536  # the default size, which a pipe keeps when refused a larger one
        return (reader, writer, capacity)

    def _close_pipe(self) -> None:
        reader, writer, _ = self._pipe
        if reader >= 0:
            os.close(reader)
            os.close(writer)
            self._pipe = (-1, -1, 0)
        self._in_pipe = 0

    def _watch(self) -> None:
        if not self._watching:
            if self._watch_fd < 0:
                self._watch_fd = os.dup(self._fd)
            self._loop.add_writer(self._watch_fd, self._writable)
            self._watching = True

    def _stop_watching(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_writer(self._watch_fd)
