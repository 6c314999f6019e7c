"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs through real admin clients."""

from __future__ import annotations

import asyncio

import pytest
from broker_helpers import create_topic, error_of, raw_request, result
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from slipstream.broker.appends import append
from slipstream.broker.broker import Broker
from slipstream.protocol.apis import alter_configs as ac
from slipstream.protocol.apis import describe_configs as dc
from slipstream.protocol.apis import incremental_alter_configs as iac

pytestmark = [
    pytest.mark.timeout(30),
    # The legacy AlterConfigs API is tested on purpose.
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

# Kafka's topic configs (3.9/4.x LogConfig / TopicConfig), all described.
TOPIC_KEYS = {
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}


def describe_topic(admin: AdminClient, topic: str, **kwargs: object) -> dict[str, ConfigEntry]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], **kwargs)
    return dict(result(next(iter(futures.values()))))


def incremental(admin: AdminClient, topic: str, *changes: tuple[str, str | None, AlterConfigOpType],
                validate_only: bool = False) -> None:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in changes]
    futures = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)],
        validate_only=validate_only,
    )
    result(next(iter(futures.values())))


# ---------------------------------------------------------------- DescribeConfigs


def test_describe_topic_configs(admin: AdminClient) -> None:
    create_topic(admin, "described", 1, {"retention.ms": "60000"})
    configs = describe_topic(admin, "described")
    assert set(configs) == TOPIC_KEYS
    retention = configs["retention.ms"]
    assert retention.value == "60000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_describe_with_synonyms(admin: AdminClient) -> None:
    create_topic(admin, "synonyms", 1, {"retention.ms": "60000"})
    configs = describe_topic(admin, "synonyms")  # librdkafka always asks for synonyms
    chain = [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms.values()]
    assert chain == [
        ("retention.ms", "60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", str(7 * 24 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG.value),
    ]
    segment = [(s.name, s.source) for s in configs["segment.bytes"].synonyms.values()]
    assert segment == [("log.segment.bytes", ConfigSource.DEFAULT_CONFIG.value)]


def test_broker_setting_shows_as_static_broker_config() -> None:
    with Broker(storage="memory", port=0, log_retention_ms=3_600_000) as b:
        from broker_helpers import quiet_admin

        admin = quiet_admin(b.bootstrap_servers)
        create_topic(admin, "inherits", 1)
        configs = describe_topic(admin, "inherits")
        retention = configs["retention.ms"]
        assert retention.value == "3600000"
        assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
        chain = [(s.name, s.value, s.source) for s in retention.synonyms.values()]
        assert chain == [("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG.value)]


def test_describe_broker_configs(admin: AdminClient, broker: Broker) -> None:
    futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
    configs = result(next(iter(futures.values())))
    assert configs["num.partitions"].value == "1"
    assert configs["broker.id"].value == "0"
    assert all(c.is_read_only for c in configs.values())
    assert {c.source for c in configs.values()} == {ConfigSource.STATIC_BROKER_CONFIG.value}


def test_describe_unknown_topic(admin: AdminClient) -> None:
    with pytest.raises(KafkaException) as excinfo:
        describe_topic(admin, "no-such-topic")
    err = error_of(excinfo)
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "no-such-topic" in err.str()


def test_kafka_python_describe_configs(kadmin: KafkaAdminClient, admin: AdminClient) -> None:
    create_topic(admin, "kp-described", 1, {"cleanup.policy": "compact"})
    described = kadmin.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, "kp-described")], config_filter="all"
    )
    configs = described["topic"]["kp-described"]
    assert set(configs) == TOPIC_KEYS
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["config_type"] == "LONG"
    modified = kadmin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-described")])
    assert set(modified["topic"]["kp-described"]) == {"cleanup.policy"}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_every_version(broker: Broker, admin: AdminClient, version: int) -> None:
    create_topic(admin, "v-described", 1, {"retention.bytes": "4096"})
    request = dc.DescribeConfigsRequest(
        resources=[
            dc.DescribeConfigsRequestResource(
                resource_type=2, resource_name="v-described", configuration_keys=["retention.bytes", "bogus"]
            ),
            dc.DescribeConfigsRequestResource(resource_type=4, resource_name="0", configuration_keys=["num.partitions"]),
            dc.DescribeConfigsRequestResource(resource_type=4, resource_name="", configuration_keys=None),
            dc.DescribeConfigsRequestResource(resource_type=8, resource_name="0", configuration_keys=None),
            dc.DescribeConfigsRequestResource(resource_type=4, resource_name="zero", configuration_keys=None),
            dc.DescribeConfigsRequestResource(resource_type=4, resource_name="5", configuration_keys=None),
            dc.DescribeConfigsRequestResource(resource_type=2, resource_name="bad name!", configuration_keys=None),
        ],
        include_synonyms=True,
        include_documentation=True,
    )
    response = raw_request(broker, dc.SPEC, version, request)
    topic, broker_res, defaults, logger, bad_id, other_id, bad_name = response.results
    assert (topic.error_code, [c.name for c in topic.configs]) == (0, ["retention.bytes"])
    entry = topic.configs[0]
    assert (entry.value, entry.config_source) == ("4096", 1)
    assert [(s.name, s.source) for s in entry.synonyms] == [("retention.bytes", 1), ("log.retention.bytes", 5)]
    if version >= 3:
        assert entry.config_type == 5  # LONG
        assert entry.documentation and "size" in entry.documentation
    assert (broker_res.error_code, [c.value for c in broker_res.configs]) == (0, ["1"])
    assert broker_res.configs[0].read_only
    assert (defaults.error_code, defaults.configs) == (0, [])
    assert logger.error_code == 42 and "BROKER_LOGGER" in logger.error_message
    assert bad_id.error_code == 42 and "broker id" in bad_id.error_message
    # librdkafka routes a BROKER resource to that broker, so only a raw request can ask
    # this node about another one.
    assert other_id.error_code == 42 and "only node 0" in other_id.error_message
    assert bad_name.error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_describe_without_synonyms_or_docs(broker: Broker, admin: AdminClient) -> None:
    create_topic(admin, "plain", 1)
    request = dc.DescribeConfigsRequest(
        resources=[dc.DescribeConfigsRequestResource(resource_type=2, resource_name="plain", configuration_keys=[])],
        include_synonyms=False,
        include_documentation=False,
    )
    response = raw_request(broker, dc.SPEC, 4, request)
    configs = response.results[0].configs
    assert {c.name for c in configs} == TOPIC_KEYS  # an empty key list means all
    assert all(c.synonyms == [] and c.documentation is None for c in configs)


