"""Admin requests that touch many topics yield to the event loop as they go.

Creating or deleting a topic opens or removes its partitions' files and rewrites the
topic metadata file (with an fsync). A request naming thousands of topics done in one
go would hold the event loop, and every other client, for as long as it takes. The
handlers work in slices instead: after every ``SLICE`` topics the metadata is saved
once for the slice and the loop serves other connections before the next slice. The
response goes out after the last slice is saved.
"""

from __future__ import annotations

import asyncio

from .topics import TopicManager

SLICE = 25


class Slices:
    def __init__(self, topics: TopicManager) -> None:
        self.topics = topics
        self._done = 0
        self._unsaved = False

    def changed(self) -> None:
        """A topic was created or deleted without saving the metadata."""
        self._unsaved = True

    async def step(self) -> None:
        """Call after each topic: at a slice's end, save and let other requests run."""
        self._done += 1
        if self._done % SLICE == 0:
            self.finish()
            await asyncio.sleep(0)

    def finish(self) -> None:
        if self._unsaved:
            self.topics.save_metadata()
            self._unsaved = False
