"""GroupCommitter rounds over logs that commit their whole store at once (SharedCommitLog).

A round flushes such a log only if its writes from before the round are not committed
yet: one commit per round for every log of a store, however many logs the round holds,
and writes queued while the round runs are left to the next round.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from slipstream.broker.durability import GroupCommitter
from slipstream.log.api import PartitionLog, SharedCommitLog


class Store:
    """A store whose commit takes every log's queued writes (as PostgresLogStore.commit)."""

    def __init__(self) -> None:
        self.logs: list[SharedLog] = []
        self.commits = 0
        self.during_commit: list[SharedLog] = []  # logs written to while the next commit runs
        self.refuse: set[SharedLog] = set()
        self.gate = threading.Event()  # commits wait for it: every waiter has asked by then
        self.gate.set()

    def commit(self) -> None:
        assert self.gate.wait(10)
        self.commits += 1
        for log in self.logs:
            if log not in self.refuse:
                log.committed = log.queued
        for log in self.during_commit:  # appends racing with this commit: not taken by it
            log.queued += 1
        self.during_commit = []


class SharedLog:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.queued = 0
        self.committed = 0
        self.flushes = 0
        store.logs.append(self)

    def append(self) -> None:
        self.queued += 1

    @property
    def queued_writes(self) -> int:
        return self.queued

    @property
    def committed_writes(self) -> int:
        return self.committed

    def flush(self) -> None:
        self.flushes += 1
        self.store.commit()
        if self in self.store.refuse:
            raise OSError("refused")


def as_partition_log(log: SharedLog) -> PartitionLog:
    return log  # type: ignore[return-value]  # the committer uses flush and the SharedCommitLog members only


async def sync_all(committer: GroupCommitter, logs: list[SharedLog]) -> list[BaseException | None]:
    """Every log's sync, the store's commits held until all of them have asked (the
    first may start a round alone: the worker starts with the first waiter)."""
    store = logs[0].store
    store.gate.clear()
    waiting = asyncio.gather(*(committer.sync(as_partition_log(log)) for log in logs), return_exceptions=True)
    for _ in range(3):
        await asyncio.sleep(0)
    store.gate.set()
    return await waiting


def test_a_shared_log_is_recognised() -> None:
    assert isinstance(SharedLog(Store()), SharedCommitLog)


def test_one_commit_covers_every_log_of_the_store() -> None:
    store = Store()
    logs = [SharedLog(store) for _ in range(6)]
    for log in logs:
        log.append()
    assert asyncio.run(sync_all(GroupCommitter(), logs)) == [None] * 6
    assert store.commits == 1
    assert sum(log.flushes for log in logs) == 1
    assert all(log.committed == log.queued for log in logs)


def test_writes_queued_during_the_round_do_not_cost_it_another_commit() -> None:
    store = Store()
    logs = [SharedLog(store) for _ in range(3)]
    for log in logs:
        log.append()
    store.during_commit = list(logs)  # every log gets a write while the first commit runs
    assert asyncio.run(sync_all(GroupCommitter(), logs)) == [None] * 3
    assert store.commits == 1
    assert all(log.queued == 2 and log.committed == 1 for log in logs)  # for the next round


def test_a_log_whose_writes_were_not_committed_is_flushed() -> None:
    store = Store()
    good, refused = SharedLog(store), SharedLog(store)
    store.refuse.add(refused)
    good.append()
    refused.append()
    good_result, refused_result = asyncio.run(sync_all(GroupCommitter(), [good, refused]))
    assert isinstance(refused_result, OSError)
    assert refused.flushes == 1
    assert good.committed == 1
    # In a round of its own (the worker started with it) it was stored; in the refused
    # one's round it hears the failure, as every waiter of a failed flush does.
    assert good_result is None or isinstance(good_result, OSError)


@pytest.mark.parametrize("logs_per_round", [1, 4])
def test_flushes_run_off_the_event_loop(logs_per_round: int) -> None:
    store = Store()
    logs = [SharedLog(store) for _ in range(logs_per_round)]
    threads: list[threading.Thread] = []
    real_commit = store.commit

    def recording_commit() -> None:
        threads.append(threading.current_thread())
        real_commit()

    store.commit = recording_commit  # type: ignore[method-assign]
    for log in logs:
        log.append()
    asyncio.run(sync_all(GroupCommitter(), logs))
    assert threads and threading.main_thread() not in threads


def test_a_round_waits_for_a_second_waiter_and_starts_when_it_comes() -> None:
    """round_wait_s: an idle committer's round waits for ``round_waiters`` waiters; the
    second one's arrival starts it (the wait here is far longer than the test runs)."""
    store = Store()
    first, second = SharedLog(store), SharedLog(store)
    committer = GroupCommitter(round_wait_s=3600, round_waiters=2)

    async def two_apart() -> None:
        first.append()
        waiting = asyncio.ensure_future(committer.sync(as_partition_log(first)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert committer._worker is None and not waiting.done()  # no round yet: waiting for company
        second.append()
        await asyncio.gather(waiting, committer.sync(as_partition_log(second)))

    asyncio.run(two_apart())
    assert store.commits == 1
    assert first.committed == second.committed == 1


def test_a_lone_waiter_gets_its_round_when_the_wait_ends() -> None:
    store = Store()
    log = SharedLog(store)
    log.append()
    asyncio.run(GroupCommitter(round_wait_s=0.001).sync(as_partition_log(log)))
    assert store.commits == 1 and log.committed == 1