# ---------------------------------------------------------------- IncrementalAlterConfigs


def test_incremental_set_delete_append_subtract(admin: AdminClient) -> None:
    create_topic(admin, "inc", 1, {"retention.ms": "60000", "segment.bytes": "1048576"})
    incremental(
        admin,
        "inc",
        ("retention.bytes", "1000000", AlterConfigOpType.SET),
        ("segment.bytes", None, AlterConfigOpType.DELETE),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
    )
    configs = describe_topic(admin, "inc")
    assert configs["retention.ms"].value == "60000"  # untouched: merged, not replaced
    assert configs["retention.bytes"].value == "1000000"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"
    incremental(admin, "inc", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert describe_topic(admin, "inc")["cleanup.policy"].value == "compact"
    incremental(admin, "inc", ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert describe_topic(admin, "inc")["cleanup.policy"].value == "compact"  # no duplicates


def test_incremental_validate_only(admin: AdminClient) -> None:
    create_topic(admin, "inc-dry", 1)
    incremental(admin, "inc-dry", ("retention.ms", "1000", AlterConfigOpType.SET), validate_only=True)
    assert describe_topic(admin, "inc-dry")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        (("retention.ms", "soon", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG, "must be an integer"),
        (("no.such.config", "1", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG, "unknown topic config"),
        (("cleanup.policy", "shred", AlterConfigOpType.SET), KafkaError.INVALID_CONFIG, "cleanup.policy"),
        (("retention.ms", "5", AlterConfigOpType.APPEND), KafkaError.INVALID_CONFIG, "not a list config"),
        (("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT), KafkaError.INVALID_CONFIG, "cleanup.policy"),
    ],
)
def test_incremental_errors(
    admin: AdminClient, change: tuple[str, str, AlterConfigOpType], code: int, words: str
) -> None:
    create_topic(admin, "inc-bad", 1, {"retention.ms": "60000"})
    with pytest.raises(KafkaException) as excinfo:
        incremental(admin, "inc-bad", change)
    err = error_of(excinfo)
    assert err.code() == code
    assert words in err.str()
    configs = describe_topic(admin, "inc-bad")
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete"


def test_incremental_unknown_topic(admin: AdminClient) -> None:
    with pytest.raises(KafkaException) as excinfo:
        incremental(admin, "absent", ("retention.ms", "1", AlterConfigOpType.SET))
    assert error_of(excinfo).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_incremental_broker_refused(admin: AdminClient) -> None:
    entries = [ConfigEntry("log.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)]
    futures = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, "0", incremental_configs=entries)]
    )
    with pytest.raises(KafkaException) as excinfo:
        result(next(iter(futures.values())))
    err = error_of(excinfo)
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "static" in err.str()


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_every_version(broker: Broker, admin: AdminClient, version: int) -> None:
    create_topic(admin, "inc-v", 1)
    cfg = iac.IncrementalAlterConfigsRequestConfig
    res = iac.IncrementalAlterConfigsRequestResource
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            res(resource_type=2, resource_name="inc-v", configs=[cfg(name="retention.ms", config_operation=0, value="5000")]),
            res(resource_type=2, resource_name="inc-v2", configs=[]),
            res(resource_type=2, resource_name="inc-v2", configs=[]),
            res(resource_type=3, resource_name="group", configs=[]),
            res(resource_type=2, resource_name="inc-v", configs=[cfg(name="x", config_operation=9, value="1")]),
            res(resource_type=4, resource_name="0", configs=[]),
        ],
        validate_only=False,
    )
    # inc-v is named twice too (first and fifth entries): both are refused.
    response = raw_request(broker, iac.SPEC, version, request)
    codes = [r.error_code for r in response.responses]
    assert codes == [42, 42, 42, 42, 42, 0]
    assert "at most once" in response.responses[0].error_message
    assert "resource type 3" in response.responses[3].error_message
    assert describe_topic(admin, "inc-v")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    single = iac.IncrementalAlterConfigsRequest(
        resources=[
            res(resource_type=2, resource_name="inc-v", configs=[cfg(name="x", config_operation=9, value="1")]),
            res(resource_type=2, resource_name="inc-v2", configs=[
                cfg(name="retention.ms", config_operation=0, value=None)
            ]),
        ],
        validate_only=False,
    )
    response = raw_request(broker, iac.SPEC, version, single)
    assert response.responses[0].error_code == 42
    assert "unknown config_operation 9" in response.responses[0].error_message
    assert response.responses[1].error_code == 3  # no such topic: checked before values
    null_set = iac.IncrementalAlterConfigsRequest(
        resources=[res(resource_type=2, resource_name="inc-v", configs=[
            cfg(name="retention.ms", config_operation=0, value=None)
        ])],
        validate_only=False,
    )
    response = raw_request(broker, iac.SPEC, version, null_set)
    assert response.responses[0].error_code == 40  # INVALID_CONFIG
    assert "needs a value" in response.responses[0].error_message


# ---------------------------------------------------------------- AlterConfigs


def test_alter_configs_replaces_whole_override_set(admin: AdminClient) -> None:
    create_topic(admin, "legacy", 1, {"retention.ms": "60000"})
    futures = admin.alter_configs([ConfigResource(ResourceType.TOPIC, "legacy", set_config={"retention.bytes": "2048"})])
    result(next(iter(futures.values())))
    configs = describe_topic(admin, "legacy")
    assert configs["retention.bytes"].value == "2048"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # dropped


def test_alter_configs_bad_value(admin: AdminClient) -> None:
    create_topic(admin, "legacy-bad", 1, {"retention.ms": "60000"})
    futures = admin.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "legacy-bad", set_config={"max.message.bytes": "-5"})]
    )
    with pytest.raises(KafkaException) as excinfo:
        result(next(iter(futures.values())))
    err = error_of(excinfo)
    assert err.code() == KafkaError.INVALID_CONFIG
    assert "max.message.bytes" in err.str()
    assert describe_topic(admin, "legacy-bad")["retention.ms"].value == "60000"


