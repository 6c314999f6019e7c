"""Committed offsets written to ``__consumer_offsets`` but not yet synced: OffsetFetch
shows the value each had when it was last durable.

With ``syncs_before_ack`` (fsync durability, postgres storage) the group adapter
appends the coordinator's records and replays them at once, and syncs afterwards: an
OffsetCommit is answered only after its sync, but an OffsetFetch in between would read
an offset that a crash (or a failed database commit) can still take back. Kafka's
coordinator reads at the log's last committed offset; this is the same rule for
committed offsets, kept beside the coordinator so that it stays a pure state machine
that replays what was written.

Why an overlay on OffsetFetch rather than replaying only after the sync: the
coordinator must see each write at once (the next request is validated against it,
and every other reader - OffsetDelete, DeleteGroups, retention, ListGroups - runs
under the adapter's lock, which the un-batched writes hold through their sync). The
only reader that runs while a write's sync is outstanding is whatever follows a
group-committed OffsetCommit, whose sync runs outside the lock; of those, only
OffsetFetch and the admin listener (lag and committed offsets in its API, console and
metrics: ``durable_offsets``; which groups have any: ``groups_with_offsets``) read
offsets. So the durable view is a few keys deep and touches those two readers. After a failed sync the other readers act on the applied
value (OffsetDelete or expiry write a tombstone for it, ListGroups counts it): each only
adds records whose own sync decides what OffsetFetch shows.

Writes are offset commits and their tombstones (OffsetCommit, OffsetDelete,
DeleteGroups, expiry) and a transaction's COMMIT marker, which makes its offsets
committed; offsets still inside an open transaction are not committed offsets
(OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them, and for a
group-committed OffsetCommit still waiting for its answer).

The rule, easy to check: each write is numbered when appended; a sync of a partition
log requested after write ``n`` covers every write up to ``n`` to that log (the group
committer flushes after the request; the postgres store commits everything queued,
and a failed commit puts its rows back for the next). So a successful sync makes the
covered writes' values durable; a failed one changes nothing, and the value shown
stays the old one until a later sync of that log succeeds (and then covers the write
too). After a failed sync the record may still reach the disk (page cache) or the
database (a later retried commit): a broker restarted then replays it, as Kafka
replays a log tail its fsync did not confirm - the commit was answered with an error,
so its outcome was unknown to the client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..coordinator import Record
from ..coordinator.offset_and_metadata import OffsetAndMetadata
from ..log.api import PartitionLog
from ..protocol import group_records as gr
from ..protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from ..protocol.errors import ErrorCode

GROUPS_VERSION = 8  # OffsetFetch v8+ answers several groups

TopicPartition = tuple[str, int]
Committed = Callable[[str, str, int], OffsetAndMetadata | None]
OffsetWrite = tuple[str, str, int, OffsetAndMetadata | None]  # group, topic, partition, value


class _Unsynced:
    """One (group, topic, partition) with writes not yet known durable."""

    __slots__ = ("durable", "group_id", "offsets_partition", "tp", "writes")

    def __init__(
        self,
        group_id: str,
        tp: TopicPartition,
        offsets_partition: int,
        durable: OffsetAndMetadata | None,
        writes: list[tuple[int, OffsetAndMetadata | None]],
    ) -> None:
        self.group_id = group_id
        self.tp = tp
        self.offsets_partition = offsets_partition
        # The value as of the newest sync that covered every earlier write of it.
        self.durable = durable
        # (write number, value written; None = tombstone), oldest first.
        self.writes = writes


def _offset_write(record: Record) -> OffsetWrite | None:
    """(group, topic, partition, value) if ``record``, not one the coordinator built as an
    offset commit (``Record.commit``), sets or deletes a committed offset."""
    if record.producer is not None or record.consumer is not None:
        return None  # transactional offsets (pending until their marker) / consumer-group records
    try:
        key = gr.decode_key(record.key)
    except gr.RecordFormatError:
        return None
    if not isinstance(key, gr.OffsetCommitKey):
        return None
    value = None if record.value is None else OffsetAndMetadata.from_value(gr.decode_offset_commit_value(record.value))
    return key.group, key.topic, key.partition, value


class UnsyncedOffsets:
    def __init__(self) -> None:
        self._writes = 0  # writes numbered so far
        # group -> (topic, partition) -> its unsynced writes; empty entries are removed.
        self._by_group: dict[str, dict[TopicPartition, _Unsynced]] = {}
        # Which entries each partition log holds writes for.
        self._by_log: dict[PartitionLog, list[_Unsynced]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_group)

    def written(self, plog: PartitionLog, partition: int, records: list[Record], committed: Committed) -> None:
        """``records`` were appended to ``plog`` (offsets partition ``partition``) and are
        about to be applied: ``committed`` still answers with the values before them."""
        writes = [w for r in records if (w := r.commit or _offset_write(r)) is not None]
        if writes:
            self.wrote(plog, partition, writes, committed)

    def wrote(self, plog: PartitionLog, partition: int, writes: Sequence[OffsetWrite], committed: Committed) -> None:
        """``written`` for what an appended record does to committed offsets, given as
        (group, topic, partition, value; None = deleted) - e.g. a transaction's COMMIT marker."""
        # On every group-committed batch with the fsync policy: kept to plain loops and dicts.
        self._writes = number = self._writes + 1
        by_group = self._by_group
        new: list[_Unsynced] = []
        for write in writes:
            group_id, topic, index, value = write
            by_tp = by_group.get(group_id)
            if by_tp is None:
                by_tp = by_group[group_id] = {}
            tp = (topic, index)
            entry = by_tp.get(tp)
            if entry is None:
                durable = committed(group_id, topic, index)
                by_tp[tp] = entry = _Unsynced(group_id, tp, partition, durable, [(number, value)])
                new.append(entry)
            else:
                entry.writes.append((number, value))
        if new:
            entries = self._by_log.get(plog)
            if entries is None:
                self._by_log[plog] = new
            else:
                entries.extend(new)

    def transaction_committed(
        self,
        plog: PartitionLog,
        partition: int,
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]],
        committed: Committed,
    ) -> None:
        """A COMMIT marker was appended to ``plog``: the transaction's ``offsets`` (group ->
        (topic, partition) -> value) are about to become committed offsets."""
        writes = [(g, t, p, om) for g, by_tp in offsets.items() for (t, p), om in by_tp.items()]
        if writes:
            self.wrote(plog, partition, writes, committed)

    def sync_mark(self) -> int:
        """Taken just before asking for a sync: what that sync will cover."""
        return self._writes

    def synced(self, plog: PartitionLog, mark: int) -> None:
        """A sync of ``plog`` asked for at ``mark`` succeeded: its writes up to it are durable."""
        entries = self._by_log.get(plog)
        if not entries:
            return
        left = []
        for entry in entries:
            writes = entry.writes
            if writes[-1][0] <= mark:  # the usual case: every write of it covered
                self._drop(entry)
                continue
            covered = 0
            while writes[covered][0] <= mark:
                covered += 1
            if covered:
                entry.durable = writes[covered - 1][1]
                del writes[:covered]
            left.append(entry)
        if left:
            self._by_log[plog] = left
        else:
            del self._by_log[plog]

    def forget(self, partitions: list[int] | range) -> None:
        """The coordinator reloaded or gave up these offsets partitions: what it knows of
        them now comes from the log."""
        gone = set(partitions)
        for plog, entries in list(self._by_log.items()):
            kept = [e for e in entries if e.offsets_partition not in gone]
            for entry in entries:
                if entry.offsets_partition in gone:
                    self._drop(entry)
            if kept:
                self._by_log[plog] = kept
            else:
                del self._by_log[plog]

    def _drop(self, entry: _Unsynced) -> None:
        by_tp = self._by_group.get(entry.group_id)
        if by_tp is None or by_tp.get(entry.tp) is not entry:
            return
        del by_tp[entry.tp]
        if not by_tp:
            del self._by_group[entry.group_id]

    # ---------------------------------------------------------------- readers

    def durable_offsets(
        self, group_id: str, applied: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets as OffsetFetch answers them for every partition:
        ``applied`` (the coordinator's) with each unsynced one at its durable value."""
        unsynced = self._by_group.get(group_id)
        if unsynced is None:
            return applied
        shown = dict(applied)
        for tp, entry in unsynced.items():
            if entry.durable is None:
                shown.pop(tp, None)
            else:
                shown[tp] = entry.durable
        return shown

    def groups_with_offsets(
        self, applied_groups: Iterable[str], applied: Callable[[str], dict[TopicPartition, OffsetAndMetadata]]
    ) -> set[str]:
        """The groups with durable committed offsets, given those with applied ones and a
        group's applied offsets: only the few groups with unsynced writes are looked into."""
        groups = set(applied_groups)
        for group_id in self._by_group:
            if self.durable_offsets(group_id, applied(group_id)):
                groups.add(group_id)
            else:
                groups.discard(group_id)
        return groups


    def show_durable(self, version: int, request: OffsetFetchRequest, response: OffsetFetchResponse) -> None:
        """Rewrite the coordinator's OffsetFetch answer so each offset with unsynced writes
        reads as its durable value (in place)."""
        if version >= GROUPS_VERSION:
            listed = {g.group_id: g.topics is not None for g in request.groups}
            for group in response.groups:
                unsynced = self._by_group.get(group.group_id)
                if unsynced is not None and not group.error_code:
                    self._rewrite(group.topics, unsynced, listed.get(group.group_id, True), v8=True)
            return
        unsynced = self._by_group.get(request.group_id)
        if unsynced is not None and not response.error_code:
            self._rewrite(response.topics, unsynced, request.topics is not None, v8=False)

    @staticmethod
    def _rewrite(
        topics: list[Any], unsynced: dict[TopicPartition, _Unsynced], listed: bool, v8: bool
    ) -> None:
        """``topics``: the v0-7 or the v8+ topic structs of one group (same field names)."""
        topic_type: type[Any] = OffsetFetchResponseTopics if v8 else OffsetFetchResponseTopic
        partition_type: type[Any] = OffsetFetchResponsePartitions if v8 else OffsetFetchResponsePartition
        shown: set[TopicPartition] = set()
        for topic in topics:
            kept = []
            for part in topic.partitions:
                tp = (topic.name, part.partition_index)
                shown.add(tp)
                entry = unsynced.get(tp)
                if entry is None or part.error_code:
                    kept.append(part)
                    continue
                durable = entry.durable
                if durable is None:
                    if listed:  # asked for by name: answered as "no offset"
                        part.committed_offset, part.committed_leader_epoch, part.metadata = -1, -1, ""
                        kept.append(part)
                    continue  # every partition with an offset: it has none yet
                part.committed_offset = durable.offset
                part.committed_leader_epoch = durable.leader_epoch
                part.metadata = durable.metadata
                kept.append(part)
            topic.partitions = kept
        if listed:
            return
        # Every partition with an offset: those whose deletion is not yet durable still have one.
        by_name = {t.name: t for t in topics}
        for (name, index), entry in unsynced.items():
            durable = entry.durable
            if durable is None or (name, index) in shown:
                continue
            topic = by_name.get(name)
            if topic is None:
                topic = by_name[name] = topic_type(name=name)
                topics.append(topic)
            topic.partitions.append(
                partition_type(
                    partition_index=index,
                    committed_offset=durable.offset,
                    committed_leader_epoch=durable.leader_epoch,
                    metadata=durable.metadata,
                    error_code=ErrorCode.NONE,
                )
            )
        topics[:] = [t for t in topics if t.partitions]
