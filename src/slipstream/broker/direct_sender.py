"""Writing responses that hold file regions straight to a plaintext socket.

A Fetch answer's record batches can stay in their segment files (``FileRegion``) and
go out with ``os.sendfile``: page cache to socket in the kernel, where the transport
would need them copied into Python first. Neither asyncio's selector loop nor uvloop
sends a region as part of a transport's stream (uvloop has no ``loop.sendfile``), so a
connection hands such responses here, and this writes them to the socket itself:

- only when the transport has nothing buffered (what it holds was answered earlier,
  so it goes first);
- everything given after it here too, until all of it is written, so responses keep
  their order (the connection starts no request while this is busy, which bounds it);
- the in-memory parts between regions with one gathered write (``os.writev``);
- when the socket is full, it waits for it to be writable through a duplicate of the
  socket's descriptor (the loop refuses a second watcher on a transport's own one).

TLS connections never get here (the bytes must be encrypted in Python).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable

from ..protocol.codec import Part
from ..protocol.file_region import FileRegion
from .send_queue import SendQueue

log = logging.getLogger(__name__)


class DirectSender:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.WriteTransport,
        socket_fd: int,
        on_drained: Callable[[], None],
        on_failed: Callable[[str], None],
    ) -> None:
        self._loop = loop
        self._transport = transport
        self._fd = socket_fd
        self._on_drained = on_drained
        self._on_failed = on_failed
        self._queue = SendQueue()
        self._watch_fd = -1  # the duplicate the loop watches for writability (made at the first wait)
        self._watching = False

    @property
    def busy(self) -> bool:
        """Something is queued here: whatever comes next must be given here too."""
        return bool(self._queue)

    def send(self, parts: Iterable[Part]) -> None:
        self._queue.add(parts)
        if not self._watching:
            self._advance()

    def abandon(self) -> None:
        """Drop what is queued and stop watching (the connection is closing or gone)."""
        self._queue.clear()
        self._stop_watching()
        fd, self._watch_fd = self._watch_fd, -1
        if fd >= 0:
            os.close(fd)

    def _advance(self) -> None:
        queue = self._queue
        if self._transport.is_closing():
            self.abandon()
            return
        if self._transport.get_write_buffer_size():
            self._watch()  # the transport's earlier bytes go first
            return
        fd = self._fd
        try:
            while queue:
                item = queue.next_write()
                if isinstance(item, FileRegion):
                    count = os.sendfile(fd, item.file.fileno(), item.offset, item.length)
                    if not count:
                        # The file ended inside the region: the frame cannot be completed.
                        raise OSError(f"file ended inside {item!r}")
                else:
                    count = os.writev(fd, item)
                queue.sent(count)
        except BlockingIOError:
            self._watch()
            return
        except OSError as exc:
            self.abandon()
            self._on_failed(f"sending a response failed: {exc}")
            return
        self._stop_watching()
        self._on_drained()

    def _watch(self) -> None:
        if not self._watching:
            if self._watch_fd < 0:
                self._watch_fd = os.dup(self._fd)
            self._loop.add_writer(self._watch_fd, self._advance)
            self._watching = True

    def _stop_watching(self) -> None:
        if self._watching:
            self._watching = False
            self._loop.remove_writer(self._watch_fd)
