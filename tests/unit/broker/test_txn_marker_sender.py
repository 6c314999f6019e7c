"""The marker sender's routing and retries, over a fake transport and a recorded sleep."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from slipstream.broker.txn_marker_sender import MarkerRoutes, route, send_markers
from slipstream.broker.txn_markers import TxnMarker
from slipstream.protocol.errors import ErrorCode

E = ErrorCode
ME = 1
A0, A1, A2, B0 = ("a", 0), ("a", 1), ("a", 2), ("b", 0)
OFFSETS = ("__consumer_offsets", 4)


@dataclass
class FakeTransport:
    """Leaders by partition; each broker answers from a script (per partition: the
    errors of its successive writes, then NONE); ``down`` brokers raise."""

    leaders: dict[tuple[str, int], int | None]
    scripts: dict[tuple[int, tuple[str, int]], list[int]] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    calls: list[tuple[int, tuple[tuple[str, int], ...]]] = field(default_factory=list)
    # Called after every write: a test moves leaders here.
    after_call: list[object] = field(default_factory=list)

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition))

    async def write_here(self, marker: TxnMarker) -> dict[tuple[str, int], int]:
        return self._answer(ME, marker)

    async def send(self, node_id: int, marker: TxnMarker) -> dict[tuple[str, int], int]:
        assert node_id != ME
        return self._answer(node_id, marker)

    def _answer(self, node: int, marker: TxnMarker) -> dict[tuple[str, int], int]:
        self.calls.append((node, marker.partitions))
        if node in self.down:
            raise ConnectionError(f"broker {node} is down")
        out = {}
        for tp in marker.partitions:
            script = self.scripts.get((node, tp), [])
            out[tp] = script.pop(0) if script else E.NONE
        return out


class Sleeps:
    def __init__(self, on_sleep: object = None) -> None:
        self.delays: list[float] = []
        self.on_sleep = on_sleep

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if callable(self.on_sleep):
            self.on_sleep()


def marker(*partitions: tuple[str, int]) -> TxnMarker:
    return TxnMarker(producer_id=7, producer_epoch=2, commit=True, coordinator_epoch=5, partitions=partitions)


def test_route_groups_partitions_by_leader() -> None:
    leaders = {A0: ME, A1: 2, A2: 3, B0: 2, OFFSETS: ME}
    routes = route([B0, A2, A1, A0, OFFSETS, ("c", 0)], lambda t, p: leaders.get((t, p)), ME)
    assert routes == MarkerRoutes(local=(OFFSETS, A0), remote={2: (A1, B0), 3: (A2,)}, leaderless=(("c", 0),))


async def test_one_request_per_leader_and_local_partitions_written_here() -> None:
    transport = FakeTransport({A0: ME, A1: 2, B0: 2, A2: 3})
    sleeps = Sleeps()
    outcome = await send_markers(marker(A0, A1, A2, B0), transport, local_node=ME, sleep=sleeps)
    assert outcome is not None and outcome.written == {A0, A1, A2, B0} and outcome.rounds == 1
    assert sorted(transport.calls) == [(ME, (A0,)), (2, (A1, B0)), (3, (A2,))]
    assert sleeps.delays == []


async def test_a_moved_leader_is_asked_next_round() -> None:
    transport = FakeTransport({A0: 2, A1: 2}, scripts={(2, A1): [E.NOT_LEADER_OR_FOLLOWER]})
    sleeps = Sleeps(on_sleep=lambda: transport.leaders.update({A1: 3}))
    outcome = await send_markers(marker(A0, A1), transport, local_node=ME, sleep=sleeps)
    assert outcome is not None and outcome.written == {A0, A1} and outcome.rounds == 2
    assert transport.calls == [(2, (A0, A1)), (3, (A1,))]
    assert sleeps.delays == [0.1]


async def test_a_partition_moving_here_is_written_locally() -> None:
    transport = FakeTransport({A0: 2}, scripts={(2, A0): [E.NOT_LEADER_OR_FOLLOWER]})
    sleeps = Sleeps(on_sleep=lambda: transport.leaders.update({A0: ME}))
    await send_markers(marker(A0), transport, local_node=ME, sleep=sleeps)
    assert transport.calls == [(2, (A0,)), (ME, (A0,))]


async def test_an_unreachable_broker_is_retried_with_a_growing_backoff() -> None:
    transport = FakeTransport({A0: ME, A1: 2}, down={2})
    rounds = iter(range(100))

    def recover() -> None:
        if next(rounds) == 4:
            transport.down.clear()

    sleeps = Sleeps(on_sleep=recover)
    outcome = await send_markers(
        marker(A0, A1), transport, local_node=ME, sleep=sleeps, first_retry_s=0.1, max_retry_s=0.5
    )
    assert outcome is not None and outcome.written == {A0, A1}
    assert sleeps.delays == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert transport.calls.count((ME, (A0,))) == 1  # written once, never again
    assert transport.calls.count((2, (A1,))) == 6


async def test_a_partition_without_a_leader_waits() -> None:
    transport = FakeTransport({A0: None})
    sleeps = Sleeps(on_sleep=lambda: transport.leaders.update({A0: 3}))
    outcome = await send_markers(marker(A0), transport, local_node=ME, sleep=sleeps)
    assert outcome is not None and outcome.written == {A0}
    assert transport.calls == [(3, (A0,))]
    assert sleeps.delays == [0.1]


@pytest.mark.parametrize(
    "error", [E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED]
)
async def test_a_refusal_for_good_ends_the_partition(error: int) -> None:
    transport = FakeTransport({A0: 2, A1: 2}, scripts={(2, A0): [error]})
    sleeps = Sleeps()
    outcome = await send_markers(marker(A0, A1), transport, local_node=ME, sleep=sleeps)
    assert outcome is not None and outcome.written == {A1} and outcome.given_up == {A0: error}
    assert sleeps.delays == []


async def test_storage_errors_are_retried() -> None:
    transport = FakeTransport({OFFSETS: ME}, scripts={(ME, OFFSETS): [E.KAFKA_STORAGE_ERROR, E.NOT_LEADER_OR_FOLLOWER]})
    outcome = await send_markers(marker(OFFSETS), transport, local_node=ME, sleep=Sleeps())
    assert outcome is not None and outcome.written == {OFFSETS} and outcome.rounds == 3


async def test_a_job_that_stops_being_current_stops_sending() -> None:
    transport = FakeTransport({A0: 2}, down={2})
    current = [True]
    sleeps = Sleeps(on_sleep=lambda: current.__setitem__(0, len(sleeps.delays) < 2))
    outcome = await send_markers(marker(A0), transport, local_node=ME, is_current=lambda: current[0], sleep=sleeps)
    assert outcome is None
    assert len(transport.calls) == 2
