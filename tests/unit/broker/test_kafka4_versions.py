"""The newest versions Kafka 4.x serves, sent raw at exactly those versions.

Metadata v13 (top-level error code), DescribeGroups v6 (GROUP_ID_NOT_FOUND for an
unknown group, KIP-1043), Produce v12, Fetch v17/v18 (follower-only fields),
ListOffsets v10 (timeout), DescribeLogDirs v5 (cordoned flag).
"""

from __future__ import annotations

import pytest
from broker_helpers import create_topic, raw_request

from slipstream.broker.broker import Broker
from slipstream.protocol.apis import describe_groups as dg
from slipstream.protocol.apis import describe_log_dirs as dld
from slipstream.protocol.apis import fetch as f
from slipstream.protocol.apis import list_offsets as lo
from slipstream.protocol.apis import metadata as md
from slipstream.protocol.apis import produce as pr
from slipstream.protocol.errors import ErrorCode
from slipstream.protocol.records import ProducerRecord, build_batch

pytestmark = pytest.mark.timeout(30)


def test_metadata_v13_has_a_top_level_error_code(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    create_topic(admin, "m13", 2)
    response = raw_request(
        broker, md.SPEC, 13, md.MetadataRequest(topics=[md.MetadataRequestTopic(name="m13")])
    )
    assert response.error_code == ErrorCode.NONE
    (topic,) = response.topics
    assert (topic.name, topic.error_code, len(topic.partitions)) == ("m13", 0, 2)


def test_describe_groups_v6_names_unknown_groups(broker: Broker) -> None:
    request = dg.DescribeGroupsRequest(groups=["nobody"], include_authorized_operations=False)
    (v6,) = raw_request(broker, dg.SPEC, 6, request).groups
    assert (v6.error_code, v6.error_message, v6.group_state) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group nobody not found.",
        "Dead",
    )
    (v5,) = raw_request(broker, dg.SPEC, 5, request).groups
    assert (v5.error_code, v5.group_state) == (ErrorCode.NONE, "Dead")


def test_produce_v12_fetch_v18_and_list_offsets_v10(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    create_topic(admin, "k4", 1)
    batch = build_batch([ProducerRecord(b"k", b"v", timestamp_ms=1_700_000_000_000)])
    produced = raw_request(
        broker, pr.SPEC, 12,
        pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            pr.ProduceRequestTopicData(name="k4", partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=memoryview(batch))
            ])
        ]),
    )
    (part,) = produced.responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (0, 0)

    topic_id = raw_request(
        broker, md.SPEC, 13, md.MetadataRequest(topics=[md.MetadataRequestTopic(name="k4")])
    ).topics[0].topic_id
    for version in (17, 18):
        fetched = raw_request(
            broker, f.SPEC, version,
            f.FetchRequest(max_wait_ms=0, min_bytes=0, topics=[
                f.FetchRequestTopic(topic_id=topic_id, partitions=[
                    f.FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ])
            ]),
        )
        (data,) = fetched.responses[0].partitions
        assert (data.error_code, data.high_watermark) == (0, 1)
        assert data.records is not None and len(data.records) > 0

    listed = raw_request(
        broker, lo.SPEC, 10,
        lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
            lo.ListOffsetsRequestTopic(name="k4", partitions=[
                lo.ListOffsetsRequestPartition(partition_index=0, timestamp=-1)
            ])
        ]),
    )
    (offsets,) = listed.topics[0].partitions
    assert (offsets.error_code, offsets.offset) == (0, 1)


