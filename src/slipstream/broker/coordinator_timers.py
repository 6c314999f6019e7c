"""The asyncio loop that runs a pure coordinator's timers when they come due.

The group and transaction adapters each keep one beside their coordinator's
``ManualTimer``: it sleeps until the earliest deadline, then has the adapter run what
is due on its ordered path. A deadline added later than the one slept for needs no
wake-up; only an earlier one does (``poke``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

from ..coordinator import ManualTimer


class CoordinatorTimerLoop:
    def __init__(
        self, timer: ManualTimer, clock: Callable[[], int], run_due: Callable[[], Awaitable[None]]
    ) -> None:
        self.timer = timer
        self.clock = clock
        # Called once a deadline has passed: pops and carries out the expired callbacks.
        self.run_due = run_due
        self._changed = asyncio.Event()
        # The deadline the loop sleeps until: only an earlier one needs to wake it.
        self._wake_at: float = -math.inf

    def poke(self) -> None:
        """Wake the loop if the timer's next deadline is earlier than the one it sleeps until."""
        deadline = self.timer.next_deadline()
        if deadline is not None and deadline < self._wake_at:
            self._changed.set()

    def wake(self) -> None:
        """Have the loop look at the timer again (e.g. once a load has armed timers)."""
        self._changed.set()

    async def run(self) -> None:
        while True:
            deadline = self.timer.next_deadline()
            self._changed.clear()
            if deadline is None:
                self._wake_at = math.inf
                await self._changed.wait()
                self._wake_at = -math.inf
                continue
            delay = (deadline - self.clock()) / 1000
            if delay > 0:
                self._wake_at = deadline
                # A plain loop timer setting the event: cheaper than wait_for's task and
                # timeout exception, and session timers can come due a thousand times a second.
                wake = asyncio.get_running_loop().call_later(delay, self._changed.set)
                try:
                    await self._changed.wait()
                finally:
                    wake.cancel()
                self._wake_at = -math.inf
                continue
            await self.run_due()
