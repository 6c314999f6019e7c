"""The bookkeeping of direct_sender.py: what to write next, and how far writes got."""

from __future__ import annotations

from slipstream.broker import send_queue
from slipstream.broker.send_queue import SendQueue
from slipstream.protocol.file_region import FileRegion


class File:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def fileno(self) -> int:
        return 99

    def pread(self, size: int, offset: int) -> bytes:
        return self.data[offset : offset + size]


def contents(item: FileRegion | list[bytes | bytearray | memoryview]) -> bytes:
    if isinstance(item, FileRegion):
        return item.read()
    return b"".join(bytes(b) for b in item)


def drain(queue: SendQueue, write_sizes: list[int]) -> bytes:
    """Write what next_write offers, each write taking at most the next size."""
    out = b""
    i = 0
    while queue:
        offered = contents(queue.next_write())
        took = offered[: write_sizes[i % len(write_sizes)]]
        i += 1
        out += took
        queue.sent(len(took))
    return out


def test_runs_of_bytes_between_regions_in_order() -> None:
    file = File(bytes(range(256)) * 4)
    queue = SendQueue()
    queue.add([b"head", bytearray(b"er"), FileRegion(file, 10, 100), b"", memoryview(b"mid"), FileRegion(file, 500, 7)])
    queue.add([b"tail"])
    assert queue.pending_bytes == 4 + 2 + 100 + 3 + 7 + 4
    first = queue.next_write()
    assert isinstance(first, list) and contents(first) == b"header"
    queue.sent(6)
    region = queue.next_write()
    assert isinstance(region, FileRegion) and (region.offset, region.length) == (10, 100)
    queue.sent(30)  # a short sendfile: the rest of the region is offered next
    rest = queue.next_write()
    assert isinstance(rest, FileRegion) and (rest.offset, rest.length) == (40, 70)
    queue.sent(70)
    assert contents(queue.next_write()) == b"mid"  # the empty part was never queued
    queue.sent(3)
    assert contents(queue.next_write()) == file.data[500:507]
    queue.sent(7)
    assert contents(queue.next_write()) == b"tail"
    queue.sent(4)
    assert not queue and queue.pending_bytes == 0


def test_any_split_of_the_writes_sends_everything_once() -> None:
    file = File(bytes(range(256)) * 8)
    parts = [b"a" * 5, FileRegion(file, 0, 300), b"b" * 7, b"c" * 9, FileRegion(file, 1000, 50), b"d"]
    expected = b"a" * 5 + file.data[:300] + b"b" * 7 + b"c" * 9 + file.data[1000:1050] + b"d"
    for sizes in ([1], [3, 1, 7], [64], [10_000], [2, 299, 5]):
        queue = SendQueue()
        queue.add(parts)
        assert drain(queue, sizes) == expected


def test_a_gathered_write_offers_at_most_max_gather_parts() -> None:
    queue = SendQueue()
    queue.add([b"x"] * (send_queue.MAX_GATHER + 5))
    first = queue.next_write()
    assert isinstance(first, list) and len(first) == send_queue.MAX_GATHER
    queue.sent(send_queue.MAX_GATHER)
    assert contents(queue.next_write()) == b"x" * 5


def test_clear_forgets_everything() -> None:
    queue = SendQueue()
    queue.add([b"abc", b"def"])
    queue.sent(4)
    queue.clear()
    assert not queue and queue.pending_bytes == 0
    queue.add([b"gh"])
    assert contents(queue.next_write()) == b"gh"
