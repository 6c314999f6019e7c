"""Option parsing and offset-range planning of the data source (no Spark needed)."""

from __future__ import annotations

import itertools
import json

import pytest

from slipstream.spark.options import (
    OffsetRange,
    OptionError,
    offsets_from_json,
    offsets_to_json,
    parse_source_options,
    plan_ranges,
    rate_limit,
)

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}


def test_defaults_follow_the_kafka_source() -> None:
    stream = parse_source_options(BASE, streaming=True)
    batch = parse_source_options(BASE, streaming=False)
    assert stream.starting.kind == "latest" and batch.starting.kind == "earliest"
    assert batch.ending.kind == "latest"
    assert stream.fail_on_data_loss and not stream.include_headers
    assert parse_source_options({"bootstrap.servers": "h:1", "subscribe": "a, b"}, streaming=True).subscribe == ("a", "b")
    assert parse_source_options({**BASE, "KAFKA.GROUP.ID": "g"}, streaming=True).group_id == "g"


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, True, "kafka.bootstrap.servers"),
        ({**BASE, "assign": '{"t": [0]}'}, True, "exactly one of"),
        ({"kafka.bootstrap.servers": "h:1"}, True, "exactly one of"),
        ({**BASE, "startingOffsets": "latest"}, False, "not allowed for a batch"),
        ({**BASE, "startingOffsets": "group"}, True, "needs the option group.id"),
        ({**BASE, "startingOffsets": "{bad"}, True, "startingoffsets must be earliest, latest or JSON"),
        ({**BASE, "endingOffsets": "earliest"}, False, "not allowed"),
        ({**BASE, "endingOffsets": "latest"}, True, "batch queries only"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "must be >= 1"),
        ({**BASE, "failOnDataLoss": "maybe"}, True, "true or false"),
        ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, True, "not a valid pattern"),
        ({"kafka.bootstrap.servers": "h:1", "assign": '{"t": "0"}'}, True, "list of partition numbers"),
    ],
)
def test_bad_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source_options(options, streaming=streaming)


def test_offsets_json_round_trip() -> None:
    offsets = {("b", 10): 5, ("a", 2): 7, ("a", 0): 1}
    text = offsets_to_json(offsets)
    assert text == '{"a":{"0":1,"2":7},"b":{"10":5}}'
    assert offsets_from_json(text) == offsets
    assert offsets_from_json(json.loads(text)) == offsets


def test_plan_ranges_one_per_partition_with_data() -> None:
    start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 9}
    end = {("t", 0): 10, ("t", 1): 5, ("t", 2): 12}
    assert plan_ranges(start, end, None) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 9, 12)]


def test_plan_ranges_splits_for_min_partitions() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 100, ("t", 1): 10}
    ranges = plan_ranges(start, end, 6)
    # 110 records / 6 -> ~18 each: partition 0 is split in 5, partition 1 stays whole.
    assert [r for r in ranges if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]
    zero = [r for r in ranges if r.partition == 0]
    assert len(zero) == 5
    assert zero[0].start == 0 and zero[-1].end == 100
    assert all(a.end == b.start for a, b in itertools.pairwise(zero))
    # Enough partitions already: no split.
    assert len(plan_ranges(start, end, 2)) == 2


def test_rate_limit_is_exact_and_proportional() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 100, ("t", 1): 10, ("t", 2): 50}
    end = rate_limit(start, latest, 33)
    assert sum(end[tp] - start[tp] for tp in start) == 33
    assert end[("t", 2)] == 50
    assert end[("t", 0)] - start[("t", 0)] == 30
    assert rate_limit(start, latest, 1000) == latest
    # Many partitions, a limit smaller than their count: never more than the limit.
    many_start = {("t", p): 0 for p in range(10)}
    many_latest = {("t", p): 3 for p in range(10)}
    assert sum(rate_limit(many_start, many_latest, 4).values()) == 4


def test_isolation_level_option() -> None:
    assert parse_source_options(BASE, streaming=True).isolation_level == 0
    opts = parse_source_options({**BASE, "kafka.isolation.level": "READ_COMMITTED"}, streaming=False)
    assert opts.isolation_level == 1
    with pytest.raises(OptionError, match="read_uncommitted or read_committed"):
        parse_source_options({**BASE, "kafka.isolation.level": "serializable"}, streaming=True)


def test_sink_exactly_once_options() -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from slipstream.spark.sink_rows import parse_sink_options

    schema = StructType([StructField("value", BinaryType())])
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    assert not parse_sink_options(base, schema).exactly_once
    opts = parse_sink_options({**base, "exactlyOnce": "TRUE", "transactionalIdPrefix": "job"}, schema)
    assert opts.exactly_once and opts.transactional_id_prefix == "job" and opts.transaction_timeout_ms == 300_000
    with pytest.raises(OptionError, match="for streaming writes"):
        parse_sink_options({**base, "exactlyOnce": "true"}, schema, streaming=False)
    with pytest.raises(OptionError, match="true or false"):
        parse_sink_options({**base, "exactlyOnce": "maybe"}, schema)