def test_describe_log_dirs_v5(broker: Broker) -> None:
    (result,) = raw_request(broker, dld.SPEC, 5, dld.DescribeLogDirsRequest(topics=[])).results
    assert (result.error_code, result.is_cordoned, result.topics) == (0, False, [])


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    import uuid

    from slipstream.protocol.apis import offset_commit as oc
    from slipstream.protocol.apis import offset_fetch as of

    create_topic(admin, "ids", 2)
    topic_id = raw_request(
        broker, md.SPEC, 13, md.MetadataRequest(topics=[md.MetadataRequestTopic(name="ids")])
    ).topics[0].topic_id
    stranger = uuid.uuid4()
    committed = raw_request(
        broker, oc.SPEC, 10,
        oc.OffsetCommitRequest(group_id="g10", member_id="", topics=[
            oc.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                oc.OffsetCommitRequestPartition(partition_index=1, committed_offset=7, committed_metadata="m")
            ]),
            oc.OffsetCommitRequestTopic(topic_id=stranger, partitions=[
                oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="")
            ]),
        ]),
    )
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics] == [
        (topic_id, [(1, 0)]),
        (stranger, [(0, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]

    def fetch(version: int, topics: list | None) -> list:  # type: ignore[type-arg]
        response = raw_request(
            broker, of.SPEC, version,
            of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g10", topics=topics)], require_stable=False),
        )
        (group,) = response.groups
        assert group.error_code == 0
        key = (lambda t: t.topic_id) if version >= 10 else (lambda t: t.name)
        return [(key(t), [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                for t in group.topics]

    assert fetch(10, None) == [(topic_id, [(1, 7, 0)])]
    assert fetch(10, [of.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0, 1]),
                      of.OffsetFetchRequestTopics(topic_id=stranger, partition_indexes=[3])]) == [
        (topic_id, [(0, -1, 0), (1, 7, 0)]),
        (stranger, [(3, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    # v9 and older still name topics.
    assert fetch(9, None) == [("ids", [(1, 7, 0)])]


def test_produce_v13_names_topics_by_id(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    import uuid

    create_topic(admin, "p13", 1)
    topic_id = raw_request(
        broker, md.SPEC, 13, md.MetadataRequest(topics=[md.MetadataRequestTopic(name="p13")])
    ).topics[0].topic_id
    stranger = uuid.uuid4()
    batch = memoryview(build_batch([ProducerRecord(None, b"v", timestamp_ms=1_700_000_000_000)]))
    produced = raw_request(
        broker, pr.SPEC, 13,
        pr.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            pr.ProduceRequestTopicData(topic_id=topic_id, partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=batch)
            ]),
            pr.ProduceRequestTopicData(topic_id=stranger, partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=batch)
            ]),
        ]),
    )
    answers = [(t.topic_id, [(p.error_code, p.base_offset) for p in t.partition_responses]) for t in produced.responses]
    assert answers == [(topic_id, [(0, 0)]), (stranger, [(ErrorCode.UNKNOWN_TOPIC_ID, -1)])]


def test_list_offsets_v11_earliest_pending_upload(broker: Broker, admin) -> None:  # type: ignore[no-untyped-def]
    create_topic(admin, "k11", 1)
    batch = build_batch([ProducerRecord(b"k", b"v", timestamp_ms=1_700_000_000_000)])
    raw_request(
        broker, pr.SPEC, 9,
        pr.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            pr.ProduceRequestTopicData(name="k11", partition_data=[
                pr.ProduceRequestPartitionData(index=0, records=memoryview(batch))
            ])
        ]),
    )

    def offset_for(timestamp: int) -> tuple[int, int]:
        listed = raw_request(
            broker, lo.SPEC, 11,
            lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
                lo.ListOffsetsRequestTopic(name="k11", partitions=[
                    lo.ListOffsetsRequestPartition(partition_index=0, timestamp=timestamp)
                ])
            ]),
        )
        (found,) = listed.topics[0].partitions
        return found.error_code, found.offset

    assert offset_for(-1) == (0, 1)
    assert offset_for(-2) == (0, 0)
    assert offset_for(-6) == (0, -1)  # no tiered storage: nothing is pending upload
    assert offset_for(-7) == (ErrorCode.INVALID_REQUEST, -1)


def test_init_producer_id_v6(broker: Broker) -> None:
    from slipstream.protocol.apis import init_producer_id as ipi

    plain = raw_request(broker, ipi.SPEC, 6, ipi.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1))
    assert plain.error_code == 0 and plain.producer_id >= 0 and plain.producer_epoch == 0
    assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)
    two_phase = raw_request(
        broker, ipi.SPEC, 6,
        ipi.InitProducerIdRequest(transactional_id="tpc", transaction_timeout_ms=60_000, enable2_pc=True),
    )
    assert two_phase.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert two_phase.producer_id == -1
