"""ServingGC: what ``slipstream serve`` does to the collector, and that it is undone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from slipstream.broker.gc_tuning import YOUNG_THRESHOLD, ServingGC


@pytest.fixture
def gc_state() -> Iterator[None]:
    before = gc.get_threshold()
    callbacks = list(gc.callbacks)
    yield
    gc.set_threshold(*before)
    gc.unfreeze()
    gc.callbacks[:] = callbacks  # a test that never restores must not leave its hook behind


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


def test_a_slow_full_pass_is_logged_and_the_hook_goes_with_restore(
    gc_state: None, caplog: pytest.LogCaptureFixture
) -> None:
    now = [10.0]
    tuning = ServingGC(clock=lambda: now[0])
    tuning.apply()
    gc.disable()  # a real pass in the middle would call the hook too
    try:
        hook = gc.callbacks[-1]
        hook("start", {"generation": 2, "collected": 0, "uncollectable": 0})
        now[0] += 0.25
        with caplog.at_level("WARNING", logger="slipstream.broker.gc_tuning"):
            hook("stop", {"generation": 2, "collected": 7, "uncollectable": 0})
            hook("start", {"generation": 0, "collected": 0, "uncollectable": 0})
            now[0] += 5.0
            hook("stop", {"generation": 0, "collected": 1, "uncollectable": 0})  # young passes: not timed
            hook("start", {"generation": 2, "collected": 0, "uncollectable": 0})
            now[0] += 0.01
            hook("stop", {"generation": 2, "collected": 1, "uncollectable": 0})  # a quick full pass: quiet
        assert [r.getMessage() for r in caplog.records] == [
            "a full garbage-collector pass stalled the broker for 250 ms (7 objects collected)"
        ]
    finally:
        gc.enable()
        tuning.restore()
    assert hook not in gc.callbacks


def test_serve_turns_the_collector_on_at_once_and_freezes_the_start_up_heap_later(gc_state: None) -> None:
    # `slipstream serve` starts with the collector off (cli.main); serve_forever applies
    # the serving settings without the full pass, which runs FREEZE_AFTER_S later.
    gc.disable()
    try:
        before = gc.get_threshold()
        tuning = ServingGC()
        tuning.apply(freeze=False)
        assert gc.isenabled()
        # Until the freeze, counted from what was allocated while the collector was off.
        assert tuning.young_threshold >= YOUNG_THRESHOLD
        assert gc.get_threshold() == (tuning.young_threshold, before[1], before[2])
        assert gc.get_freeze_count() == 0
        tuning.freeze_start_up_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
        assert tuning.young_threshold == YOUNG_THRESHOLD
        tuning.freeze_start_up_heap()  # once only
        assert gc.get_freeze_count() == frozen
        tuning.restore()
        assert not gc.isenabled()  # back to what it was before apply
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_a_start_up_heap_past_the_threshold_gets_no_young_pass_before_the_freeze(gc_state: None) -> None:
    # As under `slipstream serve` with the admin listener: start-up leaves more than
    # YOUNG_THRESHOLD objects young while the collector is off. Switching it on must not
    # make the next allocations walk them all (the freeze pass does that once).
    gc.disable()
    try:
        start_up_heap = [[] for _ in range(YOUNG_THRESHOLD + 10_000)]
        young_passes = gc.get_stats()[0]["collections"]
        tuning = ServingGC()
        tuning.apply(freeze=False)
        assert tuning.young_threshold >= len(start_up_heap) + YOUNG_THRESHOLD
        serving = [[] for _ in range(1_000)]
        assert gc.get_stats()[0]["collections"] == young_passes
        tuning.freeze_start_up_heap()
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        tuning.restore()
        assert len(serving) == 1_000
    finally:
        gc.enable()


def test_freezing_before_apply_does_nothing(gc_state: None) -> None:
    tuning = ServingGC()
    tuning.freeze_start_up_heap()
    assert gc.get_freeze_count() == 0


async def test_serve_forever_freezes_the_start_up_heap_after_the_delay(
    gc_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from slipstream.broker import broker as broker_module
    from slipstream.protocol import record_batch

    monkeypatch.setattr(broker_module, "FREEZE_AFTER_S", 0.0)
    # As in a fresh process: the CRC module not loaded yet.
    monkeypatch.setattr(record_batch, "_crc32c", record_batch._crc32c_first_use)
    broker = broker_module.Broker(storage="memory", port=0)
    task = asyncio.ensure_future(broker.serve_forever())
    for _ in range(500):
        if gc.get_freeze_count() > 0:
            break
        await asyncio.sleep(0.01)
    assert gc.get_freeze_count() > 0
    # Loaded before the freeze, so the first produce does not pay its import.
    assert record_batch._crc32c is not record_batch._crc32c_first_use
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gc.get_freeze_count() == 0
