"""Replaying the emitted records rebuilds the same durable state; loading answers LOAD_IN_PROGRESS."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from coord_context import SESSION_MS, GroupContext, assignment, protocols

from slipstream.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, ManualTimer
from slipstream.protocol import group_records as gr
from slipstream.protocol.apis.delete_groups import DeleteGroupsRequest
from slipstream.protocol.errors import ErrorCode

S = GroupState
DAY = 24 * 60 * 60 * 1000


def durable_state(coordinator: GroupCoordinator) -> dict[str, Any]:
    """What must survive a restart: offsets, and each group's last persisted shape."""
    groups = {}
    for group_id in coordinator.group_ids():
        g = coordinator.group(group_id)
        assert g is not None
        assert g.state in (S.STABLE, S.EMPTY), f"{group_id} is mid-rebalance: not comparable"
        members = tuple(
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(g.protocol_name or ""),
                m.assignment,
            )
            for m in g.members.values()
        )
        groups[group_id] = {
            "state": g.state,
            "generation": g.generation_id,
            "protocol_type": g.protocol_type,
            "protocol": g.protocol_name,
            "leader": g.leader_id,
            "members": members,
            "static": dict(g.static_members),
            "subscribed": g.subscribed_topics,
            # A Stable group's record carries the time it began CompletingRebalance; a simple
            # group (offsets only) has no record at all.
            "since": g.current_state_timestamp_ms if g.state is S.EMPTY and g.protocol_type else None,
        }
    offsets = {gid: coordinator.committed_offsets(gid) for gid in coordinator.group_ids()}
    return {"groups": groups, "offsets": offsets}


def reload(ctx: GroupContext) -> tuple[GroupCoordinator, ManualTimer]:
    timer = ManualTimer(start_ms=ctx.now)
    fresh = GroupCoordinator(ctx.config, timer=timer)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    return fresh, timer


def run_scenario(ctx: GroupContext) -> None:
    # g1: three members (one static), commits, a graceful leave, a static restart, more commits.
    a, b, c = ctx.form_group("g1", 3, instance_ids=[None, "static-b", None], protos=protocols("range", topics=["t", "u"]))
    for i, m in enumerate((a, b, c)):
        ctx.commit("g1", {("t", i): 10 * i, ("u", i): 100 + i}, generation=1, member_id=m.member_id,
                   instance_id=m.instance_id, metadata=f"m{i}", leader_epoch=i)
    ctx.leave("g1", (c.member_id, None))
    ra = ctx.join("g1", a.member_id, protos=protocols("range", topics=["t", "u"]))
    rb = ctx.join("g1", b.member_id, instance_id="static-b", protos=protocols("range", topics=["t", "u"]))
    assert ra.response.generation_id == rb.response.generation_id == 2
    ctx.sync("g1", 2, b.member_id, instance_id="static-b")
    ctx.sync("g1", 2, a.member_id, {a.member_id: assignment(t=[0, 1], u=[0]), b.member_id: assignment(t=[2], u=[1, 2])})
    restarted = ctx.join("g1", instance_id="static-b", protos=protocols("range", topics=["t", "u"])).response
    ctx.commit("g1", {("t", 2): 99}, generation=2, member_id=restarted.member_id, instance_id="static-b")
    # g2: forms, commits, everyone leaves: Empty with offsets.
    (x,) = ctx.form_group("g2", 1)
    ctx.commit("g2", {("t", 0): 5}, generation=1, member_id=x.member_id)
    ctx.leave("g2", (x.member_id, None))
    # g3: formed and deleted.
    (y,) = ctx.form_group("g3", 1)
    ctx.commit("g3", {("t", 0): 6}, generation=1, member_id=y.member_id)
    ctx.leave("g3", (y.member_id, None))
    assert ctx.delete_groups("g3").response.results[0].error_code == 0
    # spark: standalone commits, one offset deleted, one overwritten.
    ctx.commit("spark", {("events", 0): 1, ("events", 1): 2, ("events", 2): 3})
    ctx.commit("spark", {("events", 0): 7})
    ctx.offset_delete("spark", {"events": [1]})
    # old: standalone offsets that expire.
    ctx.commit("old", {("t", 0): 1}, version=2, retention_ms=1_000)
    ctx.advance(1_000)
    # keep g1 alive through the advance
    ctx.process(ctx.coordinator.expire_offsets(ctx.now))
    assert ctx.state("g1") is S.STABLE


