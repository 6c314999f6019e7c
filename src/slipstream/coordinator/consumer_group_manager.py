"""ConsumerGroupHeartbeat: the consumer (KIP-848) group protocol, as a pure state machine.

One heartbeat does what Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` does,
in the same order, and returns the records that say what changed:

1. find or create the group and the member (static members may take over the
   place of a member that left with epoch -2), and check the member's epoch;
2. apply the heartbeat's optional fields to the member; a changed subscription,
   a regex that resolves to other topics, or other subscribed topic metadata
   (the hash of the topics image) bumps the group epoch;
3. if the group epoch is ahead of the target assignment, run the server-side
   assignor for the new epoch;
4. reconcile the member towards its target (``consumer/reconciliation.py``);
5. answer with the member's epoch and, when it changed or was asked for in
   full, its assignment.

Nothing here changes the groups directly: ``replay`` (``consumer_records.py``)
applies the records once the log accepted them. Timers: a member's session
(``group.consumer.session.timeout.ms``), and its rebalance timeout while it
holds partitions it must revoke; either expiring fences the member.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..protocol.apis.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseAssignment,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.errors import name as error_name
from . import consumer_records as crec
from . import history as ev
from .append_errors import append_error_for_group
from .config import CoordinatorConfig
from .consumer import (
    ASSIGNORS,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    PartitionAssignor,
    PartitionAssignorError,
    PartitionMap,
    TargetAssignmentBuilder,
    matching_topics,
    reconcile,
    replacement_for_static_member,
    validate_member_epoch,
    validate_subscription_regex,
)
from .consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from .result import CoordinatorResult, Record, RequestContext
from .timer import GuardedTimer
from .topics_image import TopicsImage

log = logging.getLogger("slipstream.coordinator")

# ConsumerGroupHeartbeat v1 (KIP-1082): the consumer generates its member id.
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1
# A Stable group whose epoch moved this recently still heartbeats fast: members that start
# together keep arriving for a while after the first one settles.
SETTLE_WINDOW_MS = 1_000
# A fence whose write failed is tried again this much later.
FENCE_RETRY_MS = 500


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


def heartbeat_error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=code, error_message=message, member_epoch=0, heartbeat_interval_ms=0
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


@dataclass(frozen=True, slots=True)
class ConsumerGroupTimeouts:
    """A group's session timeout and regular heartbeat interval (broker defaults or the
    group's own configs)."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    # The interval is the group's own (config resource GROUP), not the broker default: it
    # is given as it is, never shortened by the heartbeat budget.
    interval_is_group_config: bool = False


