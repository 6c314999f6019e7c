"""Sending one transaction's markers to each partition's current leader, until written.

A marker job of the transaction coordinator names partitions anywhere in a cluster:
data partitions and the ``__consumer_offsets`` partition of the offsets it commits.
Each round routes every partition still to do by its leader as the cluster says
now: this broker's are written here, the others go out as one WriteTxnMarkers
request per leader, and a partition without a live leader waits for the next round.
A partition is done once its marker is written, or refused for good (the topic is
gone, a newer producer epoch or coordinator wrote past it). Anything else - the
leader moved (NOT_LEADER_OR_FOLLOWER), a connection lost, a storage error - is tried
again after a backoff, routed anew. Rounds stop when nothing is left, or when the
job stops being this coordinator's (the transaction's partition moved to another
broker, which sends the markers itself).

The routing and the retries are here with the I/O injected (``MarkerTransport`` and
``sleep``), so unit tests drive them with a fake transport; the broker's transport is
``txn_markers.BrokerMarkerTransport``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.errors import ErrorCode
from .txn_markers import TxnMarker

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

FIRST_RETRY_S = 0.1
MAX_RETRY_S = 2.0
# A marker refused for one of these will never be accepted: the partition is done.
# (A deleted topic; a newer producer epoch or coordinator already wrote past it.)
GIVE_UP = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)


class MarkerTransport(Protocol):
    def leader_of(self, topic: str, partition: int) -> int | None:
        """The node id leading the partition now, or None while it has no live leader."""
        ...

    async def write_here(self, marker: TxnMarker) -> dict[TopicPartition, int]:
        """Write ``marker`` into partitions this broker leads; an error code per partition."""
        ...

    async def send(self, node_id: int, marker: TxnMarker) -> dict[TopicPartition, int]:
        """WriteTxnMarkers to broker ``node_id``; an error code per partition (raises when
        the request could not be made or answered)."""
        ...


@dataclass(frozen=True, slots=True)
class MarkerRoutes:
    """Where one round sends each partition."""

    local: tuple[TopicPartition, ...] = ()
    remote: dict[int, tuple[TopicPartition, ...]] = field(default_factory=dict)
    leaderless: tuple[TopicPartition, ...] = ()


def route(
    partitions: Iterable[TopicPartition], leader_of: Callable[[str, int], int | None], local_node: int
) -> MarkerRoutes:
    local: list[TopicPartition] = []
    remote: dict[int, list[TopicPartition]] = {}
    leaderless: list[TopicPartition] = []
    for tp in sorted(partitions):
        leader = leader_of(*tp)
        if leader is None:
            leaderless.append(tp)
        elif leader == local_node:
            local.append(tp)
        else:
            remote.setdefault(leader, []).append(tp)
    return MarkerRoutes(tuple(local), {node: tuple(tps) for node, tps in remote.items()}, tuple(leaderless))


@dataclass(slots=True)
class MarkerOutcome:
    """What the rounds so far did: partitions written, given up (with the error)."""

    written: set[TopicPartition] = field(default_factory=set)
    given_up: dict[TopicPartition, int] = field(default_factory=dict)
    rounds: int = 0


async def send_markers(
    marker: TxnMarker,
    transport: MarkerTransport,
    *,
    local_node: int,
    is_current: Callable[[], bool] = lambda: True,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    first_retry_s: float = FIRST_RETRY_S,
    max_retry_s: float = MAX_RETRY_S,
    label: str = "",
) -> MarkerOutcome | None:
    """Rounds until every partition of ``marker`` is done; the outcome, or None when the
    job stopped being current first (its markers are someone else's to send now)."""
    todo = set(marker.partitions)
    outcome = MarkerOutcome()
    delay = first_retry_s
    while todo:
        if not is_current():
            return None
        outcome.rounds += 1
        routes = route(todo, transport.leader_of, local_node)
        sends: list[tuple[tuple[TopicPartition, ...], Awaitable[dict[TopicPartition, int]]]] = []
        if routes.local:
            sends.append((routes.local, transport.write_here(_for(marker, routes.local))))
        for node, tps in routes.remote.items():
            sends.append((tps, transport.send(node, _for(marker, tps))))
        answers = await asyncio.gather(*(call for _, call in sends), return_exceptions=True)
        for (tps, _), answer in zip(sends, answers, strict=True):
            if isinstance(answer, BaseException):
                if isinstance(answer, asyncio.CancelledError):
                    raise answer
                log.info("transaction %s: markers for %s not sent: %r (retrying)", label, list(tps), answer)
                continue
            for tp in tps:
                error = answer.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if error == ErrorCode.NONE:
                    todo.discard(tp)
                    outcome.written.add(tp)
                elif error in GIVE_UP:
                    log.warning("transaction %s: %s-%d refused its marker (error %s); skipping it", label, *tp, error)
                    todo.discard(tp)
                    outcome.given_up[tp] = error
        if todo:
            await sleep(delay)
            delay = min(delay * 2, max_retry_s)
    return outcome


def _for(marker: TxnMarker, partitions: tuple[TopicPartition, ...]) -> TxnMarker:
    return TxnMarker(marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, partitions)


__all__ = ["GIVE_UP", "MarkerOutcome", "MarkerRoutes", "MarkerTransport", "route", "send_markers"]
