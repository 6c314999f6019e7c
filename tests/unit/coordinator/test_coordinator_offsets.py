"""OffsetCommit in every group state, OffsetFetch across versions, OffsetDelete, DeleteGroups, retention."""

from __future__ import annotations

import pytest
from coord_context import SESSION_MS, GroupContext, Joined

from slipstream.coordinator import CoordinatorConfig, GroupState, RequestContext
from slipstream.protocol import group_records as gr
from slipstream.protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from slipstream.protocol.errors import ErrorCode

S = GroupState
DAY = 24 * 60 * 60 * 1000


def _errors(call) -> dict[tuple[str, int], int]:  # type: ignore[no-untyped-def]
    return {(t.name, p.partition_index): p.error_code for t in call.response.topics for p in t.partitions}


def _state_group(ctx: GroupContext, state: GroupState) -> tuple[str, int]:
    """A group "g" in ``state``; returns (a member id, its generation)."""
    if state is S.EMPTY:
        (a,) = ctx.form_group("g", 1)
        ctx.leave("g", (a.member_id, None))
        return a.member_id, 2
    if state is S.COMPLETING_REBALANCE:
        a = ctx.join_new("g")
        ctx.advance_until_done(a)
        return a.response.member_id, 1
    a, b = ctx.form_group("g", 2)
    if state is S.PREPARING_REBALANCE:
        ctx.join("g", b.member_id, protos=[("range", b"new")])
        assert ctx.state("g") is S.PREPARING_REBALANCE
    return a.member_id, 1


COMMITS = [
    # (group state, how the commit identifies itself, expected error)
    (S.EMPTY, "standalone", ErrorCode.NONE),
    (S.EMPTY, "member", ErrorCode.UNKNOWN_MEMBER_ID),
    (S.STABLE, "member", ErrorCode.NONE),
    (S.STABLE, "standalone", ErrorCode.UNKNOWN_MEMBER_ID),
    (S.STABLE, "wrong-generation", ErrorCode.ILLEGAL_GENERATION),
    (S.STABLE, "unknown-member", ErrorCode.UNKNOWN_MEMBER_ID),
    (S.PREPARING_REBALANCE, "member", ErrorCode.NONE),
    (S.PREPARING_REBALANCE, "wrong-generation", ErrorCode.ILLEGAL_GENERATION),
    (S.COMPLETING_REBALANCE, "member", ErrorCode.REBALANCE_IN_PROGRESS),
    (S.COMPLETING_REBALANCE, "standalone", ErrorCode.UNKNOWN_MEMBER_ID),
]


@pytest.mark.parametrize(("state", "who", "expected"), COMMITS, ids=[f"{s}-{w}" for s, w, _ in COMMITS])
def test_commit_in_each_state(ctx: GroupContext, state: GroupState, who: str, expected: int) -> None:
    member, generation = _state_group(ctx, state)
    kw = {
        "standalone": {},
        "member": {"generation": generation, "member_id": member},
        "wrong-generation": {"generation": generation + 5, "member_id": member},
        "unknown-member": {"generation": generation, "member_id": "ghost"},
    }[who]
    call = ctx.commit("g", {("t", 0): 42, ("t", 1): 43}, **kw)  # type: ignore[arg-type]
    assert set(_errors(call).values()) == {expected}
    fetched = ctx.fetched("g", {"t": [0, 1]})
    assert fetched == ({("t", 0): 42, ("t", 1): 43} if expected == 0 else {("t", 0): -1, ("t", 1): -1})


def _second_generation(ctx: GroupContext, state: GroupState) -> tuple[str, int]:
    """Group "g" past a rebalance, in ``state``; returns (a member id, the current generation)."""
    a, b = ctx.form_group("g", 2)
    rb = ctx.join("g", b.member_id, protos=[("range", b"changed")])
    ra = ctx.join("g", a.member_id)
    ctx.advance_until_done(ra, rb)
    assert ra.response.generation_id == rb.response.generation_id == 2
    leader = ra.response.leader
    members = [Joined(a.member_id, 2, leader), Joined(b.member_id, 2, leader)]
    if state is S.COMPLETING_REBALANCE:
        assert ctx.state("g") is S.COMPLETING_REBALANCE
        return a.member_id, 2
    ctx.sync_all("g", members)
    if state is S.PREPARING_REBALANCE:
        ctx.join("g", b.member_id, protos=[("range", b"again")])
        assert ctx.state("g") is S.PREPARING_REBALANCE
    return a.member_id, 2


