"""Offset retention: tombstones for offsets past ``offsets.retention.ms``, and for
empty groups left without offsets (Kafka's ``cleanupGroupMetadata``).

The coordinator runs ``tombstones`` every ``offsets.retention.check.interval.ms``
(timer ``GROUP_EXPIRATION_KEY``); replaying the tombstones is what forgets the
offsets. Offsets still pending (a commit not yet durable, or one inside an open
transaction) never expire.
"""

from __future__ import annotations

import logging

from . import consumer_records as crec
from . import records as rec
from .config import CoordinatorConfig
from .consumer import ConsumerGroup, ConsumerGroupState
from .consumer_group_manager import ConsumerGroupManager
from .group import ClassicGroup
from .group_manager import GroupManager
from .offset_and_metadata import OffsetAndMetadata
from .offset_manager import OffsetManager, TopicPartition
from .ownership import PartitionOwnership
from .result import Record
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")

GROUP_EXPIRATION_KEY = "expire-group-metadata"


class OffsetRetention:
    def __init__(
        self,
        config: CoordinatorConfig,
        ownership: PartitionOwnership,
        group_manager: GroupManager,
        consumer_groups: ConsumerGroupManager,
        offset_manager: OffsetManager,
    ) -> None:
        self.config = config
        self.ownership = ownership
        self.group_manager = group_manager
        self.consumer_groups = consumer_groups
        self.offset_manager = offset_manager

    def tombstones(self, now_ms: int) -> list[Record]:
        """Tombstones for offsets past ``offsets.retention``, and for Empty groups left with none."""
        records: list[Record] = []
        for group in list(self.group_manager.groups.values()):
            group_id = group.group_id
            if self.ownership.is_group_loading(group_id) or group.state is GroupState.DEAD:
                continue
            expired, everything = self._expired_offsets(group, now_ms)
            partition = self.ownership.partition_for(group_id)
            for topic, index in expired:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))
            if everything and group.state is GroupState.EMPTY and not group.pending_join_members:
                records.append(rec.group_tombstone(partition, group_id))
        for consumer_group in list(self.consumer_groups.groups.values()):
            group_id = consumer_group.group_id
            if self.ownership.is_group_loading(group_id):
                continue
            expired, everything = self._expired_consumer_group_offsets(consumer_group, now_ms)
            partition = self.ownership.partition_for(group_id)
            for topic, index in expired:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))
            if everything and consumer_group.state is ConsumerGroupState.EMPTY:
                records.extend(crec.group_tombstones(partition, consumer_group))
        if records:
            log.info("offset retention: %s tombstones", len(records))
        return records

    def _expired_offsets(self, group: ClassicGroup, now_ms: int) -> tuple[list[TopicPartition], bool]:
        """Offsets of ``group`` past retention, and whether that is all of them.

        Kafka's rules: an Empty group with a protocol type expires by the time it
        became Empty (or the commit time, for old records without it); a Stable
        consumer group expires offsets of topics it no longer subscribes to by
        commit time; a standalone group (no protocol type) by commit time;
        other groups keep everything. Explicit expire timestamps (OffsetCommit
        v2-v4 retention) win over all of that.
        """
        by_topic = self.offset_manager.offsets.get(group.group_id)
        if not by_topic:
            return [], True
        if group.protocol_type:
            if group.state is GroupState.EMPTY:
                state_ts = group.current_state_timestamp_ms

                def base(om: OffsetAndMetadata) -> int:
                    return state_ts if state_ts is not None else om.commit_timestamp_ms
            elif group.uses_consumer_protocol() and group.subscribed_topics is not None and group.state is GroupState.STABLE:

                def base(om: OffsetAndMetadata) -> int:
                    return om.commit_timestamp_ms
            else:
                return [], False
        else:

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp_ms

        retention = self.config.offsets_retention_ms
        expired: list[TopicPartition] = []
        everything = True
        for topic, by_partition in by_topic.items():
            if group.is_subscribed_to_topic(topic):
                everything = False
                continue
            for index, om in by_partition.items():
                if om.expire_timestamp_ms != -1:
                    gone = now_ms >= om.expire_timestamp_ms
                else:
                    gone = now_ms - base(om) >= retention
                if gone and not self.offset_manager.is_pending(group.group_id, topic, index):
                    expired.append((topic, index))
                else:
                    everything = False
        return expired, everything

    def _expired_consumer_group_offsets(
        self, group: ConsumerGroup, now_ms: int
    ) -> tuple[list[TopicPartition], bool]:
        """``_expired_offsets`` for a consumer (KIP-848) group: Kafka expires by commit time
        every offset of a topic no member consumes (all of them once the group is Empty)."""
        by_topic = self.offset_manager.offsets.get(group.group_id)
        if not by_topic:
            return [], True
        subscribed = group.all_subscribed_topics()
        retention = self.config.offsets_retention_ms
        expired: list[TopicPartition] = []
        everything = True
        for topic, by_partition in by_topic.items():
            if topic in subscribed:
                everything = False
                continue
            for index, om in by_partition.items():
                if om.expire_timestamp_ms != -1:
                    gone = now_ms >= om.expire_timestamp_ms
                else:
                    gone = now_ms - om.commit_timestamp_ms >= retention
                if gone and not self.offset_manager.is_pending(group.group_id, topic, index):
                    expired.append((topic, index))
                else:
                    everything = False
        return expired, everything
