"""Admin requests that touch many topics yield to the event loop as they go.

Creating or deleting a topic opens or removes its partitions' files, and each change
used to rewrite the topic metadata file (with an fsync). A request naming thousands
of topics done in one go held the event loop, and every other client, for as long as
it took (quadratic in the number of topics, through the rewrites). The handlers now
save the metadata once, after their last topic, and yield to the loop whenever a
slice of work has taken ``SLICE_S``, so another client's request (a few loop turns)
waits milliseconds, not the whole request. The response goes out after the save.
"""

from __future__ import annotations

import asyncio
import time

from .topics import TopicManager

SLICE_S = 0.005


class Slices:
    def __init__(self, topics: TopicManager) -> None:
        self.topics = topics
        self._unsaved = False
        self._since = time.perf_counter()

    def changed(self) -> None:
        """A topic was created or deleted without saving the metadata."""
        self._unsaved = True

    async def step(self) -> None:
        """Call after each topic: once a slice's time is used, let other requests run."""
        if time.perf_counter() - self._since >= SLICE_S:
            await asyncio.sleep(0)
            self._since = time.perf_counter()

    def finish(self) -> None:
        """Save the metadata of every change made so far (before answering)."""
        if self._unsaved:
            self.topics.save_metadata()
            self._unsaved = False