STALE_COMMITS = [
    # A member's commit carrying the generation before the current one, in each live state.
    (S.STABLE, ErrorCode.ILLEGAL_GENERATION),
    (S.PREPARING_REBALANCE, ErrorCode.ILLEGAL_GENERATION),
    (S.COMPLETING_REBALANCE, ErrorCode.ILLEGAL_GENERATION),
]


@pytest.mark.parametrize(("state", "expected"), STALE_COMMITS, ids=[str(s) for s, _ in STALE_COMMITS])
def test_commit_from_a_stale_generation_is_refused(ctx: GroupContext, state: GroupState, expected: int) -> None:
    member, generation = _second_generation(ctx, state)
    assert ctx.state("g") is state
    call = ctx.commit("g", {("t", 0): 42, ("t", 1): 43}, generation=generation - 1, member_id=member)
    assert set(_errors(call).values()) == {expected}
    assert ctx.fetched("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    # The same member at the current generation is accepted (except mid-sync, as Kafka).
    current = ctx.commit("g", {("t", 0): 42}, generation=generation, member_id=member)
    want = ErrorCode.REBALANCE_IN_PROGRESS if state is S.COMPLETING_REBALANCE else ErrorCode.NONE
    assert set(_errors(current).values()) == {want}


def test_standalone_commit_creates_a_simple_group(ctx: GroupContext) -> None:
    call = ctx.commit("spark", {("t", 0): 10})
    assert set(_errors(call).values()) == {0}
    group = ctx.coordinator.group("spark")
    assert group is not None and group.state is S.EMPTY and group.protocol_type is None
    listed = ctx.list_groups().groups
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed] == [("spark", "", "Empty")]
    # And a v0 commit (no generation, no member) is standalone too.
    v0 = ctx.commit("spark", {("t", 1): 11}, version=0)
    assert set(_errors(v0).values()) == {0}
    assert ctx.fetched("spark") == {("t", 0): 10, ("t", 1): 11}


@pytest.mark.parametrize(("version", "expected"), [(8, ErrorCode.ILLEGAL_GENERATION), (9, ErrorCode.GROUP_ID_NOT_FOUND)])
def test_commit_with_generation_to_unknown_group(ctx: GroupContext, version: int, expected: int) -> None:
    call = ctx.commit("nope", {("t", 0): 1}, generation=3, member_id="m", version=version)
    assert set(_errors(call).values()) == {expected}
    assert ctx.coordinator.group("nope") is None


def test_commit_keeps_a_member_session_alive(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    for _ in range(4):
        ctx.advance(SESSION_MS - 1)
        for m in (a, b):
            call = ctx.commit("g", {("t", 0): 1}, generation=1, member_id=m.member_id)
            assert set(_errors(call).values()) == {0}
    assert ctx.state("g") is S.STABLE


def test_metadata_size_limit(ctx: GroupContext) -> None:
    ok = ctx.commit("g", {("t", 0): 1}, metadata="x" * 4096)
    assert _errors(ok) == {("t", 0): 0}
    big = ctx.commit("g", {("t", 0): 2}, metadata="x" * 4097)
    assert _errors(big) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    # Java counts UTF-16 units: a character outside the BMP counts twice.
    emoji = ctx.commit("g", {("t", 0): 3}, metadata="x" * 4095 + "\U0001f600")
    assert _errors(emoji) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 1}


def test_metadata_limit_is_configurable_and_per_partition() -> None:
    ctx = GroupContext(CoordinatorConfig(offset_metadata_max_bytes=3, offsets_topic_num_partitions=4))
    request = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="abc"),
                    OffsetCommitRequestPartition(partition_index=1, committed_offset=6, committed_metadata="abcd"),
                    OffsetCommitRequestPartition(partition_index=2, committed_offset=7, committed_metadata=None),
                ],
            )
        ],
    )
    call = ctx.send("offset_commit", request, 8)
    assert _errors(call) == {("t", 0): 0, ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 2): 0}
    got = ctx.fetch("g", {"t": [0, 2]}).response.groups[0].topics[0].partitions
    assert [(p.committed_offset, p.metadata) for p in got] == [(5, "abc"), (7, "")]


def test_unknown_partitions_are_refused() -> None:
    ctx = GroupContext(partition_exists=lambda topic, partition: topic == "t" and partition < 2)
    call = ctx.commit("g", {("t", 0): 1, ("t", 5): 1, ("nope", 0): 1})
    assert _errors(call) == {("t", 0): 0, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): 3}