class ConsumerGroupManager:
    def __init__(
        self,
        config: CoordinatorConfig,
        timer: GuardedTimer,
        topics: Callable[[], TopicsImage],
        partition_for: Callable[[str], int],
        timeouts: Callable[[str], ConsumerGroupTimeouts] | None = None,
    ) -> None:
        self.config = config
        self.timer = timer
        self.topics = topics
        self.partition_for = partition_for
        default = ConsumerGroupTimeouts(
            config.consumer_group_session_timeout_ms, config.consumer_group_heartbeat_interval_ms
        )
        self.timeouts = timeouts or (lambda _group_id: default)
        self.groups: dict[str, ConsumerGroup] = {}
        # Set by the coordinator: turns a group whose last consumer-protocol member leaves
        # into a classic group (online downgrade); None when it does not (see _fence).
        self.downgrade: Callable[[ConsumerGroup, ConsumerGroupMember, int], CoordinatorResult | None] | None = None
        # Members of all consumer groups, counted at most once a second (for the budget).
        self._member_count = 0
        self._member_count_at: int | None = None

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

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
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, now_ms)
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
        member_id = req.member_id or str(uuid.uuid4())
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
        if updated != member:
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
            group, member, updated, owned, now_ms, records, events,
            replaced=replaced, rejoined=rejoined, is_new=is_new,
        )
        self._schedule_session_timeout(group_id, member_id)

        # 5. The answer.
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._interval(group, bump, reconciled.is_reconciled_to(target_epoch), now_ms),
        )
        full = epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        if full or reconciled.assigned_partitions != member.assigned_partitions:
            response.assignment = ConsumerGroupHeartbeatResponseAssignment(
                topic_partitions=[
                    ConsumerGroupHeartbeatResponseTopicPartitions(topic_id=t, partitions=sorted(parts))
                    for t, parts in sorted(reconciled.assigned_partitions.items())
                ]
            )
        return _answer_after_write(response, records, events=events)

    def advance_member(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        owned: PartitionMap | None,
        now_ms: int,
        records: list[Record],
        events: list[ev.GroupEvent],
        *,
        replaced: ConsumerGroupMember | None = None,
        rejoined: bool = False,
        is_new: bool = False,
    ) -> tuple[ConsumerGroupMember, int, bool]:
        """Steps 2-4 of a heartbeat (and of a classic member's JoinGroup in a consumer group):
        bump the group epoch if ``updated`` changed what the group consumes, compute a new
        target assignment for a new epoch, and reconcile the member towards its target.
        Appends the records and events; returns (the reconciled member, the target
        assignment epoch, whether the group epoch was bumped)."""
        group_id = group.group_id
        member_id = updated.member_id
        partition = self.partition_for(group_id)
        image = self.topics()
        subscription_changed = updated.subscription_differs(member)
        # 2. Does the group need a new epoch?
        bump = group.group_epoch == 0 or rejoined or subscription_changed
        bump_cause = (
            "group created" if group.group_epoch == 0
            else f"member {member_id} rejoined" if rejoined
            else f"member {member_id} joined" if is_new
            else f"member {member_id} changed its subscription" if subscription_changed
            else ""
        )
        resolved = dict(group.resolved_regexes)
        refresh = image.version != group.checked_topics_version
        regexes = set(group.subscribed_regexes)
        old_regex = member.subscribed_topic_regex
        if (
            member.uses_regex
            and old_regex != updated.subscribed_topic_regex
            and group.subscribed_regexes.get(old_regex, 0) <= 1
        ):
            # The member was the regex's last subscriber.
            regexes.discard(old_regex)
            if old_regex in resolved:
                del resolved[old_regex]
                records.append(crec.regex_tombstone(partition, group_id, old_regex))
        if updated.uses_regex:
            regexes.add(updated.subscribed_topic_regex)
        names: list[str] | None = None
        for regex in sorted(regexes):
            if regex in resolved and not refresh:
                continue
            if names is None:
                names = image.public_names()
            topics = matching_topics(regex, names)
            if resolved.get(regex) != topics:
                resolved[regex] = topics
                records.append(crec.regex_record(partition, group_id, regex, topics, image.version, now_ms))
                bump = True
                bump_cause = bump_cause or f"regex {regex} now matches {sorted(topics)}"
        metadata_hash = group.metadata_hash
        if bump or refresh:
            members = dict(group.members)
            if replaced is not None:
                members.pop(replaced.member_id, None)
            members[member_id] = updated
            metadata_hash = image.metadata_hash(_subscribed_names(members.values(), resolved))
            if metadata_hash != group.metadata_hash:
                bump = True
                bump_cause = bump_cause or "topic metadata changed"
            elif not bump:
                group.checked_topics_version = image.version  # a cache: nothing changed
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(crec.group_epoch_record(partition, group_id, group_epoch, metadata_hash))
            log.info("group %s: group epoch bumped to %d", group_id, group_epoch)
            events.append(
                ev.GroupEpochBumped(group_id=group_id, at_ms=now_ms, epoch=group_epoch, cause=bump_cause or "new epoch")
            )

        # 3. A new target assignment for a new group epoch.
        if group_epoch > group.target_assignment_epoch:
            assignor = self._assignor(group, member, updated)
            builder = (
                TargetAssignmentBuilder.for_group(group, group_epoch, assignor, image.by_id)
                .with_resolved_regexes(resolved)
                .add_or_update_member(updated)
            )
            result = builder.build()
            changed = dict(result.changed)
            if rejoined:
                # Its old target was tombstoned above: write it even where it did not change.
                changed[member_id] = result.assignment.get(member_id, {})
            for changed_id, parts in sorted(changed.items()):
                records.append(crec.target_assignment_record(partition, group_id, changed_id, parts))
            records.append(crec.target_epoch_record(partition, group_id, group_epoch, now_ms))
            events.append(
                ev.TargetAssignmentComputed(
                    group_id=group_id,
                    at_ms=now_ms,
                    epoch=group_epoch,
                    changed_member_ids=tuple(sorted(changed)),
                    assignor=_assignor_name(assignor),
                )
            )
            target_epoch = group_epoch
            target = result.assignment.get(member_id, {})
        else:
            target_epoch = group.target_assignment_epoch
            target = group.target_assignment_of(replaced.member_id if replaced is not None else member_id)

        # 4. Reconcile the member towards its target.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
        if reconciled != updated:
            records.append(crec.current_assignment_record(partition, group_id, reconciled))
            if reconciled.member_epoch != updated.member_epoch or reconciled.state is not updated.state:
                events.append(_reconciliation_step(group_id, now_ms, updated, reconciled, image))
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group_id, reconciled)
            else:
                self.timer.cancel(rebalance_key(group_id, member_id))
        return reconciled, target_epoch, bump

    def _interval(self, group: ConsumerGroup, bumped: bool, reconciled: bool, now_ms: int) -> int:
        """The regular interval for a member of a settled group, a short one while it changes."""
        timeouts = self.timeouts(group.group_id)
        regular = timeouts.heartbeat_interval_ms
        settled = (
            reconciled
            and not bumped
            and group.state is ConsumerGroupState.STABLE
            and now_ms - group.epoch_changed_ms >= min(regular, SETTLE_WINDOW_MS)
        )
        if not settled:
            return min(regular, self.config.consumer_group_reconciling_heartbeat_interval_ms)
        budget = self.config.consumer_group_heartbeat_budget_per_s
        if budget <= 0 or timeouts.interval_is_group_config:
            return regular
        within_budget = -(-self._members_now(now_ms) * 1000 // budget)
        return min(regular, max(self.config.consumer_group_idle_heartbeat_floor_ms, within_budget))

    def _members_now(self, now_ms: int) -> int:
        """Members of all consumer groups, recounted when the last count is a second old."""
        if self._member_count_at is None or now_ms - self._member_count_at >= 1_000:
            self._member_count = sum(len(g.members) for g in self.groups.values())
            self._member_count_at = now_ms
        return self._member_count

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

    def _assignor(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember
    ) -> PartitionAssignor:
        counts = Counter(group.server_assignor_counts)
        if member.server_assignor is not None and group.has_member(member.member_id):
            counts[member.server_assignor] -= 1
        if updated.server_assignor is not None:
            counts[updated.server_assignor] += 1
        named = [(n, c) for n, c in counts.items() if c > 0]
        name = min(named, key=lambda kv: (-kv[1], kv[0]))[0] if named else self.config.consumer_group_assignors[0]
        return ASSIGNORS[name]

    # ================================================================ leaving and fencing

    def _leave(self, req: ConsumerGroupHeartbeatRequest, now_ms: int) -> CoordinatorResult:
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
        return _answer_after_write(
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
        metadata_hash = self.topics().metadata_hash(_subscribed_names(others, resolved))
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
                return _with_response(downgraded, response, left)

        def stop_timers() -> None:
            self.cancel_timers(group_id, member_id)

        def retry() -> None:
            log.warning("group %s: fencing member %s failed to write; retrying", group_id, member_id)
            self._schedule_session_timeout(group_id, member_id, FENCE_RETRY_MS)

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
            return _after_write(records, stop_timers, retry, events)
        return _answer_after_write(response, records, on_success=stop_timers, events=events)

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
        metadata_hash = self.topics().metadata_hash(_subscribed_names(others, dict(group.resolved_regexes)))
        records.append(crec.group_epoch_record(partition, group_id, group.group_epoch + 1, metadata_hash))
        return records

    # ================================================================ timers

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(session_key(group_id, member_id))
        self.timer.cancel(rebalance_key(group_id, member_id))

    def schedule_session_timeout(self, group_id: str, member_id: str, delay_ms: int | None = None) -> None:
        """(Re)start a member's session: ``delay_ms``, else the group's session timeout."""
        self._schedule_session_timeout(group_id, member_id, delay_ms)

    def _schedule_session_timeout(self, group_id: str, member_id: str, delay_ms: int | None = None) -> None:
        def expire(now_ms: int) -> CoordinatorResult:
            group = self.groups.get(group_id)
            member = None if group is None else group.member(member_id)
            if group is None or member is None:
                return CoordinatorResult()
            log.info("group %s: member %s fenced: its session expired", group_id, member_id)
            return self.fence(group, member, now_ms, "session-expired")

        timeout = self.timeouts(group_id).session_timeout_ms if delay_ms is None else delay_ms
        self.timer.schedule(session_key(group_id, member_id), timeout, expire)

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
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
            self._schedule_session_timeout(group.group_id, member.member_id, classic_ms)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, member)

    def forget(self, group_id: str) -> None:
        """Cancel every timer of a group about to be deleted."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for member_id in group.members:
            self.timer.cancel(session_key(group_id, member_id))
            self.timer.cancel(rebalance_key(group_id, member_id))

    def unload(self, group_id: str) -> None:
        """Drop a group from memory (its partition moved to another coordinator): its
        records stay in the log for the next owner."""
        self.forget(group_id)
        self.groups.pop(group_id, None)


def _subscribed_names(members: Iterable[ConsumerGroupMember], resolved: dict[str, frozenset[str]]) -> set[str]:
    names: set[str] = set()
    for m in members:
        names |= m.subscribed_topic_names
        if m.uses_regex:
            names |= resolved.get(m.subscribed_topic_regex, frozenset())
    return names


def _after_write(
    records: list[Record],
    on_success: Callable[[], None] | None = None,
    on_failure: Callable[[], None] | None = None,
    events: Sequence[ev.GroupEvent] = (),
) -> CoordinatorResult:
    """``events`` count only once ``records`` are durable: a failed write decided nothing."""

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            if on_failure is not None:
                on_failure()
            return CoordinatorResult()
        if on_success is not None:
            on_success()
        return CoordinatorResult(events=events)

    return CoordinatorResult(records=records, after_append=after_append)


def _answer_after_write(
    response: ConsumerGroupHeartbeatResponse,
    records: list[Record],
    on_success: Callable[[], None] | None = None,
    events: Sequence[ev.GroupEvent] = (),
) -> CoordinatorResult:
    """Answer once ``records`` are durable; a failed write answers its error instead, so a
    member never acts on an epoch or an assignment the group did not keep (and ``events``,
    the decisions the records carry, are dropped)."""
    if not records:
        return CoordinatorResult(response=response, events=events)

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        if error:
            return CoordinatorResult(response=heartbeat_error(append_error_for_group(error)))
        if on_success is not None:
            on_success()
        return CoordinatorResult(response=response, events=events)

    return CoordinatorResult(records=records, after_append=after_append)


def _with_response(
    result: CoordinatorResult, response: ConsumerGroupHeartbeatResponse | None, left: ev.MemberLeft | None
) -> CoordinatorResult:
    """A downgrade's result answering a leave heartbeat (if any) once it is durable."""
    if response is None and left is None:
        return result
    after = result.after_append

    def after_append(error: int, now_ms: int) -> CoordinatorResult:
        nxt = after(error, now_ms) if after is not None else CoordinatorResult()
        if error:
            nxt.response = heartbeat_error(append_error_for_group(error)) if response is not None else None
            return nxt
        nxt.response = response
        if left is not None:
            nxt.events = (left, *nxt.events)
        return nxt

    return CoordinatorResult(records=result.records, completions=result.completions, after_append=after_append,
                             events=result.events)


# A fenced member's cause, as the group epoch bump it brings says it.
_FENCE_CAUSES = {
    "left": "left",
    "session-expired": "was fenced: its session expired",
    "rebalance-timeout": "was fenced: it did not revoke its partitions in time",
}

# Errors that refuse a heartbeat for a stale epoch or a taken instance id: the history notes them.
_FENCING_ERRORS = frozenset(
    {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNRELEASED_INSTANCE_ID}
)


def _assignor_name(assignor: PartitionAssignor) -> str | None:
    for name, known in ASSIGNORS.items():
        if known is assignor:
            return name
    return None


def _partition_names(image: TopicsImage, partitions: PartitionMap) -> tuple[str, ...]:
    return tuple(
        f"{image.name_of(topic_id) or topic_id}-{p}"
        for topic_id, parts in sorted(partitions.items())
        for p in sorted(parts)
    )


def _reconciliation_step(
    group_id: str, now_ms: int, before: ConsumerGroupMember, after: ConsumerGroupMember, image: TopicsImage
) -> ev.MemberEpochAdvanced:
    gained = {
        t: frozenset(parts) - frozenset(before.assigned_partitions.get(t, ()))
        for t, parts in after.assigned_partitions.items()
    }
    return ev.MemberEpochAdvanced(
        group_id=group_id,
        at_ms=now_ms,
        member_id=after.member_id,
        from_epoch=before.member_epoch,
        to_epoch=after.member_epoch,
        state=after.state.name.lower().replace("_", "-"),
        revoking=_partition_names(image, after.partitions_pending_revocation),
        assigning=_partition_names(image, {t: ps for t, ps in gained.items() if ps}),
    )
