"""DescribeLogDirs (partition sizes) and DescribeProducers (idempotent producers per partition)."""

from __future__ import annotations

from pathlib import Path

import pytest
from broker_helpers import create_topic, quiet_admin, raw_request
from confluent_kafka import Producer as CkProducer
from kafka.admin import KafkaAdminClient

from slipstream.broker.broker import Broker
from slipstream.protocol.apis import describe_log_dirs as dld
from slipstream.protocol.apis import describe_producers as dp

pytestmark = pytest.mark.timeout(30)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], idempotent: bool = True) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "log_level": 0})
    for partition, n in per_partition.items():
        for i in range(n):
            p.produce(topic, b"x" * 100, partition=partition, timestamp=1_700_000_000_000 + i)
    assert p.flush(10) == 0


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_log_dirs_report_partition_sizes(tmp_path: Path, version: int) -> None:
    with Broker(data_dir=str(tmp_path), port=0) as broker:
        create_topic(quiet_admin(broker.bootstrap_servers), "sized", 2)
        produce(broker.bootstrap_servers, "sized", {0: 10})
        everything = raw_request(broker, dld.SPEC, version, dld.DescribeLogDirsRequest(topics=None))
        (result,) = everything.results
        assert result.error_code == 0
        assert result.log_dir == str((tmp_path / "logs").resolve())
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert sizes[("sized", 0)] > 10 * 100
        assert sizes[("sized", 1)] == 0
        assert ("__consumer_offsets", 0) in sizes
        if version >= 4:
            assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
        asked = raw_request(
            broker, dld.SPEC, version,
            dld.DescribeLogDirsRequest(topics=[
                dld.DescribeLogDirsRequestTopic(topic="sized", partitions=[1, 7]),
                dld.DescribeLogDirsRequestTopic(topic="missing", partitions=[0]),
            ]),
        )
        # Unknown topics and partitions are left out, as Kafka does.
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in asked.results[0].topics] == [("sized", [1])]


def test_kafka_python_admin_describes_log_dirs() -> None:
    with Broker(storage="memory", port=0) as broker:
        create_topic(quiet_admin(broker.bootstrap_servers), "kp-dirs", 1)
        produce(broker.bootstrap_servers, "kp-dirs", {0: 3})
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            response = admin.describe_log_dirs()
        finally:
            admin.close()
        (broker_dirs,) = response
        (log_dir,) = broker_dirs["log_dirs"]
        assert (broker_dirs["broker"], log_dir["error_code"], log_dir["log_dir"]) == (0, 0, "memory")
        sizes = {t["name"]: t["partitions"] for t in log_dir["topics"]}
        assert sizes["kp-dirs"][0]["partition_size"] > 0


def test_describe_producers_lists_idempotent_producers() -> None:
    with Broker(storage="memory", port=0) as broker:
        create_topic(quiet_admin(broker.bootstrap_servers), "prods", 2)
        produce(broker.bootstrap_servers, "prods", {0: 5})
        produce(broker.bootstrap_servers, "prods", {0: 2, 1: 1})
        produce(broker.bootstrap_servers, "prods", {1: 4}, idempotent=False)
        response = raw_request(
            broker, dp.SPEC, 0,
            dp.DescribeProducersRequest(topics=[
                dp.DescribeProducersRequestTopic(name="prods", partition_indexes=[0, 1, 9]),
                dp.DescribeProducersRequestTopic(name="nope", partition_indexes=[0]),
            ]),
        )
        p0, p1, p9 = response.topics[0].partitions
        assert [(a.producer_epoch, a.last_sequence) for a in p0.active_producers] == [(0, 4), (0, 1)]
        assert all(a.last_timestamp >= 1_700_000_000_000 for a in p0.active_producers)
        assert len({a.producer_id for a in p0.active_producers}) == 2
        # The non-idempotent producer is not listed; the second idempotent one is.
        assert [a.last_sequence for a in p1.active_producers] == [0]
        assert p9.error_code == 3 and response.topics[1].partitions[0].error_code == 3