def test_commit_record_format_and_timestamps(ctx: GroupContext) -> None:
    ctx.commit("g", {("t", 0): 100}, leader_epoch=7, metadata="m")
    record = ctx.log[-1]
    assert gr.decode_key(record.key) == gr.OffsetCommitKey(group="g", topic="t", partition=0)
    assert record.key[:2] == b"\x00\x01" and record.value is not None and record.value[:2] == b"\x00\x03"
    value = gr.decode_offset_commit_value(record.value)
    assert (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp) == (100, 7, "m", ctx.now)
    # v2-v4 retention time -> an explicit expire timestamp, written as value v1 (like Kafka).
    ctx.commit("g", {("t", 1): 5}, version=2, retention_ms=1000)
    record = ctx.log[-1]
    assert record.value is not None and record.value[:2] == b"\x00\x01"
    assert gr.decode_offset_commit_value(record.value).expire_timestamp == ctx.now + 1000
    # v1 commit timestamps come from the request.
    v1 = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[OffsetCommitRequestPartition(partition_index=2, committed_offset=1, commit_timestamp=1234)],
            )
        ],
    )
    ctx.send("offset_commit", v1, 1)
    assert ctx.log[-1].value is not None
    assert gr.decode_offset_commit_value(ctx.log[-1].value).commit_timestamp == 1234
    assert ctx.coordinator.committed_offsets("g")[("t", 2)].commit_timestamp_ms == 1234


def test_failed_append_answers_an_error_and_changes_nothing(ctx: GroupContext) -> None:
    ctx.commit("g", {("t", 0): 1})
    ctx.fail_appends_with = ErrorCode.KAFKA_STORAGE_ERROR
    call = ctx.commit("g", {("t", 0): 2})
    assert _errors(call) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    ctx.fail_appends_with = ErrorCode.MESSAGE_TOO_LARGE
    assert _errors(ctx.commit("g", {("t", 0): 3})) == {("t", 0): ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    ctx.fail_appends_with = None
    assert ctx.fetched("g") == {("t", 0): 1}


def test_commit_answer_waits_for_the_append(ctx: GroupContext) -> None:
    c = RequestContext(8)
    request = OffsetCommitRequest(
        group_id="g",
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=9)])],
    )
    result = ctx.coordinator.offset_commit(c, request, ctx.now)
    assert result.response is None and result.pending is not None and len(result.records) == 1
    # Not yet durable: require_stable fetches see an unstable offset; plain fetches the old one.
    stable = ctx.fetch("g", {"t": [0]}, require_stable=True).response.groups[0].topics[0].partitions[0]
    assert stable.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT and stable.committed_offset == -1
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): -1}
    ctx.process(result)
    assert ctx.answers[result.pending].topics[0].partitions[0].error_code == 0
    assert ctx.fetched("g", {"t": [0]}, require_stable=True) == {("t", 0): 9}


# ------------------------------------------------------------------ OffsetFetch versions


def test_fetch_listed_and_all_partitions(ctx: GroupContext) -> None:
    ctx.commit("g", {("t", 0): 5, ("t", 2): 7, ("u", 0): 1}, leader_epoch=3, metadata="meta")
    assert ctx.fetched("g", {"t": [0, 1, 2]}) == {("t", 0): 5, ("t", 1): -1, ("t", 2): 7}
    assert ctx.fetched("g") == {("t", 0): 5, ("t", 2): 7, ("u", 0): 1}
    assert ctx.fetched("unknown", {"t": [0]}) == {("t", 0): -1}
    assert ctx.fetched("unknown") == {}
    p = ctx.fetch("g", {"t": [1]}).response.groups[0].topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code) == (-1, -1, "", 0)
    p = ctx.fetch("g", {"t": [0]}).response.groups[0].topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (5, 3, "meta")


@pytest.mark.parametrize("version", [1, 2, 5, 6, 7])
def test_fetch_single_group_versions(ctx: GroupContext, version: int) -> None:
    ctx.commit("g", {("t", 0): 5})
    r = ctx.fetch("g", {"t": [0, 1]}, version=version).response
    assert r.error_code == 0 and r.groups == []
    assert [(p.partition_index, p.committed_offset) for p in r.topics[0].partitions] == [(0, 5), (1, -1)]
    if version >= 2:
        assert [t.name for t in ctx.fetch("g", None, version=version).response.topics] == ["t"]


