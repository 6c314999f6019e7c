"""The group admin APIs: DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupDescribe.

Read-only views of classic and consumer groups, except DeleteGroups, which writes the
tombstones of empty groups and their offsets and answers once they are durable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol import consumer_protocol as cp
from ..protocol.apis.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeResponseAssignment,
    ConsumerGroupDescribeResponseGroup,
    ConsumerGroupDescribeResponseMember,
    ConsumerGroupDescribeResponseTopicPartitions,
)
from ..protocol.apis.delete_groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteGroupsResponseDeletableGroupResult,
)
from ..protocol.apis.describe_groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeGroupsResponseDescribedGroup,
    DescribeGroupsResponseDescribedGroupMember,
)
from ..protocol.apis.list_groups import (
    ListGroupsRequest,
    ListGroupsResponse,
    ListGroupsResponseListedGroup,
)
from ..protocol.errors import ErrorCode
from . import consumer_records as crec
from . import records as rec
from .append_errors import append_error_for_group
from .config import CoordinatorConfig
from .consumer import ConsumerGroup, ConsumerGroupState, PartitionMap
from .consumer_group_manager import ConsumerGroupManager
from .group_manager import GroupManager
from .offset_manager import OffsetManager
from .ownership import PartitionOwnership
from .result import Completion, CoordinatorResult, Pending, Record, RequestContext
from .state import GroupState

log = logging.getLogger("slipstream.coordinator")

DELETE_GROUPS_KEY = 42
# No authorizer: every operation a group supports is allowed (READ, DELETE, DESCRIBE).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
# ConsumerGroupDescribe's member types.
CONSUMER_MEMBER_TYPE = 1
CLASSIC_MEMBER_TYPE = 0


class GroupAdmin:
    def __init__(
        self,
        config: CoordinatorConfig,
        ownership: PartitionOwnership,
        group_manager: GroupManager,
        consumer_groups: ConsumerGroupManager,
        offset_manager: OffsetManager,
        new_pending: Callable[[int, int], Pending],
    ) -> None:
        self.config = config
        self.ownership = ownership
        self.group_manager = group_manager
        self.consumer_groups = consumer_groups
        self.offset_manager = offset_manager
        self._new_pending = new_pending

    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest) -> CoordinatorResult:
        include_ops = ctx.api_version >= 3 and req.include_authorized_operations
        out = DescribeGroupsResponse()
        for group_id in req.groups:
            described = self._describe(group_id)
            if ctx.api_version >= 6 and described.group_state == str(GroupState.DEAD) and not described.error_code:
                described.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                described.error_message = f"Group {group_id} not found."
            if include_ops and not described.error_code:
                described.authorized_operations = GROUP_OPERATIONS
            out.groups.append(described)
        return CoordinatorResult(response=out)

    def _describe(self, group_id: str) -> DescribeGroupsResponseDescribedGroup:
        if code := self.ownership.group_unavailable(group_id):
            return DescribeGroupsResponseDescribedGroup(error_code=code, group_id=group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self._consumer_group_as_classic(consumer_group)
        group = self.group_manager.get(group_id)
        if group is None:
            return DescribeGroupsResponseDescribedGroup(group_id=group_id, group_state=str(GroupState.DEAD))
        stable = group.state is GroupState.STABLE and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(
                DescribeGroupsResponseDescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                    member_assignment=m.assignment,
                )
            )
        return DescribeGroupsResponseDescribedGroup(
            group_id=group_id,
            group_state=str(group.state),
            protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "",
            members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    def _consumer_group_as_classic(self, group: ConsumerGroup) -> DescribeGroupsResponseDescribedGroup:
        """A consumer group in DescribeGroups' classic shape (as Kafka's ``asDescribedGroup``):
        protocol type "consumer", the assignor as protocol, subscriptions and assignments
        encoded with the classic consumer protocol."""
        image = self.consumer_groups.topics()
        members = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            topics = sorted(group.member_subscribed_topics(m))
            assigned = [
                cp.ConsumerProtocolTopicPartition(topic=name, partitions=sorted(parts))
                for topic_id, parts in sorted(m.assigned_partitions.items())
                if (name := image.name_of(topic_id)) is not None
            ]
            members.append(
                DescribeGroupsResponseDescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=cp.encode_subscription(cp.ConsumerProtocolSubscription(topics=topics), 0),
                    member_assignment=cp.encode_assignment(
                        cp.ConsumerProtocolAssignment(assigned_partitions=assigned), 0
                    ),
                )
            )
        return DescribeGroupsResponseDescribedGroup(
            group_id=group.group_id,
            group_state=group.state.value,
            protocol_type=CONSUMER_GROUP_TYPE,
            protocol_data=self._assignor_name(group),
            members=members,
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest) -> CoordinatorResult:
        if self.ownership.is_loading:
            return CoordinatorResult(response=ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        version = ctx.api_version
        states = {s.strip().lower() for s in req.states_filter} if version >= 4 else set()
        types = {t.strip().lower() for t in req.types_filter} if version >= 5 else set()
        out = ListGroupsResponse()
        for group in self.group_manager.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if states and group.state.lower_name not in states:
                continue
            if types and CLASSIC_GROUP_TYPE not in types:
                continue
            out.groups.append(
                ListGroupsResponseListedGroup(
                    group_id=group.group_id,
                    protocol_type=group.protocol_type or "",
                    group_state=str(group.state),
                    group_type=CLASSIC_GROUP_TYPE,
                )
            )
        if types and CONSUMER_GROUP_TYPE not in types:
            return CoordinatorResult(response=out)
        for consumer_group in self.consumer_groups.groups.values():
            state = consumer_group.state
            if state is ConsumerGroupState.DEAD or (states and state.value.lower() not in states):
                continue
            out.groups.append(
                ListGroupsResponseListedGroup(
                    group_id=consumer_group.group_id,
                    protocol_type=CONSUMER_GROUP_TYPE,
                    group_state=state.value,
                    group_type=CONSUMER_GROUP_TYPE,
                )
            )
        return CoordinatorResult(response=out)

    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest) -> CoordinatorResult:
        results: list[DeleteGroupsResponseDeletableGroupResult] = []
        records: list[Record] = []
        for group_id in req.groups_names:
            error = self._delete_group_records(group_id, records)
            results.append(DeleteGroupsResponseDeletableGroupResult(group_id=group_id, error_code=error))
        response = DeleteGroupsResponse(results=results)
        if not records:
            return CoordinatorResult(response=response)
        own = self._new_pending(DELETE_GROUPS_KEY, ctx.api_version)

        def after_append(error: int, now: int) -> CoordinatorResult:
            if error:
                mapped = append_error_for_group(error)
                for r in results:
                    if not r.error_code:
                        r.error_code = mapped
            return CoordinatorResult(completions=[Completion(own, response)])

        return CoordinatorResult(pending=own, records=records, after_append=after_append)

    def _delete_group_records(self, group_id: str, records: list[Record]) -> int:
        if code := self.ownership.group_unavailable(group_id):
            return code
        partition = self.ownership.partition_for(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                return ErrorCode.NON_EMPTY_GROUP
            self._offset_tombstones(group_id, records)
            records.extend(crec.group_tombstones(partition, consumer_group))
            log.info("deleting consumer group %s", group_id)
            return ErrorCode.NONE
        group = self.group_manager.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP
        self._offset_tombstones(group_id, records)
        records.append(rec.group_tombstone(partition, group_id))
        log.info("deleting group %s", group_id)
        return ErrorCode.NONE

    def _offset_tombstones(self, group_id: str, records: list[Record]) -> None:
        partition = self.ownership.partition_for(group_id)
        for topic, by_partition in self.offset_manager.offsets.get(group_id, {}).items():
            for index in by_partition:
                records.append(rec.offset_tombstone(partition, group_id, topic, index))

    def consumer_group_describe(self, ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> CoordinatorResult:
        out = ConsumerGroupDescribeResponse()
        for group_id in req.group_ids:
            if code := self.ownership.group_unavailable(group_id):
                described = self._described_consumer_group(group_id, False, 0)
                described.error_code = code
                described.error_message = None
            elif self.group_manager.get(group_id) is not None and self.consumer_groups.get(group_id) is None:
                described = self._described_consumer_group(group_id, False, 0)
                described.error_message = f"Group {group_id} is not a consumer group."
            else:
                described = self._described_consumer_group(
                    group_id, req.include_authorized_operations, GROUP_OPERATIONS
                )
            out.groups.append(described)
        return CoordinatorResult(response=out)

    def _assignor_name(self, group: ConsumerGroup) -> str:
        return group.preferred_server_assignor() or self.config.consumer_group_assignors[0]

    def _described_consumer_group(
        self, group_id: str, include_operations: bool, operations: int
    ) -> ConsumerGroupDescribeResponseGroup:
        group = self.consumer_groups.get(group_id)
        if group is None:
            return ConsumerGroupDescribeResponseGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found.",
                group_id=group_id,
                group_state="Dead",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
            )
        image = self.consumer_groups.topics()

        def assignment(parts: PartitionMap) -> ConsumerGroupDescribeResponseAssignment:
            return ConsumerGroupDescribeResponseAssignment(
                topic_partitions=[
                    ConsumerGroupDescribeResponseTopicPartitions(
                        topic_id=t, topic_name=image.name_of(t) or "", partitions=sorted(ps)
                    )
                    for t, ps in sorted(parts.items())
                    if image.name_of(t) is not None
                ]
            )

        members = [
            ConsumerGroupDescribeResponseMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=sorted(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or None,
                assignment=assignment(m.assigned_partitions),
                target_assignment=assignment(group.target_assignment_of(m.member_id)),
                member_type=CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            )
            for m in sorted(group.members.values(), key=lambda m: m.member_id)
        ]
        described = ConsumerGroupDescribeResponseGroup(
            error_code=ErrorCode.NONE,
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.target_assignment_epoch,
            assignor_name=self._assignor_name(group),
            members=members,
        )
        if include_operations:
            described.authorized_operations = operations
        return described
