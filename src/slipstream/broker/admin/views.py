"""What the admin listener reports, read from the broker's live state.

Plain dicts and small dataclasses: the JSON API serves them as they are, and the
Prometheus collector reads the same summaries, so the two never disagree. Everything
here runs on the event loop between requests, so it sees one consistent state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ...coordinator.coordinator import GroupCoordinator
from ...coordinator.group_admin import CLASSIC_GROUP_TYPE, CONSUMER_GROUP_TYPE
from ...coordinator.offset_and_metadata import OffsetAndMetadata
from ...coordinator.state import GroupState
from ...protocol import consumer_protocol as cp
from ..state import BrokerState
from ..topics import Topic

_DEAD = "Dead"


class CommittedOffsets(Protocol):
    """Committed offsets as OffsetFetch answers them (durable ones only: the group adapter),
    so lag and the groups shown here are what a consumer would resume from."""

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]: ...

    def groups_with_committed_offsets(self) -> set[str]: ...


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    group_type: str  # "classic" or "consumer"
    state: str
    protocol_type: str
    protocol: str
    members: int


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    log_end_offset: int

    @property
    def lag(self) -> int:
        # A commit past the end (a truncated or recreated topic) is no lag, not negative lag.
        return max(0, self.log_end_offset - self.committed)


def is_ready(coordinator: GroupCoordinator) -> bool:
    """Ready once the group coordinator has replayed ``__consumer_offsets``."""
    return not coordinator.is_loading


def group_summaries(coordinator: GroupCoordinator) -> list[GroupSummary]:
    out: list[GroupSummary] = []
    for group_id in sorted(set(coordinator.group_ids())):
        summary = group_summary(coordinator, group_id)
        if summary is not None:
            out.append(summary)
    return out


def group_summary(coordinator: GroupCoordinator, group_id: str) -> GroupSummary | None:
    consumer_group = coordinator.consumer_group(group_id)
    if consumer_group is not None:
        state = consumer_group.state.value
        if state == _DEAD:
            return None
        assignors = {m.server_assignor for m in consumer_group.members.values() if m.server_assignor}
        return GroupSummary(
            group_id, CONSUMER_GROUP_TYPE, state, CONSUMER_GROUP_TYPE, ",".join(sorted(assignors)),
            len(consumer_group.members),
        )  # fmt: skip
    group = coordinator.group(group_id)
    if group is None or group.state is GroupState.DEAD:
        return None
    return GroupSummary(
        group_id, CLASSIC_GROUP_TYPE, str(group.state), group.protocol_type or "", group.protocol_name or "",
        len(group.members),
    )  # fmt: skip


def groups_with_offsets(coordinator: GroupCoordinator, committed: CommittedOffsets) -> list[str]:
    """Every group with a live state or committed offsets (a consumer that commits
    without joining has offsets but may have no live group)."""
    return sorted(set(coordinator.group_ids()) | committed.groups_with_committed_offsets())


def group_lag(state: BrokerState, committed: CommittedOffsets, group_id: str) -> list[PartitionLag]:
    """Committed offset against log end for every partition the group has committed
    (partitions of deleted topics are left out)."""
    out: list[PartitionLag] = []
    for (topic, partition), offset in sorted(committed.committed_offsets(group_id).items()):
        plog = state.topics.partition(topic, partition)
        if plog is None:
            continue
        out.append(PartitionLag(topic, partition, offset.offset, plog.log_end_offset))
    return out


def topics_document(state: BrokerState) -> list[dict[str, Any]]:
    return [_topic_dict(state, name, topic) for name, topic in sorted(state.topics.topics.items())]


def topic_document(state: BrokerState, name: str) -> dict[str, Any] | None:
    topic = state.topics.get(name)
    return None if topic is None else _topic_dict(state, name, topic)


def _topic_dict(state: BrokerState, name: str, topic: Topic) -> dict[str, Any]:
    partitions = [
        {
            "partition": index,
            "log_start_offset": plog.log_start_offset,
            "log_end_offset": plog.log_end_offset,
            "size_bytes": plog.size_bytes,
            "segments": segment_count(plog),
        }
        for index, plog in enumerate(topic.partitions)
    ]
    traffic = state.metrics.topics.get(name)
    return {
        "name": name,
        "topic_id": str(topic.topic_id),
        "internal": topic.internal,
        "configs": dict(sorted(topic.configs.items())),
        "partitions": partitions,
        "size_bytes": sum(p["size_bytes"] for p in partitions),
        "records_in": traffic.records_in if traffic else 0,
        "records_out": traffic.records_out if traffic else 0,
        "bytes_in": traffic.bytes_in if traffic else 0,
        "bytes_out": traffic.bytes_out if traffic else 0,
    }


def groups_document(
    state: BrokerState, coordinator: GroupCoordinator, committed: CommittedOffsets
) -> list[dict[str, Any]]:
    return [
        {**_summary_dict(s), "lag": sum(p.lag for p in group_lag(state, committed, s.group_id))}
        for s in group_summaries(coordinator)
    ]


def group_document(
    state: BrokerState, coordinator: GroupCoordinator, committed: CommittedOffsets, group_id: str
) -> dict[str, Any] | None:
    summary = group_summary(coordinator, group_id)
    if summary is None:
        return None
    lag = group_lag(state, committed, group_id)
    return {
        **_summary_dict(summary),
        "members": _members(state, coordinator, group_id),
        "offsets": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed_offset": p.committed,
                "log_end_offset": p.log_end_offset,
                "lag": p.lag,
            }
            for p in lag
        ],
        "lag": sum(p.lag for p in lag),
    }


def _summary_dict(summary: GroupSummary) -> dict[str, Any]:
    return {
        "group_id": summary.group_id,
        "type": summary.group_type,
        "state": summary.state,
        "protocol_type": summary.protocol_type,
        "protocol": summary.protocol,
        "member_count": summary.members,
    }


def _members(state: BrokerState, coordinator: GroupCoordinator, group_id: str) -> list[dict[str, Any]]:
    consumer_group = coordinator.consumer_group(group_id)
    if consumer_group is not None:
        by_id = state.topics.by_id
        members = []
        for m in sorted(consumer_group.members.values(), key=lambda m: m.member_id):
            assignment: dict[str, list[int]] = {}
            for topic_id, parts in m.assigned_partitions.items():
                topic = by_id.get(topic_id)
                if topic is not None:
                    assignment[topic.name] = sorted(parts)
            members.append(
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "assignment": dict(sorted(assignment.items())),
                }
            )
        return members
    group = coordinator.group(group_id)
    if group is None:
        return []
    return [
        {
            "member_id": m.member_id,
            "instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "generation": group.generation_id,
            "assignment": _classic_assignment(group.protocol_type, m.assignment),
        }
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
    ]


def _classic_assignment(protocol_type: str | None, assignment: bytes) -> dict[str, list[int]] | None:
    """A consumer-protocol assignment as topic -> partitions; None when it is not one."""
    if protocol_type != "consumer" or not assignment:
        return {} if protocol_type == "consumer" else None
    try:
        _, decoded = cp.decode_assignment(assignment)
    except Exception:
        return None  # a client's bytes we cannot read: shown as unknown, never an error
    return {tp.topic: sorted(tp.partitions) for tp in sorted(decoded.assigned_partitions, key=lambda t: t.topic)}


def segment_count(plog: object) -> int:
    count = getattr(plog, "segment_count", None)
    return count if isinstance(count, int) else 1