def test_fetch_multiple_groups_v8(ctx: GroupContext) -> None:
    from slipstream.protocol.apis.offset_fetch import (
        OffsetFetchRequest,
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopics,
    )

    ctx.commit("a", {("t", 0): 1})
    ctx.commit("b", {("t", 0): 2})
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(group_id="a", topics=None),
            OffsetFetchRequestGroup(group_id="b", topics=[OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])]),
        ]
    )
    r = ctx.send("offset_fetch", request, 8).response
    got = {g.group_id: {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions} for g in r.groups}
    assert got == {"a": {("t", 0): 1}, "b": {("t", 0): 2, ("t", 1): -1}}


# ------------------------------------------------------------------ OffsetDelete and DeleteGroups


def test_offset_delete_refuses_topics_a_live_consumer_group_subscribes_to(ctx: GroupContext) -> None:
    (a,) = ctx.form_group("g", 1)  # subscribed to "t"
    ctx.commit("g", {("t", 0): 1, ("old", 0): 2}, generation=1, member_id=a.member_id)
    r = ctx.offset_delete("g", {"t": [0], "old": [0, 1]}).response
    assert r.error_code == 0
    got = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert got == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): 0, ("old", 1): 0}
    assert ctx.fetched("g") == {("t", 0): 1}
    assert ctx.log[-1].value is None  # a tombstone


def test_offset_delete_group_errors(ctx: GroupContext) -> None:
    assert ctx.offset_delete("nope", {"t": [0]}).error == ErrorCode.GROUP_ID_NOT_FOUND
    connect = ctx.join_new("other", protocol_type="connect", protos=[("x", b"")])
    ctx.advance_until_done(connect)
    assert ctx.offset_delete("other", {"t": [0]}).error == ErrorCode.NON_EMPTY_GROUP
    ctx.commit("simple", {("t", 0): 1})
    assert ctx.offset_delete("simple", {"t": [0]}).response.topics[0].partitions[0].error_code == 0
    assert ctx.fetched("simple") == {}


def test_delete_groups(ctx: GroupContext) -> None:
    ctx.form_group("busy", 1)
    (a,) = ctx.form_group("done", 1)
    ctx.commit("done", {("t", 0): 4, ("t", 1): 5}, generation=1, member_id=a.member_id)
    ctx.leave("done", (a.member_id, None))
    r = ctx.delete_groups("busy", "done", "nope").response
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("done", 0),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    tail = ctx.log[-3:]
    assert [gr.decode_key(rec.key) for rec in tail] == [
        gr.OffsetCommitKey(group="done", topic="t", partition=0),
        gr.OffsetCommitKey(group="done", topic="t", partition=1),
        gr.GroupMetadataKey(group="done"),
    ]
    assert all(rec.value is None for rec in tail)
    assert ctx.coordinator.group("done") is None
    assert ctx.fetched("done", {"t": [0]}) == {("t", 0): -1}
    d = ctx.describe("done").groups[0]
    assert (d.group_state, d.error_code, d.members) == ("Dead", 0, [])
    assert ctx.delete_groups("done").response.results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ------------------------------------------------------------------ retention


def test_empty_group_offsets_expire_retention_after_it_became_empty() -> None:
    ctx = GroupContext(CoordinatorConfig(offsets_retention_ms=DAY, offsets_topic_num_partitions=4))
    (a,) = ctx.form_group("g", 1, session_ms=1_800_000)
    ctx.commit("g", {("t", 0): 1}, generation=1, member_id=a.member_id)
    # The group stays alive for two days: its offsets must not expire meanwhile.
    for _ in range(2 * 24 * 2):
        ctx.advance(30 * 60 * 1000 - 1)
        assert ctx.heartbeat("g", 1, a.member_id).error == 0
    assert ctx.process(ctx.coordinator.expire_offsets(ctx.now)) is None
    assert ctx.fetched("g") == {("t", 0): 1}
    ctx.leave("g", (a.member_id, None))
    empty_since = ctx.now
    ctx.advance(DAY - 1)
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.fetched("g") == {("t", 0): 1}
    ctx.advance(1)
    assert ctx.now - empty_since == DAY
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.fetched("g") == {}
    assert ctx.coordinator.group("g") is None  # Empty and nothing left: the group goes too
    assert ctx.log[-1].value is None and gr.decode_key(ctx.log[-1].key) == gr.GroupMetadataKey(group="g")


