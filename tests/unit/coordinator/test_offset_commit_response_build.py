"""The OffsetCommit response the coordinator builds without Struct.__init__ equals the ordinary one."""

from __future__ import annotations

from slipstream.coordinator.offset_manager import _new
from slipstream.protocol.apis import offset_commit as oc
from slipstream.protocol.primitives import ZERO_UUID


def test_fast_built_commit_response_equals_ordinary_construction() -> None:
    fast = _new(
        oc.OffsetCommitResponse,
        throttle_time_ms=0,
        topics=[
            _new(
                oc.OffsetCommitResponseTopic,
                name="t",
                topic_id=ZERO_UUID,
                partitions=[_new(oc.OffsetCommitResponsePartition, partition_index=3, error_code=0)],
            )
        ],
    )
    ordinary = oc.OffsetCommitResponse(
        topics=[
            oc.OffsetCommitResponseTopic(
                name="t", partitions=[oc.OffsetCommitResponsePartition(partition_index=3, error_code=0)]
            )
        ]
    )
    assert fast == ordinary
    # Every declared field is set, so every version encodes the same bytes.
    for cls in (oc.OffsetCommitResponse, oc.OffsetCommitResponseTopic, oc.OffsetCommitResponsePartition):
        assert {f.name for f in cls.FIELDS} <= set(vars(cls()).keys())
    assert {f.name for f in oc.OffsetCommitResponse.FIELDS} == set(vars(fast))
    assert {f.name for f in oc.OffsetCommitResponseTopic.FIELDS} == set(vars(fast.topics[0]))
    assert {f.name for f in oc.OffsetCommitResponsePartition.FIELDS} == set(vars(fast.topics[0].partitions[0]))
    for version in range(11):
        assert oc.SPEC.encode_response(fast, version).getvalue() == oc.SPEC.encode_response(ordinary, version).getvalue()
