"""Transaction markers: ending a producer's transaction on its data partitions.

The transaction coordinator (EndTxn, or an expired transaction) calls
:func:`write_txn_markers`; the WriteTxnMarkers handler is the same call for a
coordinator elsewhere, and for tools and tests. For each partition it checks the
marker against the producer state (a stale producer epoch is INVALID_PRODUCER_EPOCH,
an older coordinator epoch TRANSACTION_COORDINATOR_FENCED), enters an abort in the
aborted-transaction index (before the marker: see ``PartitionLog.add_aborted_txn``),
appends one control batch (Kafka's control record: key = version 0 + type, value =
version 0 + coordinator epoch; transactional and control attribute bits; the
producer's id and epoch), closes the producer's transaction so the LSO moves, wakes
waiting fetches and, under the fsync durability policy, returns once the markers are
fsynced (as an acks=all produce).

:func:`write_markers_here` is what this broker does with a marker naming any of its
partitions: data partitions as above, a ``__consumer_offsets`` partition through the
group coordinator (which replays its marker: the transaction's offsets commit or
vanish). ``BrokerMarkerTransport`` is how the coordinator's marker jobs reach
partitions (``txn_marker_sender.py``): here, or at another broker of the cluster
through ``peer_connections.py``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..coordinator import OFFSETS_TOPIC
from ..log.api import AbortedTxn, PartitionLog
from ..protocol.apis.write_txn_markers import SPEC as WRITE_TXN_MARKERS
from ..protocol.apis.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch
from .state import BrokerState

if TYPE_CHECKING:
    from .groups import GroupCoordinatorAdapter
    from .peer_connections import PeerConnections

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool  # True = COMMIT marker, False = ABORT
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]  # (topic, partition)


async def write_markers_here(
    state: BrokerState, groups: GroupCoordinatorAdapter, marker: TxnMarker
) -> dict[tuple[str, int], int]:
    """Write the marker into each of its partitions on this broker, ``__consumer_offsets``
    ones through the group coordinator; each partition's error code (0 = ok)."""
    data = tuple(tp for tp in marker.partitions if tp[0] != OFFSETS_TOPIC)
    results = await write_txn_markers(state, _with(marker, data)) if data else {}
    for tp in marker.partitions:
        if tp[0] == OFFSETS_TOPIC:
            results[tp] = await groups.complete_transaction(
                tp[1], marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch
            )
    return results


def _with(marker: TxnMarker, partitions: tuple[tuple[str, int], ...]) -> TxnMarker:
    return TxnMarker(marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, partitions)


class BrokerMarkerTransport:
    """The transaction coordinator's way to partitions: this broker's own, or (a cluster)
    another broker's, by WriteTxnMarkers over ``peers``."""

    def __init__(self, state: BrokerState, groups: GroupCoordinatorAdapter, peers: PeerConnections) -> None:
        self.state = state
        self.groups = groups
        self.peers = peers

    @property
    def node_id(self) -> int:
        return self.state.config.node_id

    def leader_of(self, topic: str, partition: int) -> int | None:
        cluster = self.state.cluster
        if cluster is None:
            return self.node_id
        leader = cluster.leader(topic, partition)
        return None if leader is None else leader[0]

    async def write_here(self, marker: TxnMarker) -> dict[tuple[str, int], int]:
        return await write_markers_here(self.state, self.groups, marker)

    async def send(self, node_id: int, marker: TxnMarker) -> dict[tuple[str, int], int]:
        return await write_markers_at_peer(self.peers, node_id, marker)


async def write_markers_at_peer(peers: PeerConnections, node_id: int, marker: TxnMarker) -> dict[tuple[str, int], int]:
    """One WriteTxnMarkers request to broker ``node_id``; each partition's error code."""
    by_topic: dict[str, list[int]] = {}
    for name, index in marker.partitions:
        by_topic.setdefault(name, []).append(index)
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.commit,
                topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                coordinator_epoch=marker.coordinator_epoch,
            )
        ]
    )
    response: WriteTxnMarkersResponse = await peers.request(node_id, WRITE_TXN_MARKERS, request)
    results: dict[tuple[str, int], int] = {}
    for answer in response.markers:
        for topic_result in answer.topics:
            for p in topic_result.partitions:
                results[(topic_result.name, p.partition_index)] = p.error_code
    return {tp: results.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in marker.partitions}


async def write_txn_markers(state: BrokerState, marker: TxnMarker) -> dict[tuple[str, int], int]:
    """Append the marker to each (data) partition; returns each partition's error code (0 = ok)."""
    results: dict[tuple[str, int], int] = {}
    written: list[tuple[tuple[str, int], PartitionLog]] = []
    for topic, partition in marker.partitions:
        key = (topic, partition)
        try:
            written.append((key, _write_one(state, marker, topic, partition)))
            results[key] = ErrorCode.NONE
        except KafkaError as exc:
            results[key] = exc.code
            log.info("transaction marker for %s-%d refused: %s", topic, partition, exc.message)
    if written and state.config.syncs_before_ack:
        synced = await asyncio.gather(
            *(state.committer.sync(plog) for _, plog in written), return_exceptions=True
        )
        for (key, _), outcome in zip(written, synced, strict=True):
            if isinstance(outcome, Exception):  # the fsync failed: the marker is not durable
                results[key] = ErrorCode.KAFKA_STORAGE_ERROR
    return results


def _write_one(state: BrokerState, marker: TxnMarker, topic: str, partition: int) -> PartitionLog:
    plog = state.topics.partition(topic, partition)
    if plog is None:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} partition {partition} does not exist"
        )
    if state.not_leader(topic, partition):  # a cluster: only the partition's leader writes it
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {topic}-{partition}")
    if marker.producer_id < 0 or marker.producer_epoch < 0:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            f"marker needs a producer id and epoch, got {marker.producer_id}/{marker.producer_epoch}",
        )
    producers = state.producer_state(topic, partition)
    producers.check_marker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch)
    if not marker.commit:
        ending = producers.completion(marker.producer_id, plog.log_end_offset, aborted=True)
        if ending is not None:
            plog.add_aborted_txn(
                AbortedTxn(ending.producer_id, ending.first_offset, ending.last_offset, ending.last_stable_offset)
            )
    now = state.clock()
    batch = bytearray(
        build_control_batch(
            CONTROL_COMMIT if marker.commit else CONTROL_ABORT,
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            timestamp_ms=now,
            coordinator_epoch=marker.coordinator_epoch,
        )
    )
    info = plog.append([batch], now_ms=now, log_append_time=False)
    producers.record_marker(
        marker.producer_id,
        marker.producer_epoch,
        marker.coordinator_epoch,
        info.base_offset,
        aborted=not marker.commit,
    )
    state.notifier.notify((topic, partition))
    return plog


__all__ = ["BrokerMarkerTransport", "TxnMarker", "write_markers_here", "write_txn_markers"]
