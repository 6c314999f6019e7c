"""ConsumerGroupHeartbeat: the consumer (KIP-848) group protocol, as a pure state machine.

One heartbeat does what Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` does,
in the same order, and returns the records that say what changed:

1. find or create the group and the member (static members may take over the
   place of a member that left with epoch -2), and check the member's epoch;
2. apply the heartbeat's optional fields to the member; then, in
   ``consumer_rebalance.py``, bump the group epoch if what the group consumes
   changed, 3. run the server-side assignor for a new epoch, and 4. reconcile the
   member towards its target;
5. answer with the member's epoch and, when it changed or was asked for in
   full, its assignment (once the records are durable: ``consumer_responses.py``).

A heartbeat with epoch -1 or -2 leaves; leaving, fencing and the members' timers are
``consumer_sessions.py``'s. Nothing here changes the groups directly: ``replay``
(``consumer_records.py``) applies the records once the log accepted them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable

from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from ..protocol.uuid_strings import random_uuid_string
from . import consumer_records as crec
from . import history as ev
from .config import ConsumerGroupTimeouts, CoordinatorConfig
from .consumer import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    PartitionAssignorError,
    PartitionMap,
    replacement_for_static_member,
    validate_member_epoch,
    validate_subscription_regex,
)
from .consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from .consumer_intervals import HeartbeatIntervals
from .consumer_rebalance import ConsumerRebalance, MemberChange
from .consumer_responses import answer_after_write, heartbeat_error
from .consumer_sessions import ConsumerSessions, rebalance_key
from .newest_connections import NewestConnections
from .result import CoordinatorResult, Record, RequestContext
from .timer import GuardedTimer
from .topics_image import TopicsImage

log = logging.getLogger("slipstream.coordinator")

# ConsumerGroupHeartbeat v1 (KIP-1082): the consumer generates its member id.
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1
# Errors that refuse a heartbeat for a stale epoch or a taken instance id: the history notes them.
_FENCING_ERRORS = frozenset(
    {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNRELEASED_INSTANCE_ID}
)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def owned_partitions(req: ConsumerGroupHeartbeatRequest) -> PartitionMap | None:
    if req.topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in req.topic_partitions:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return {t: parts for t, parts in out.items() if parts}


def validate_member_commit(group: ConsumerGroup, member_id: str, member_epoch: int, version: int) -> int:
    """The error for an OffsetCommit to a consumer group (Kafka's ``validateOffsetCommit``).

    A commit without a member epoch (admin, or a consumer outside the group) is
    accepted only while the group has no members.
    """
    if member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.member(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if version < 9 and not member.uses_classic_protocol:
        # Members of the consumer protocol commit with OffsetCommit v9+.
        return ErrorCode.UNSUPPORTED_VERSION
    if member_epoch != member.member_epoch:
        # A classic member's generation is its epoch: a mismatch is the classic error.
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def deleted_incarnation_commit_error(
    group: ConsumerGroup, member_id: str, commits: Iterable[tuple[str, int]], image: TopicsImage
) -> int:
    """The error for a member's commit, by name, of a partition it holds only as that
    partition number of a deleted topic of that name (``ConsumerGroup.owner_epoch_lookup``):
    its view predates the topic's re-creation, and it would store the deleted topic's
    offset for the new topic; it must heartbeat first. Kafka accepts it by name
    (OffsetCommit v9; v10 names topics by id and so refuses the deleted one)."""
    member = group.member(member_id)
    if member is None:
        return ErrorCode.NONE
    name_of = image.name_of
    held = (*member.assigned_partitions, *member.partitions_pending_revocation)
    if all(name_of(topic_id) is not None for topic_id in held):
        return ErrorCode.NONE  # the usual case: nothing of a deleted topic held
    for name, partition in commits:
        live = image.by_name.get(name)
        if live is not None and ConsumerGroup.holds_only_a_deleted_incarnation(
            member, name, live.topic_id, partition, name_of
        ):
            return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


def validate_member_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
    """The error for an OffsetFetch v9+ naming a member of a consumer group."""
    if member_epoch == -1 and not member_id:
        return ErrorCode.NONE  # an admin or a consumer outside the group
    member = group.member(member_id or "")
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE


class ConsumerGroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        timer: GuardedTimer,
        topics: Callable[[], TopicsImage],
        partition_for: Callable[[str], int],
        timeouts: Callable[[str], ConsumerGroupTimeouts] | None = None,
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        """``new_member_id(client_id)``: the id of a member whose heartbeat (v0) has none
        (default: Kafka's random Uuid string); the simulator injects one so a seed replays."""
        self.config = config
        self.timer = timer
        self.topics = topics
        self.partition_for = partition_for
        default = ConsumerGroupTimeouts(
            config.consumer_group_session_timeout_ms, config.consumer_group_heartbeat_interval_ms
        )
        self.timeouts = timeouts or (lambda _group_id: default)
        self.new_member_id = new_member_id or (lambda _client_id: random_uuid_string())
        self.groups: dict[str, ConsumerGroup] = {}
        self.rebalance = ConsumerRebalance(config, topics, partition_for)
        self.sessions = ConsumerSessions(timer, self.groups, topics, partition_for, self.timeouts)
        self.intervals = HeartbeatIntervals(
            config, self.timeouts, lambda: sum(len(g.members) for g in self.groups.values())
        )
        # A member's heartbeat from a connection older than one it has heartbeated on is a
        # leftover of an abandoned connection: its owned partitions are stale, and reading
        # them could release partitions the member has been given since (consumer seed
        # 33042). Refused; see newest_connections.py.
        self.heartbeat_connections = NewestConnections("ConsumerGroupHeartbeat", self._member_present)

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def _member_present(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.has_member(member_id)

    # ================================================================ heartbeat

    def heartbeat(
        self,
        ctx: RequestContext,
        req: ConsumerGroupHeartbeatRequest,
        now_ms: int,
        preceding: list[Record] | None = None,
        converted: ConsumerGroup | None = None,
    ) -> CoordinatorResult:
        """``preceding``: records to write first (a classic group this group replaces).
        ``converted``: the group an online upgrade makes of a classic group with members
        (what replaying ``preceding`` will build), to run the heartbeat against."""
        try:
            self._validate(ctx.api_version, req)
            if self.heartbeat_connections.superseded(req.group_id, req.member_id, ctx.connection):
                # Nobody reads the answer; a client that did would find the coordinator again.
                return CoordinatorResult(response=heartbeat_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self.sessions.leave(req, now_ms)
            return self._heartbeat(ctx, req, now_ms, list(preceding or ()), converted)
        except KafkaError as exc:
            response = heartbeat_error(exc.code, exc.message)
            if exc.code in _FENCING_ERRORS:
                return CoordinatorResult(response=response, events=(self._fenced_request(req, exc.code, now_ms),))
            return CoordinatorResult(response=response)
        except PartitionAssignorError as exc:
            log.error("group %s: the assignor failed: %s", req.group_id, exc)
            return CoordinatorResult(response=heartbeat_error(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)))

    def _fenced_request(self, req: ConsumerGroupHeartbeatRequest, code: int, now_ms: int) -> ev.RequestFenced:
        group = self.groups.get(req.group_id)
        member = None if group is None else group.member(req.member_id)
        return ev.RequestFenced(
            group_id=req.group_id,
            at_ms=now_ms,
            member_id=req.member_id,
            instance_id=req.instance_id,
            api="ConsumerGroupHeartbeat",
            error=error_name(code),
            request_generation=req.member_epoch,
            current_generation=None if member is None else member.member_epoch,
        )

    def _validate(self, version: int, req: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, same messages."""
        epoch = req.member_epoch
        if (version >= CONSUMER_GENERATED_MEMBER_ID_VERSION or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and (
            not req.member_id.strip()
        ):
            raise _invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise _invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise _invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise _invalid("RackId can't be empty.")
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_group_assignors:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.consumer_group_assignors)}.",
            )
        if req.subscribed_topic_regex:
            validate_subscription_regex(req.subscribed_topic_regex)

    def _heartbeat(
        self,
        ctx: RequestContext,
        req: ConsumerGroupHeartbeatRequest,
        now_ms: int,
        records: list[Record],
        converted: ConsumerGroup | None = None,
    ) -> CoordinatorResult:
        group_id = req.group_id
        epoch = req.member_epoch
        partition = self.partition_for(group_id)
        group = converted if converted is not None else self.groups.get(group_id)
        if group is None:
            if epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = ConsumerGroup(group_id)  # a scratch view: replaying the records creates the group
        member_id = req.member_id or self.new_member_id(ctx.client_id)
        if len(group.members) >= self.config.consumer_group_max_size and not group.has_member(member_id):
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_group_max_size} members.",
            )
        owned = owned_partitions(req)
        events: list[ev.GroupEvent] = []
        is_new = False

        # 1. The member: new, existing, or a static member replacing its previous incarnation.
        replaced: ConsumerGroupMember | None = None
        rejoined = False
        if req.instance_id is None:
            member = group.member(member_id)
            if member is not None and epoch == JOIN_GROUP_MEMBER_EPOCH and member.member_epoch != 0:
                # A member rejoining under its own id (a client fenced on its side) has let go of
                # everything: it starts over now. Kafka answers FENCED_MEMBER_EPOCH until the old
                # incarnation's session runs out, which leaves the member out for that long.
                log.info("group %s: member %s rejoins: starting it over", group_id, member_id)
                records += crec.member_tombstones(partition, group_id, member_id)
                replaced, member, rejoined = member, None, True
            if member is None:
                if epoch != JOIN_GROUP_MEMBER_EPOCH:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                    )
                member = ConsumerGroupMember(member_id=member_id)
                is_new = True
                log.info("group %s: member %s joins with the consumer protocol", group_id, member_id)
            elif member.uses_classic_protocol and epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} uses the classic protocol."
                )
            else:
                validate_member_epoch(member, epoch, owned)
        else:
            is_new = epoch == JOIN_GROUP_MEMBER_EPOCH and not group.has_member(member_id)
            member, replaced = self._static_member(group, member_id, epoch, req.instance_id, owned)
            if replaced is not None:
                records += crec.member_tombstones(partition, group_id, replaced.member_id)
                records.append(crec.member_subscription_record(partition, group_id, member))
                records.append(
                    crec.target_assignment_record(
                        partition, group_id, member_id, group.target_assignment_of(replaced.member_id)
                    )
                )
                records.append(crec.current_assignment_record(partition, group_id, member))

        updated = member.with_subscription(
            topic_names=None if req.subscribed_topic_names is None else frozenset(req.subscribed_topic_names),
            topic_regex=req.subscribed_topic_regex,
            server_assignor=req.server_assignor,
            rack_id=req.rack_id,
            rebalance_timeout_ms=None if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
            instance_id=req.instance_id,
        ).replace(client_id=ctx.client_id, client_host=ctx.client_host)
        if updated is not member and updated != member:  # most heartbeats change nothing
            records.append(crec.member_subscription_record(partition, group_id, updated))
        subscription_changed = updated.subscription_differs(member)
        if is_new or rejoined:
            how = ev.JOINED_REJOIN if rejoined else (
                ev.JOINED_STATIC_REPLACEMENT if replaced is not None else ev.JOINED_NEW
            )
            events.append(
                ev.MemberJoined(
                    group_id=group_id,
                    at_ms=now_ms,
                    member_id=member_id,
                    how=how,
                    instance_id=req.instance_id,
                    replaced_member_id=None if replaced is None else replaced.member_id,
                    client_id=ctx.client_id,
                    client_host=ctx.client_host,
                )
            )
        elif subscription_changed:
            events.append(
                ev.MetadataChanged(
                    group_id=group_id,
                    at_ms=now_ms,
                    member_id=member_id,
                    topics=tuple(sorted(updated.subscribed_topic_names)),
                    detail=f"regex {updated.subscribed_topic_regex}" if updated.uses_regex else "subscription changed",
                )
            )

        reconciled, target_epoch, bump = self.advance_member(
            MemberChange(
                group, member, updated, owned, now_ms, records, events,
                replaced=replaced, rejoined=rejoined, is_new=is_new,
            )
        )
        self.sessions.schedule_session_timeout(group_id, member_id)

        # 5. The answer.
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.intervals.interval(
                group, member_id, bump, reconciled.is_reconciled_to(target_epoch), now_ms
            ),
        )
        full = epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        if full or (
            reconciled.assigned_partitions is not member.assigned_partitions
            and reconciled.assigned_partitions != member.assigned_partitions
        ):
            response.assignment = ConsumerGroupHeartbeatResponseAssignment(
                topic_partitions=[
                    ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=t, partitions=sorted(parts))
                    for t, parts in sorted(reconciled.assigned_partitions.items())
                ]
            )
        return answer_after_write(response, records, events=events)

    def advance_member(self, change: MemberChange) -> tuple[ConsumerGroupMember, int, bool]:
        """Steps 2-4 of a heartbeat (and of a classic member's JoinGroup in a consumer group;
        see ``ConsumerRebalance.advance_member``), then the member's rebalance timer: armed
        while it has partitions to revoke. Returns (the reconciled member, the target
        assignment epoch, whether the group epoch was bumped)."""
        reconciled, target_epoch, bump = self.rebalance.advance_member(change)
        group_id, updated = change.group.group_id, change.updated
        if reconciled is not updated and reconciled != updated:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self.sessions.schedule_rebalance_timeout(group_id, reconciled)
            else:
                self.timer.cancel(rebalance_key(group_id, updated.member_id))
        return reconciled, target_epoch, bump

    def unload(self, group_id: str) -> None:
        """Drop a group from memory (its partition moved to another coordinator): its
        records stay in the log for the next owner."""
        self.sessions.forget(group_id)
        self.groups.pop(group_id, None)

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: PartitionMap | None,
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member, the member it replaces or None): Kafka's static-member rules."""
        existing = group.static_member(instance_id)
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if existing is None:
                member = group.member(member_id) or ConsumerGroupMember(member_id=member_id)
                log.info("group %s: static member %s (%s) joins", group.group_id, member_id, instance_id)
                return member, None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol:
                # A member of the consumer protocol must have left (-2) first; a classic one
                # is replaced at once (a rolling upgrade restarts it with the new protocol).
                raise KafkaError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group "
                    f"because the instance id is owned by {existing.member_id} member.",
                )
            log.info(
                "group %s: static member %s rejoins as %s, keeping its assignment",
                group.group_id,
                instance_id,
                member_id,
            )
            return replacement_for_static_member(existing, member_id).replace(classic=None), existing
        if existing is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.",
            )
        validate_member_epoch(existing, epoch, owned)
        return existing, None