def test_alter_configs_broker_refused(admin: AdminClient) -> None:
    futures = admin.alter_configs([ConfigResource(ResourceType.BROKER, "0", set_config={"num.partitions": "3"})])
    with pytest.raises(KafkaException) as excinfo:
        result(next(iter(futures.values())))
    err = error_of(excinfo)
    assert err.code() == KafkaError.INVALID_REQUEST
    assert "broker configs are static" in err.str()


@pytest.mark.parametrize("incremental", [True, False])
def test_kafka_python_alter_configs(kadmin: KafkaAdminClient, admin: AdminClient, incremental: bool) -> None:
    create_topic(admin, "kp-alter", 1, {"segment.ms": "3600000"})

    def alter(topic: str, configs: dict[str, str]) -> str:
        resource = KConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)
        answer = kadmin.alter_configs([resource], incremental=incremental, raise_on_unknown=False)
        return str(answer["topic"][topic])

    assert alter("kp-alter", {"retention.ms": "1234"}) == "OK"
    configs = describe_topic(admin, "kp-alter")
    assert configs["retention.ms"].value == "1234"
    # Without incremental, kafka-python re-sends the other overrides so they survive.
    assert configs["segment.ms"].value == "3600000"
    bad = alter("kp-alter", {"segment.bytes": "big"})
    assert "InvalidConfigurationError" in bad and "segment.bytes must be an integer" in bad
    missing = alter("kp-none", {"retention.ms": "1"})
    assert "UnknownTopicOrPartitionError" in missing and "kp-none" in missing


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_every_version(broker: Broker, admin: AdminClient, version: int) -> None:
    create_topic(admin, "alter-v", 1, {"retention.ms": "60000"})
    cfg = ac.AlterConfigsRequestConfig
    res = ac.AlterConfigsRequestResource
    request = ac.AlterConfigsRequest(
        resources=[
            res(resource_type=2, resource_name="alter-v", configs=[
                cfg(name="segment.ms", value="3600000"), cfg(name="retention.ms", value=None)
            ]),
            res(resource_type=2, resource_name="alter-missing", configs=[]),
            res(resource_type=8, resource_name="0", configs=[]),
            res(resource_type=4, resource_name="3", configs=[]),
            res(resource_type=4, resource_name="", configs=[cfg(name="num.partitions", value="2")]),
            res(resource_type=2, resource_name="alter-twice", configs=[cfg(name="a", value="1"), cfg(name="a", value="2")]),
        ],
        validate_only=False,
    )
    response = raw_request(broker, ac.SPEC, version, request)
    codes = [r.error_code for r in response.responses]
    assert codes == [0, 3, 42, 42, 42, 42]
    assert response.responses[0].error_message is None
    assert "given more than once" in response.responses[5].error_message
    configs = describe_topic(admin, "alter-v")
    assert configs["segment.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_alter_validate_only(broker: Broker, admin: AdminClient) -> None:
    create_topic(admin, "alter-dry", 1)
    request = ac.AlterConfigsRequest(
        resources=[ac.AlterConfigsRequestResource(
            resource_type=2, resource_name="alter-dry",
            configs=[ac.AlterConfigsRequestConfig(name="retention.ms", value="1")],
        )],
        validate_only=True,
    )
    assert raw_request(broker, ac.SPEC, 2, request).responses[0].error_code == 0
    assert describe_topic(admin, "alter-dry")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


# ---------------------------------------------------------------- Kafka's ordinary topic configs


def test_ordinary_kafka_topic_configs_are_accepted_and_described(admin: AdminClient) -> None:
    configs = {"compression.type": "lz4", "min.cleanable.dirty.ratio": "0.2", "preallocate": "true",
               "max.compaction.lag.ms": "60000", "segment.index.bytes": "1048576"}
    create_topic(admin, "ordinary", 1, configs)
    described = describe_topic(admin, "ordinary")
    for name, value in configs.items():
        assert described[name].value == value
        assert described[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["compression.zstd.level"].value == "3"
    assert described["compression.zstd.level"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(
    ("name", "value"),
    [("min.cleanable.dirty.ratio", "1.5"), ("compression.type", "brotli"), ("preallocate", "maybe"),
     ("compression.gzip.level", "10"), ("min.insync.replicas", "0"), ("segment.index.bytes", "3"),
     ("max.compaction.lag.ms", "0")],
)
def test_out_of_range_topic_configs_are_refused(admin: AdminClient, name: str, value: str) -> None:
    with pytest.raises(KafkaException) as refused:
        create_topic(admin, f"bad-{name.replace('.', '-')}", 1, {name: value})
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert name in refused.value.args[0].str()


async def test_min_insync_replicas_above_one_refuses_acks_all() -> None:
    from slipstream.protocol.errors import ErrorCode
    from slipstream.protocol.errors import KafkaError as SlipstreamError
    from slipstream.protocol.records import ProducerRecord, build_batch

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("strict", 1, {"min.insync.replicas": "2"})
        batch = memoryview(bytearray(build_batch([ProducerRecord(b"k", b"v")])))
        with pytest.raises(SlipstreamError) as refused:
            await append(b.state, "strict", 0, batch, acks=-1)
        assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert "min.insync.replicas=2" in refused.value.message
        info = await append(b.state, "strict", 0, memoryview(bytearray(build_batch([ProducerRecord(b"k", b"v")]))),
                                    acks=1)
        assert info.base_offset == 0  # acks=1 needs only the leader


async def test_timestamps_outside_the_topic_window_are_refused() -> None:
    from slipstream.protocol.errors import ErrorCode
    from slipstream.protocol.errors import KafkaError as SlipstreamError
    from slipstream.protocol.records import ProducerRecord, build_batch

    async with Broker(storage="memory", port=0) as b:
        now = [1_000_000_000]
        b.state.clock = lambda: now[0]
        b.state.topics.create("window", 1, {"message.timestamp.before.max.ms": "1000",
                                            "message.timestamp.after.max.ms": "500"})

        def batch_at(ts: int) -> memoryview:
            return memoryview(bytearray(build_batch([ProducerRecord(b"k", b"v", timestamp_ms=ts)])))

        assert (await append(b.state, "window", 0, batch_at(now[0] - 1000), acks=1)).base_offset == 0
        assert (await append(b.state, "window", 0, batch_at(now[0] + 500), acks=1)).base_offset == 1
        for ts in (now[0] - 1001, now[0] + 501):
            with pytest.raises(SlipstreamError) as refused:
                await append(b.state, "window", 0, batch_at(ts), acks=1)
            assert refused.value.code == ErrorCode.INVALID_TIMESTAMP


@pytest.mark.parametrize(("topic_codec", "stored"), [("zstd", 4), ("uncompressed", 0), ("producer", 3)])
async def test_compression_type_recompresses_stored_batches(topic_codec: str, stored: int) -> None:
    from confluent_kafka import Consumer

    from slipstream.protocol.record_batch import parse_header
    from slipstream.protocol.records import ProducerRecord, build_batch, iter_records

    async with Broker(storage="memory", port=0) as b:
        b.state.topics.create("squeezed", 1, {"compression.type": topic_codec})
        sent = [ProducerRecord(b"k%d" % i, b"value %d " % i * 20, timestamp_ms=1000 + i) for i in range(50)]
        batch = build_batch(sent, compression=3, producer_id=9, producer_epoch=0, base_sequence=0)  # lz4
        info = await append(b.state, "squeezed", 0, memoryview(bytearray(batch)), acks=1)
        assert (info.base_offset, info.last_offset) == (0, 49)
        plog = b.state.topics.partition("squeezed", 0)
        assert plog is not None
        chunk = b"".join(bytes(c) for c in plog.read(0, 1 << 20).chunks)
        header = parse_header(chunk)
        assert header.compression == stored
        assert (header.producer_id, header.base_sequence) == (9, 0)  # idempotence fields kept
        got = [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(chunk)]
        assert got == [(i, s.key, s.value, s.timestamp_ms) for i, s in enumerate(sent)]
        # A real client reads what was stored (on a thread: the broker runs on this loop).
        def consume() -> list[bytes]:
            consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "sq",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
            values: list[bytes] = []
            try:
                consumer.subscribe(["squeezed"])
                for _ in range(150):
                    msg = consumer.poll(0.2)
                    if msg is not None and msg.error() is None:
                        values.append(msg.value())
                    if len(values) == 50:
                        break
            finally:
                consumer.close()
            return values

        assert await asyncio.to_thread(consume) == [s.value for s in sent]
