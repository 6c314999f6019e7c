"""The sans-I/O fetch core, one rule per test: no sockets, no event loop, a manual clock
(``now`` is handed in)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from slipstream.client.cluster import TopicInfo
from slipstream.client.consumer_config import ConsumerConfig
from slipstream.client.consumer_messages import Message
from slipstream.client.fetch_core import (
    TOPIC_ID_VERSION,
    FetchCore,
    FetchError,
    OffsetOutOfRangeError,
    PartitionResult,
    PartitionState,
)
from slipstream.protocol.apis.fetch import FetchResponse, FetchResponsePartition, FetchResponseTopic
from slipstream.protocol.errors import ErrorCode, KafkaError
from slipstream.protocol.errors import name as error_name
from slipstream.protocol.primitives import ZERO_UUID
from slipstream.protocol.records import ProducerRecord, build_batch

T0 = ("t", 0)
T1 = ("t", 1)
U0 = ("u", 0)
NOW = 100.0
TOPIC_ID = uuid.UUID(int=7)


def batch(base: int, n: int, size: int = 8) -> bytes:
    return build_batch(
        [ProducerRecord(None, b"%0*d" % (size, base + i), timestamp_ms=1) for i in range(n)],
        base_offset=base,
    )


def core(*tps: tuple[str, int], leader: int = 0, **settings: Any) -> FetchCore:
    c = FetchCore(ConsumerConfig(**settings))
    for tp in tps or (T0,):
        st = PartitionState(tp)
        st.position = st.fetch_offset = 0
        st.leader = leader
        c.parts[tp] = st
    return c


def answer(tp: tuple[str, int], data: bytes = b"", code: int = 0) -> FetchResponsePartition:
    return FetchResponsePartition(
        partition_index=tp[1], error_code=code, high_watermark=50, last_stable_offset=50,
        log_start_offset=3, records=memoryview(data),
    )


def topics(*names: str, topic_id: uuid.UUID = TOPIC_ID) -> dict[str, TopicInfo]:
    return {n: TopicInfo(n, topic_id, 0, False, {0: 0, 1: 0}) for n in names}


# ---------------------------------------------------------------- requests


def test_request_asks_each_partition_from_its_fetch_offset_with_the_configured_limits() -> None:
    c = core(T0, U0, fetch_max_wait_ms=300, fetch_min_bytes=5, fetch_max_bytes=1 << 22,
             max_partition_fetch_bytes=1 << 18, isolation_level="read_committed", client_rack="r1")
    c.parts[T0].fetch_offset = 42
    request, sent = c.build_request(0, list(c.parts.values()), topics("t"))
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (300, 5, 1 << 22)
    assert request.isolation_level == 1 and request.rack_id == "r1" and request.replica_id == -1
    by_topic = {t.topic: t for t in request.topics}
    assert by_topic["t"].topic_id == TOPIC_ID and by_topic["u"].topic_id == ZERO_UUID
    (p0,) = by_topic["t"].partitions
    assert (p0.partition, p0.fetch_offset, p0.partition_max_bytes) == (0, 42, 1 << 18)
    assert sent == {T0: (c.parts[T0].epoch, 42), U0: (c.parts[U0].epoch, 0)}


def test_requests_use_no_fetch_session() -> None:
    c = core()
    for _ in range(3):
        request, _sent = c.build_request(0, [c.parts[T0]], {})
        assert (request.session_id, request.session_epoch) == (0, -1)


def test_the_first_partition_of_a_request_rotates_per_broker() -> None:
    c = core(T0, T1)
    parts = list(c.parts.values())
    firsts = []
    for _ in range(4):
        request, _sent = c.build_request(0, parts, {})
        firsts.append(request.topics[0].partitions[0].partition)
    assert firsts == [0, 1, 0, 1]
    request, _sent = c.build_request(1, parts, {})  # another broker has its own turn
    assert request.topics[0].partitions[0].partition == 0


def test_fetch_size_grows_to_the_largest_batch_seen() -> None:
    c = core(max_partition_fetch_bytes=1 << 20, partition_buffer_bytes=1 << 20)
    st = c.parts[T0]
    big = batch(0, 1, size=150_000)
    assert c.handle_partition(st, answer(T0, big), NOW) is PartitionResult.DELIVER
    assert st.largest_batch == len(big)
    st.buffered_bytes = (1 << 20) - 10  # nearly full: the top-up is still a whole batch
    assert c.fetch_size(st) == len(big)


def test_max_version_avoids_topic_ids_until_all_are_known() -> None:
    c = core(T0, U0)
    parts = list(c.parts.values())
    assert c.max_version(parts, topics("t", "u")) is None
    assert c.max_version(parts, topics("t")) == TOPIC_ID_VERSION - 1
    assert c.max_version(parts, topics("t", "u", topic_id=ZERO_UUID)) == TOPIC_ID_VERSION - 1


def test_fetchable_follows_the_leader_and_the_processing_time_on_the_manual_clock() -> None:
    c = core(T0, T1, max_processing_time_ms=500)
    c.parts[T1].leader = 1
    assert c.fetchable(0, NOW) == [c.parts[T0]]
    c.handle_partition(c.parts[T0], answer(T0, batch(0, 2)), NOW)
    assert c.fetchable(0, NOW + 0.5) == [c.parts[T0]]
    assert c.fetchable(0, NOW + 0.501) == []  # not drained for max_processing_time_ms
    c.take(c.parts[T0], 1, Message, NOW + 0.6)  # draining restarts the timer
    assert c.fetchable(0, NOW + 0.6) == [c.parts[T0]]


# ---------------------------------------------------------------- responses


def test_records_are_buffered_and_the_fetch_offset_moves_past_them() -> None:
    c = core()
    st = c.parts[T0]
    data = batch(0, 3) + batch(3, 2)
    assert c.handle_partition(st, answer(T0, data), NOW) is PartitionResult.DELIVER
    assert (st.fetch_offset, st.position, st.buffered_bytes) == (5, 0, len(data))
    assert (st.high_watermark, st.log_start_offset, st.waiting_since) == (50, 3, NOW)
    assert st.ready.is_set()


def test_offset_out_of_range_asks_for_a_reset_by_the_policy() -> None:
    c = core(auto_offset_reset="latest")
    st = c.parts[T0]
    c.handle_partition(st, answer(T0, batch(0, 2)), NOW)
    epoch = st.epoch
    assert c.handle_partition(st, answer(T0, code=ErrorCode.OFFSET_OUT_OF_RANGE), NOW) is PartitionResult.RESET
    assert st.buffered_bytes == 0 and not st.has_buffered and st.epoch != epoch


def test_offset_out_of_range_without_a_reset_policy_is_an_error() -> None:
    c = core(auto_offset_reset="none")
    st = c.parts[T0]
    st.fetch_offset = 9
    assert c.handle_partition(st, answer(T0, code=ErrorCode.OFFSET_OUT_OF_RANGE), NOW) is PartitionResult.DELIVER
    assert isinstance(st.error, OffsetOutOfRangeError) and st.error.offset == 9
    assert st.position is None and st.fetch_offset is None


@pytest.mark.parametrize("code", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 74])
def test_leadership_errors_ask_for_new_metadata(code: int) -> None:
    c = core()
    response = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[answer(T0, code=code)])])
    sent = {T0: (c.parts[T0].epoch, 0)}
    outcome = c.handle_response(0, response, sent, 12, {}, NOW)
    assert outcome.leader_lost == [(c.parts[T0], error_name(code))]
    assert not outcome.got_data and outcome.resets == []
    assert c.parts[T0].error is None


def test_other_retriable_errors_are_retried_without_touching_the_state() -> None:
    c = core()
    st = c.parts[T0]
    assert c.handle_partition(st, answer(T0, code=ErrorCode.REQUEST_TIMED_OUT), NOW) is PartitionResult.RETRY
    assert st.error is None and st.fetch_offset == 0 and st.leader == 0


@pytest.mark.parametrize("code", [29, ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE])
def test_fatal_errors_are_surfaced_to_the_consumer(code: int) -> None:
    c = core()
    st = c.parts[T0]
    assert c.handle_partition(st, answer(T0, code=code), NOW) is PartitionResult.DELIVER
    assert isinstance(st.error, FetchError) and st.error.code == code and st.error.partition == T0
    with pytest.raises(FetchError):
        c.drain(10, None, Message, NOW)
    assert st.blocked and st.error is None


def test_answers_by_topic_id_and_stale_answers() -> None:
    c = core(T0, T1)
    sent = {tp: (st.epoch, 0) for tp, st in c.parts.items()}
    c.parts[T1].clear()  # seeked since the request: a new epoch
    response = FetchResponse(responses=[FetchResponseTopic(topic_id=TOPIC_ID, partitions=[
        answer(T0, batch(0, 1)), answer(T1, batch(0, 1))])])
    outcome = c.handle_response(0, response, sent, TOPIC_ID_VERSION, topics("t"), NOW)
    assert outcome.got_data
    assert c.parts[T0].buffered_bytes > 0 and c.parts[T1].buffered_bytes == 0


def test_answers_from_a_former_leader_are_dropped() -> None:
    c = core()
    sent = {T0: (c.parts[T0].epoch, 0)}
    c.parts[T0].leader = 2
    response = FetchResponse(responses=[FetchResponseTopic(topic="t", partitions=[answer(T0, batch(0, 1))])])
    assert not c.handle_response(0, response, sent, 12, {}, NOW).got_data
    assert c.parts[T0].buffered_bytes == 0


# ---------------------------------------------------------------- draining and resets


def test_taking_records_wakes_the_leader_and_frees_the_batch() -> None:
    c = core()
    st = c.parts[T0]
    c.handle_partition(st, answer(T0, batch(0, 3)), NOW)
    assert [r.offset for r in c.take(st, 2, Message, NOW + 1)] == [0, 1]
    assert c.wake_nodes == {0} and st.waiting_since == NOW + 1 and st.buffered_bytes > 0
    c.wake_nodes.clear()
    assert [r.offset for r in c.take(st, 5, Message, NOW + 2)] == [2]
    assert c.wake_nodes == {0} and st.waiting_since is None and st.buffered_bytes == 0
    assert st.position == 3


def test_resets_apply_only_to_partitions_unchanged_since_they_were_asked() -> None:
    c = core(T0, T1)
    for st in c.parts.values():
        st.position = st.fetch_offset = None
        st.reset_policy = "earliest"
    pending = c.resets_pending()
    assert {tp: policy for tp, (_st, _e, policy) in pending.items()} == {T0: "earliest", T1: "earliest"}
    c.parts[T1].clear()  # seeked meanwhile
    done = c.resets_done(pending, {T0: 4, T1: 8})
    assert done == [c.parts[T0]]
    assert (c.parts[T0].position, c.parts[T0].fetch_offset, c.parts[T0].reset_policy) == (4, 4, None)
    assert c.parts[T1].position is None


def test_a_failed_reset_becomes_the_partitions_error() -> None:
    c = core()
    st = c.parts[T0]
    st.position = st.fetch_offset = None
    st.reset_policy = "latest"
    pending = c.resets_pending()
    c.resets_failed(pending, KafkaError(29, "denied"))
    assert isinstance(st.error, FetchError) and st.error.code == 29 and st.reset_policy is None
