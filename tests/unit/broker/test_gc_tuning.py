"""ServingGC: what ``slipstream serve`` does to the collector, and that it is undone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from slipstream.broker.gc_tuning import YOUNG_THRESHOLD, ServingGC


@pytest.fixture
def gc_state() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def test_apply_freezes_the_heap_and_raises_the_young_threshold(gc_state: None) -> None:
    before = gc.get_threshold()
    tuning = ServingGC()
    tuning.apply()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
    assert gc.isenabled()


def test_restore_undoes_apply_and_both_are_idempotent(gc_state: None) -> None:
    before = gc.get_threshold()
    tuning = ServingGC()
    tuning.restore()  # nothing applied: no change
    assert gc.get_threshold() == before
    tuning.apply()
    tuning.apply()
    tuning.restore()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    tuning.restore()
    assert gc.get_threshold() == before


async def test_serve_forever_applies_and_restores(gc_state: None) -> None:
    import asyncio

    from slipstream.broker.broker import Broker

    before = gc.get_threshold()
    broker = Broker(storage="memory", port=0)
    task = asyncio.ensure_future(broker.serve_forever())
    for _ in range(200):
        if gc.get_threshold()[0] == YOUNG_THRESHOLD:
            break
        await asyncio.sleep(0.01)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
