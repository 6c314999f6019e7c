"""How a member's place in a consumer group ends: it leaves, or a timer fences it.

Timers (keyed, injected): a member's session (``consumer-session-<group>-<member>``,
the group's ``group.consumer.session.timeout.ms``, restarted by each heartbeat), and
its rebalance timeout while it holds partitions it must revoke
(``consumer-rebalance-<group>-<member>``); either expiring fences the member.

Fencing a member writes its tombstones and a new group epoch; its timers stop once
that is durable. When the last consumer-protocol member goes and classic members
remain, the group is downgraded instead (``downgrade``, set by the coordinator).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial

from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from ..protocol.errors import ErrorCode, KafkaError
from . import consumer_records as crec
from . import history as ev
from .config import ConsumerGroupTimeouts
from .consumer import ConsumerGroup, ConsumerGroupMember, MemberState
from .consumer.member import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH
from .consumer_rebalance import subscribed_names
from .consumer_responses import after_write, answer_after_write, with_response
from .result import CoordinatorResult, Record
from .timer import GuardedTimer
from .topics_image import TopicsImage

log = logging.getLogger("slipstream.coordinator")

# A fence whose write failed is tried again this much later.
FENCE_RETRY_MS = 500


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


# A fenced member's cause, as the group epoch bump it brings says it.
_FENCE_CAUSES = {
    "left": "left",
    "session-expired": "was fenced: its session expired",
    "rebalance-timeout": "was fenced: it did not revoke its partitions in time",
}


class ConsumerSessions:
    def __init__(
        self,
        timer: GuardedTimer,
        groups: dict[str, ConsumerGroup],
        topics: Callable[[], TopicsImage],
        partition_for: Callable[[str], int],
        timeouts: Callable[[str], ConsumerGroupTimeouts],
    ) -> None:
        self.timer = timer
        self.groups = groups
        self.topics = topics
        self.partition_for = partition_for
        self.timeouts = timeouts
        # Set by the coordinator: turns a group whose last consumer-protocol member leaves
        # into a classic group (online downgrade); None when it does not (see fence).
        self.downgrade: Callable[[ConsumerGroup, ConsumerGroupMember, int], CoordinatorResult | None] | None = None

    def leave(self, req: ConsumerGroupHeartbeatRequest, now_ms: int) -> CoordinatorResult:
        """A heartbeat with epoch -1 (leave) or -2 (a static member leaving for now)."""
        group_id = req.group_id
        group = self.groups.get(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=0,
        )
        if req.instance_id is None:
            member = group.member(req.member_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group_id}."
                )
            log.info("group %s: member %s left", group_id, member.member_id)
            left = ev.MemberLeft(group_id=group_id, at_ms=now_ms, member_id=member.member_id)
            return self.fence(group, member, now_ms, "left", response, left)
        member = group.static_member(req.instance_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            log.info("group %s: static member %s (%s) left", group_id, member.member_id, req.instance_id)
            left = ev.MemberLeft(group_id=group_id, at_ms=now_ms, member_id=member.member_id, instance_id=req.instance_id)
            return self.fence(group, member, now_ms, "left", response, left)
        # -2: the static member will be back; it keeps its partitions until its session ends.
        log.info("group %s: static member %s (%s) left for now", group_id, member.member_id, req.instance_id)
        leaving = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
        record = crec.current_assignment_record(self.partition_for(group_id), group_id, leaving)
        left = ev.MemberLeft(
            group_id=group_id, at_ms=now_ms, member_id=member.member_id, instance_id=req.instance_id, temporarily=True
        )
        return answer_after_write(
            response,
            [record],
            on_success=lambda: self.timer.cancel(rebalance_key(group_id, member.member_id)),
            events=[left],
        )

    def fence_records(self, group: ConsumerGroup, member: ConsumerGroupMember) -> list[Record]:
        """Remove ``member``: its tombstones, its regex if nobody else uses it, and a new group epoch."""
        group_id = group.group_id
        partition = self.partition_for(group_id)
        records = crec.member_tombstones(partition, group_id, member.member_id)
        resolved = dict(group.resolved_regexes)
        regex = member.subscribed_topic_regex
        if member.uses_regex and group.subscribed_regexes.get(regex, 0) <= 1 and regex in resolved:
            del resolved[regex]
            records.append(crec.regex_tombstone(partition, group_id, regex))
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        metadata_hash = self.topics().metadata_hash(subscribed_names(others, resolved))
        records.append(crec.group_epoch_record(partition, group_id, group.group_epoch + 1, metadata_hash))
        return records

    def fence(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        now_ms: int,
        cause: str,
        response: ConsumerGroupHeartbeatResponse | None = None,
        left: ev.MemberLeft | None = None,
    ) -> CoordinatorResult:
        """Fence ``member`` (a leave, or an expired timer: ``response`` None). Its timers stop
        once the removal is durable; if the write fails it stays, and a fence that a timer
        started is tried again after ``FENCE_RETRY_MS`` (Kafka's timers retry a failed write)."""
        group_id, member_id = group.group_id, member.member_id
        if self.downgrade is not None:
            downgraded = self.downgrade(group, member, now_ms)
            if downgraded is not None:
                return with_response(downgraded, response, left)

        def stop_timers() -> None:
            self.cancel_timers(group_id, member_id)

        def retry() -> None:
            log.warning("group %s: fencing member %s failed to write; retrying", group_id, member_id)
            self.schedule_session_timeout(group_id, member_id, FENCE_RETRY_MS)

        records = self.fence_records(group, member)
        events: list[ev.GroupEvent] = [] if left is None else [left]
        events.append(
            ev.MemberFenced(group_id=group_id, at_ms=now_ms, member_id=member_id, epoch=member.member_epoch, cause=cause)
        )
        why = _FENCE_CAUSES.get(cause, cause)
        events.append(
            ev.GroupEpochBumped(
                group_id=group_id, at_ms=now_ms, epoch=group.group_epoch + 1, cause=f"member {member_id} {why}"
            )
        )
        if response is None:
            return after_write(records, stop_timers, retry, events)
        return answer_after_write(response, records, on_success=stop_timers, events=events)

    def removal_records(self, group: ConsumerGroup, leaving: Sequence[ConsumerGroupMember]) -> list[Record]:
        """Several members leaving at once (a classic LeaveGroup): their tombstones and one
        new group epoch."""
        group_id = group.group_id
        partition = self.partition_for(group_id)
        gone = {m.member_id for m in leaving}
        records: list[Record] = []
        for m in leaving:
            records += crec.member_tombstones(partition, group_id, m.member_id)
        others = [m for m in group.members.values() if m.member_id not in gone]
        metadata_hash = self.topics().metadata_hash(subscribed_names(others, dict(group.resolved_regexes)))
        records.append(crec.group_epoch_record(partition, group_id, group.group_epoch + 1, metadata_hash))
        return records

    # ================================================================ timers

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(session_key(group_id, member_id))
        self.timer.cancel(rebalance_key(group_id, member_id))

    def schedule_session_timeout(self, group_id: str, member_id: str, delay_ms: int | None = None) -> None:
        """(Re)start a member's session: ``delay_ms``, else the group's session timeout."""
        timeout = self.timeouts(group_id).session_timeout_ms if delay_ms is None else delay_ms
        # A partial, not a closure: fewer objects per member for the garbage collector.
        self.timer.schedule(session_key(group_id, member_id), timeout, partial(self._expire_session, group_id, member_id))

    def _expire_session(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult:
        group = self.groups.get(group_id)
        member = None if group is None else group.member(member_id)
        if group is None or member is None:
            return CoordinatorResult()
        log.info("group %s: member %s fenced: its session expired", group_id, member_id)
        return self.fence(group, member, now_ms, "session-expired")

    def schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        timeout = member.rebalance_timeout_ms
        if timeout <= 0:
            timeout = self.timeouts(group_id).session_timeout_ms

        def expire(now_ms: int) -> CoordinatorResult:
            group = self.groups.get(group_id)
            current = None if group is None else group.member(member_id)
            if group is None or current is None or current.member_epoch != epoch:
                return CoordinatorResult()
            log.info(
                "group %s: member %s fenced: it did not revoke its partitions at epoch %d within %d ms",
                group_id,
                member_id,
                epoch,
                timeout,
            )
            return self.fence(group, current, now_ms, "rebalance-timeout")

        self.timer.schedule(rebalance_key(group_id, member_id), timeout, expire)

    def on_loaded(self, group: ConsumerGroup) -> None:
        """Arm the timers of a group just replayed from the log."""
        for member in group.members.values():
            classic_ms = None if member.classic is None else member.classic.session_timeout_ms
            self.schedule_session_timeout(group.group_id, member.member_id, classic_ms)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_rebalance_timeout(group.group_id, member)

    def forget(self, group_id: str) -> None:
        """Cancel every timer of a group about to be deleted."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for member_id in group.members:
            self.timer.cancel(session_key(group_id, member_id))
            self.timer.cancel(rebalance_key(group_id, member_id))