def test_standalone_offsets_expire_by_commit_time() -> None:
    ctx = GroupContext(CoordinatorConfig(offsets_retention_ms=DAY, offsets_topic_num_partitions=4))
    ctx.commit("s", {("t", 0): 1})
    ctx.advance(DAY // 2)
    ctx.commit("s", {("t", 1): 2})
    ctx.advance(DAY // 2)
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.fetched("s") == {("t", 1): 2}
    assert ctx.coordinator.group("s") is not None
    ctx.advance(DAY // 2)
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.coordinator.group("s") is None


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    ctx = GroupContext(CoordinatorConfig(offsets_retention_ms=DAY, offsets_topic_num_partitions=4))
    (a,) = ctx.form_group("g", 1, session_ms=1_800_000)  # subscribes to "t"
    ctx.commit("g", {("t", 0): 1, ("gone", 0): 2}, generation=1, member_id=a.member_id)
    committed_at = ctx.now
    while ctx.now - committed_at < DAY + 600_000:  # the retention job runs every 10 minutes
        ctx.advance(25 * 60 * 1000)
        assert ctx.heartbeat("g", 1, a.member_id).error == 0
    assert ctx.state("g") is S.STABLE
    assert ctx.fetched("g") == {("t", 0): 1}


def test_explicit_expire_timestamp_wins(ctx: GroupContext) -> None:
    ctx.commit("g", {("t", 0): 1}, version=2, retention_ms=5_000)
    ctx.advance(4_999)
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.fetched("g") == {("t", 0): 1}
    ctx.advance(1)
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.fetched("g") == {}


def test_retention_runs_by_itself_on_the_check_interval() -> None:
    ctx = GroupContext(
        CoordinatorConfig(
            offsets_retention_ms=1_000, offsets_retention_check_interval_ms=60_000, offsets_topic_num_partitions=4
        )
    )
    ctx.commit("s", {("t", 0): 1})
    fired = ctx.advance(60_000)
    assert "expire-group-metadata" in fired
    assert ctx.fetched("s") == {} and ctx.coordinator.group("s") is None
    assert ctx.timer.is_scheduled("expire-group-metadata")  # and again next interval


def test_a_commit_from_a_connection_the_member_replaced_is_refused(ctx: GroupContext) -> None:
    """A member's older commit, still in flight on a connection it gave up on, arrives after
    its newer commit on a new connection: it must not move the offset back."""
    (a, b) = ctx.form_group("g", 2)
    member = {"generation": a.generation, "member_id": a.member_id}
    first = ctx.commit("g", {("t", 0): 40}, connection=3, **member)  # type: ignore[arg-type]
    assert set(_errors(first).values()) == {ErrorCode.NONE}
    newer = ctx.commit("g", {("t", 0): 60}, connection=7, **member)  # type: ignore[arg-type]
    assert set(_errors(newer).values()) == {ErrorCode.NONE}
    leftover = ctx.commit("g", {("t", 0): 50}, connection=3, **member)  # type: ignore[arg-type]
    assert set(_errors(leftover).values()) == {ErrorCode.REQUEST_TIMED_OUT}
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 60}
    # Later commits on the newest connection, and the other member's on an older one, go on.
    again = ctx.commit("g", {("t", 0): 61}, connection=7, **member)  # type: ignore[arg-type]
    assert set(_errors(again).values()) == {ErrorCode.NONE}
    other = ctx.commit("g", {("t", 1): 5}, connection=2, generation=b.generation, member_id=b.member_id)
    assert set(_errors(other).values()) == {ErrorCode.NONE}
    assert ctx.fetched("g", {"t": [0, 1]}) == {("t", 0): 61, ("t", 1): 5}


def test_commits_without_a_member_or_a_known_connection_are_not_ordered(ctx: GroupContext) -> None:
    (a,) = ctx.form_group("g", 1)
    member = {"generation": a.generation, "member_id": a.member_id}
    ctx.commit("g", {("t", 0): 9}, connection=5, **member)  # type: ignore[arg-type]
    # Connection 0 (not known: an embedded caller) is never refused.
    unknown = ctx.commit("g", {("t", 0): 8}, **member)  # type: ignore[arg-type]
    assert set(_errors(unknown).values()) == {ErrorCode.NONE}
    ctx.leave("g", (a.member_id, None))
    # An admin commit to the empty group (no member id) on any connection.
    admin = ctx.commit("g", {("t", 0): 3}, connection=1)
    assert set(_errors(admin).values()) == {ErrorCode.NONE}
    assert ctx.fetched("g", {"t": [0]}) == {("t", 0): 3}
