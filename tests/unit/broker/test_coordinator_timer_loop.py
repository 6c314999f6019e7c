"""The coordinator timer loop and the ordered lock the group adapter's commit path relies on."""

from __future__ import annotations

import asyncio
import contextlib

from slipstream.broker.coordinator_timers import CoordinatorTimerLoop
from slipstream.broker.ordered_lock import OrderedLock
from slipstream.coordinator import CoordinatorResult, ManualTimer


def _recording_loop(now: list[int]) -> tuple[ManualTimer, CoordinatorTimerLoop, list[str], asyncio.Event]:
    timer = ManualTimer(clock=lambda: now[0])
    fired: list[str] = []
    ran = asyncio.Event()

    async def run_due() -> None:
        while (expired := timer.pop_expired(now[0])) is not None:
            fired.append(expired.key)
        ran.set()

    return timer, CoordinatorTimerLoop(timer, lambda: now[0], run_due), fired, ran


async def test_a_timer_already_due_is_run_without_sleeping() -> None:
    now = [1_000]
    timer, loop, fired, ran = _recording_loop(now)
    timer.schedule("session", 0, lambda _now: CoordinatorResult())
    task = asyncio.get_running_loop().create_task(loop.run())
    try:
        await ran.wait()
        assert fired == ["session"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_poke_wakes_a_loop_that_had_nothing_to_wait_for() -> None:
    now = [1_000]
    timer, loop, fired, ran = _recording_loop(now)
    task = asyncio.get_running_loop().create_task(loop.run())
    try:
        await asyncio.sleep(0)  # the loop finds no deadline and waits
        assert fired == []
        timer.schedule("expire", 0, lambda _now: CoordinatorResult())
        loop.poke()
        await ran.wait()
        assert fired == ["expire"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_ordered_lock_stays_busy_between_a_release_and_its_waiter_waking() -> None:
    lock = OrderedLock()
    order: list[str] = []

    async def waiter() -> None:
        async with lock:
            order.append("waiter")

    async with lock:
        task = asyncio.get_running_loop().create_task(waiter())
        await asyncio.sleep(0)  # the waiter now waits for the lock
        assert lock.busy()
    # Released, the waiter not yet run: a commit must not take the lock-free path here.
    assert lock.busy()
    await task
    assert order == ["waiter"]
    assert not lock.busy()