def test_replaying_the_log_into_a_fresh_coordinator_rebuilds_identical_state(ctx: GroupContext) -> None:
    run_scenario(ctx)
    assert ctx.coordinator.group("g3") is None and ctx.coordinator.group("old") is None
    before = durable_state(ctx.coordinator)
    assert set(before["groups"]) == {"g1", "g2", "spark"}
    fresh, _ = reload(ctx)
    assert durable_state(fresh) == before
    # Offsets keep their metadata, epochs and timestamps.
    assert fresh.committed_offsets("g1") == ctx.coordinator.committed_offsets("g1")
    assert fresh.committed_offsets("g1")[("u", 1)].metadata == "m1"


def test_replay_is_idempotent_and_order_is_the_logs(ctx: GroupContext) -> None:
    run_scenario(ctx)
    twice = GroupCoordinator(ctx.config, timer=ManualTimer(start_ms=ctx.now))
    records = [(r.key, r.value) for r in ctx.log]
    twice.load(records + records, ctx.now)
    assert durable_state(twice) == durable_state(ctx.coordinator)


def test_a_restarted_coordinator_carries_on_with_the_loaded_group(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2)
    ctx.commit("g", {("t", 0): 3}, generation=1, member_id=a.member_id)
    # Rewire the context to the fresh coordinator and its timer.
    timer = ManualTimer(start_ms=ctx.now)
    ctx.timer = timer
    fresh = GroupCoordinator(ctx.config, timer=timer)
    fresh.load(((r.key, r.value) for r in ctx.log), ctx.now)
    ctx.coordinator = fresh
    assert ctx.state("g") is S.STABLE
    # Members carry on with their generation; the one that went away with the old broker expires.
    for _ in range(3):
        ctx.advance(SESSION_MS // 2)
        assert ctx.heartbeat("g", 1, a.member_id).error in (0, ErrorCode.REBALANCE_IN_PROGRESS)
    group = fresh.group("g")
    assert group is not None and not group.has_member(b.member_id)
    assert ctx.state("g") is S.PREPARING_REBALANCE
    ra = ctx.join("g", a.member_id)
    assert ra.response.generation_id == 2
    assert ctx.sync("g", 2, a.member_id, {a.member_id: b"all"}).response.assignment == b"all"
    assert ctx.fetched("g") == {("t", 0): 3}


def test_loading_answers_coordinator_load_in_progress() -> None:
    ctx = GroupContext(start_loaded=False)
    ctx.coordinator.begin_loading()
    assert ctx.coordinator.is_loading and ctx.coordinator.is_group_loading("g")
    load = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.join("g").error == load
    assert ctx.sync("g", 1, "m").error == load
    assert ctx.heartbeat("g", 1, "m").error == ErrorCode.NONE  # like Kafka: blindly fine
    assert ctx.leave("g", ("m", None)).error == load
    assert {p.error_code for t in ctx.commit("g", {("t", 0): 1}).response.topics for p in t.partitions} == {load}
    assert ctx.fetch("g", {"t": [0]}).response.groups[0].error_code == load
    assert ctx.fetch("g", {"t": [0]}, version=2).response.error_code == load
    v1 = ctx.fetch("g", {"t": [0, 1]}, version=1).response
    assert [p.error_code for p in v1.topics[0].partitions] == [load, load]
    assert ctx.describe("g").groups[0].error_code == load
    assert ctx.list_groups().error_code == load
    assert ctx.send("delete_groups", DeleteGroupsRequest(groups_names=["g"]), 2).response.results[0].error_code == load
    assert ctx.offset_delete("g", {"t": [0]}).error == load
    ctx.coordinator.finish_loading(ctx.now)
    assert not ctx.coordinator.is_loading
    assert ctx.join("g").error == ErrorCode.MEMBER_ID_REQUIRED


def test_loading_is_per_partition() -> None:
    ctx = GroupContext()
    pa, pb = ctx.coordinator.partition_for("a"), ctx.coordinator.partition_for("b")
    assert pa != pb
    ctx.coordinator.begin_loading([pa])
    assert ctx.join("a").error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.join("b").error == ErrorCode.MEMBER_ID_REQUIRED
    ctx.coordinator.finish_loading(ctx.now, [pa])
    assert ctx.join("a").error == ErrorCode.MEMBER_ID_REQUIRED


def test_malformed_and_foreign_records_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    coordinator = GroupCoordinator(CoordinatorConfig(), timer=ManualTimer())
    good = (gr.offset_commit_key("g", "t", 0), gr.encode_offset_commit_value(gr.OffsetCommitValue(offset=4, metadata="", commit_timestamp=1)))
    records = [
        (b"\x00", b""),  # too short
        (b"\x00\x01\x00\x05ab", b""),  # truncated key
        (b"\x00\x04\x00\x01g", b"\x00\x00"),  # a record type we do not use (partition metadata)
        (b"\x00\x03\x00\x01g", b"\x00\x00"),  # consumer group epoch with a truncated value
        (gr.offset_commit_key("g", "t", 1), b"\x00\x09garbage"),  # unknown value version
        (gr.group_metadata_key("g"), b"\x00\x03\x00"),  # truncated value
        (None, b"ignored"),
        good,
    ]
    with caplog.at_level(logging.WARNING, logger="slipstream.coordinator"):
        coordinator.load(records, 0)
    assert coordinator.committed_offsets("g")[("t", 0)].offset == 4
    assert sum("skipping malformed" in r.message for r in caplog.records) == 5
    assert coordinator.consumer_group("g") is None


def test_group_tombstone_then_new_generation_in_the_log() -> None:
    ctx = GroupContext()
    (a,) = ctx.form_group("g", 1)
    ctx.leave("g", (a.member_id, None))
    ctx.delete_groups("g")
    (b,) = ctx.form_group("g", 1)
    fresh, _ = reload(ctx)
    g = fresh.group("g")
    assert g is not None and g.state is S.STABLE and list(g.members) == [b.member_id] and g.generation_id == 1


# ------------------------------------------------------------------ describe and list


def test_describe_groups(ctx: GroupContext) -> None:
    a, b = ctx.form_group("g", 2, instance_ids=["i-a", None])
    d = ctx.describe("g", "nope", version=5, include_ops=True).groups
    g, nope = d
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert [(m.member_id, m.group_instance_id, m.client_id, m.client_host) for m in g.members] == [
        (a.member_id, "i-a", "c0", "/127.0.0.1"),
        (b.member_id, None, "c1", "/127.0.0.1"),
    ]
    assert g.members[0].member_metadata == protocols("range")[0][1]
    assert g.members[1].member_assignment == assignment(t=[1])
    assert (nope.group_state, nope.error_code, nope.members, nope.protocol_type) == ("Dead", 0, [], "")
    assert ctx.describe("g", version=3).groups[0].authorized_operations == -(2**31)
    ctx.join("g", a.member_id, instance_id="i-a")  # rebalancing: no protocol data or metadata
    g = ctx.describe("g").groups[0]
    assert (g.group_state, g.protocol_data) == ("PreparingRebalance", "")
    assert g.members[0].member_metadata == b"" and g.members[1].member_assignment == assignment(t=[1])


def test_list_groups_with_filters(ctx: GroupContext) -> None:
    ctx.form_group("stable", 1)
    ctx.commit("simple", {("t", 0): 1})
    ctx.join_new("joining")

    def listed(**kw: Any) -> list[tuple[str, str, str, str]]:
        return sorted(
            (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in ctx.list_groups(**kw).groups
        )

    assert listed() == [
        ("joining", "consumer", "PreparingRebalance", "classic"),
        ("simple", "", "Empty", "classic"),
        ("stable", "consumer", "Stable", "classic"),
    ]
    assert [g[0] for g in listed(states=["STABLE", " empty "])] == ["simple", "stable"]
    assert listed(states=["dead"]) == []
    assert listed(states=["nonsense"]) == []
    assert len(listed(types=["Classic"])) == 3
    assert listed(types=["consumer"]) == []
    # v3 has no filters: the fields are ignored; v0 has no state/type in the answer.
    assert len(ctx.list_groups(states=["stable"], version=3).groups) == 3


def test_every_group_api_has_a_broker_handler_calling_the_coordinator(ctx: GroupContext) -> None:
    from slipstream.broker.handlers import API_TABLE
    from slipstream.coordinator import RequestContext
    from slipstream.protocol.apis.heartbeat import HeartbeatRequest

    group_apis = {8: "offset_commit", 9: "offset_fetch", 11: "join_group", 12: "heartbeat", 13: "leave_group",
                  14: "sync_group", 15: "describe_groups", 16: "list_groups", 42: "delete_groups",
                  47: "offset_delete"}
    for key, method in group_apis.items():
        assert key in API_TABLE
        assert callable(getattr(ctx.coordinator, method))
    result = ctx.coordinator.heartbeat(RequestContext(4), HeartbeatRequest(group_id="g", member_id="m"), ctx.now)
    assert result.response is not None and result.response.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]
