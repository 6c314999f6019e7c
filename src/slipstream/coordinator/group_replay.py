"""Applying ``__consumer_offsets`` records: the only way durable group state changes.

Each record goes to what it describes: an offset commit (or its tombstone) to the
offset store, a transactional one aside until its marker; a GroupMetadata record
rebuilds a classic group (Stable with its members, else Empty); consumer-group
records to ``consumer_records.py``. While a partition loads, the decisions the
records carry are told to the history (``history_replay.ReplayNarrator``).
"""

from __future__ import annotations

import logging

from ..protocol import group_records as gr
from . import consumer_records as crec
from .consumer import PartitionOwnershipError
from .consumer_group_manager import ConsumerGroupManager
from .group import ClassicGroup
from .group_manager import GroupManager
from .history import GroupHistory
from .history_replay import ReplayNarrator
from .member import Member
from .offset_and_metadata import OffsetAndMetadata
from .offset_manager import OffsetManager
from .ownership import PartitionOwnership
from .result import Record
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")


class GroupRecordReplay:
    def __init__(
        self,
        ownership: PartitionOwnership,
        group_manager: GroupManager,
        consumer_groups: ConsumerGroupManager,
        offset_manager: OffsetManager,
        history: GroupHistory,
    ) -> None:
        self.ownership = ownership
        self.group_manager = group_manager
        self.consumer_groups = consumer_groups
        self.offset_manager = offset_manager
        self.history = history
        self.narrator = ReplayNarrator(history)

    def replay(
        self,
        key: bytes | memoryview,
        value: bytes | memoryview | None,
        now_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
        record_ms: int | None = None,
    ) -> None:
        """One record (see ``GroupCoordinator.replay``); ``record_ms``: its timestamp."""
        record_ms = now_ms if record_ms is None else record_ms
        loading = self.ownership.is_group_loading
        try:
            k = gr.decode_key(key)
            if isinstance(k, gr.OffsetCommitKey):
                om = None if value is None else OffsetAndMetadata.from_value(gr.decode_offset_commit_value(value))
                if producer_id >= 0 and om is not None:
                    self.offset_manager.replay_txn_commit(producer_id, k.group, k.topic, k.partition, om, now_ms)
                    self.offset_manager.replay_producer_epoch(producer_id, producer_epoch)
                else:
                    self.offset_manager.replay_commit(k.group, k.topic, k.partition, om, now_ms)
            elif isinstance(k, gr.GroupMetadataKey):
                gv = None if value is None else gr.decode_group_metadata_value(value)
                if loading(k.group):
                    self.narrator.group_metadata(k.group, gv, record_ms)
                self._replay_group(k.group, gv, now_ms)
                if gv is None and self.group_manager.get(k.group) is None:
                    self.history.forget(k.group)  # the group is gone: so is its history
            elif isinstance(k, gr.UnknownKey):
                log.debug("skipping __consumer_offsets record with key version %s", k.version)
            else:
                cv = None if value is None else gr.decode_consumer_group_value(k, value)
                self._replay_consumer(k, cv, now_ms, record_ms)
        except gr.RecordFormatError as exc:
            log.warning("skipping malformed __consumer_offsets record: %s", exc)
        except PartitionOwnershipError as exc:
            # Records that contradict each other (a corrupt or hand-written log): the
            # broker keeps loading; the member's next heartbeat sorts its assignment out.
            log.error("skipping inconsistent __consumer_offsets record: %s", exc)

    def _replay_consumer(
        self, k: gr.ConsumerGroupKey, cv: gr.ConsumerGroupValue | None, now_ms: int, record_ms: int
    ) -> None:
        classic = self.group_manager.get(k.group)
        if cv is not None and classic is not None:
            # The group is a consumer group from now on: a simple group made to hold
            # offsets (replayed before the consumer group's records after compaction)
            # gives way, and so does a classic group with members converted by an
            # online upgrade (its tombstone came first; see migration.py).
            self.group_manager.remove_group(k.group, now_ms)
        if isinstance(k, gr.ConsumerGroupMetadataKey) and cv is None:
            self.consumer_groups.sessions.forget(k.group)
            self.history.forget(k.group)
        crec.replay_consumer_record(self.consumer_groups.groups, k, cv, now_ms)
        if self.ownership.is_group_loading(k.group):
            self.narrator.consumer_record(k, cv, record_ms)

    def apply(self, record: Record, now_ms: int) -> None:
        """A record this coordinator emitted: an offset commit or a consumer-group record
        it built skips decoding its own bytes."""
        commit = record.commit
        if record.producer is not None:
            self.replay(record.key, record.value, now_ms, *record.producer)
        elif record.consumer is not None:
            key, value = record.consumer
            try:
                self._replay_consumer(key, value, now_ms, now_ms)
            except PartitionOwnershipError as exc:
                log.error("skipping inconsistent __consumer_offsets record: %s", exc)
        elif commit is None:
            self.replay(record.key, record.value, now_ms)
        else:
            group_id, topic, partition, om = commit
            self.offset_manager.replay_commit(group_id, topic, partition, om, now_ms)

    def replay_end_transaction(self, producer_id: int, commit: bool, now_ms: int, producer_epoch: int) -> None:
        self.offset_manager.replay_end_transaction(producer_id, commit, now_ms)
        self.offset_manager.replay_producer_epoch(producer_id, producer_epoch)

    def _replay_group(self, group_id: str, value: gr.GroupMetadataValue | None, now_ms: int) -> None:
        groups = self.group_manager
        loading = self.ownership.is_group_loading(group_id)
        current = groups.get(group_id)
        if value is None:
            if current is None:
                return
            if loading or current.state in (GroupState.EMPTY, GroupState.DEAD):
                groups.remove_group(group_id, now_ms)
            return
        if current is not None and not loading:
            # Our own record of a live group: the in-memory group is already ahead of it.
            return
        groups.groups[group_id] = group_from_record(group_id, value, now_ms)


def group_from_record(group_id: str, value: gr.GroupMetadataValue, now_ms: int) -> ClassicGroup:
    """Rebuild a group from its latest GroupMetadataValue: Stable with members, else Empty."""
    group = ClassicGroup(
        group_id,
        now_ms,
        GroupState.STABLE if value.members else GroupState.EMPTY,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
        leader_id=value.leader,
    )
    group.current_state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp != -1 else None
    for m in value.members:
        group.add(
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", bytes(m.subscription))],
                assignment=bytes(m.assignment),
            )
        )
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
