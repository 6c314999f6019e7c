"""ACLs enforced by the handlers, per API family, over real SASL connections to an
in-process broker (authorizer=acl, super user admin): each refusal carries Kafka's
error code and leaks nothing; each allowance works. Also the ACL APIs themselves and
their persistence."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from slipstream.broker.broker import Broker
from slipstream.client.acl_admin import AclBindingFilter
from slipstream.client.admin import Admin
from slipstream.client.connection import BrokerConnection
from slipstream.client.security import ClientSecurity
from slipstream.protocol.acl_types import (
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from slipstream.protocol.apis import alter_configs as ac
from slipstream.protocol.apis import consumer_group_describe as cgd
from slipstream.protocol.apis import create_acls as ca
from slipstream.protocol.apis import create_topics as ct
from slipstream.protocol.apis import delete_acls as da
from slipstream.protocol.apis import delete_groups as dg
from slipstream.protocol.apis import delete_topics as dt
from slipstream.protocol.apis import describe_acls as dacl
from slipstream.protocol.apis import describe_cluster as dc
from slipstream.protocol.apis import describe_configs as dcf
from slipstream.protocol.apis import describe_groups as dgr
from slipstream.protocol.apis import describe_user_scram_credentials as dus
from slipstream.protocol.apis import fetch as fe
from slipstream.protocol.apis import find_coordinator as fc
from slipstream.protocol.apis import incremental_alter_configs as iac
from slipstream.protocol.apis import init_producer_id as ipi
from slipstream.protocol.apis import join_group as jg
from slipstream.protocol.apis import list_groups as lg
from slipstream.protocol.apis import list_offsets as lo
from slipstream.protocol.apis import metadata as md
from slipstream.protocol.apis import offset_commit as oc
from slipstream.protocol.apis import offset_fetch as of
from slipstream.protocol.apis import produce as pr
from slipstream.protocol.apis import write_txn_markers as wtm
from slipstream.protocol.records import ProducerRecord, build_batch

pytestmark = pytest.mark.timeout(60)

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_REQUEST = 42
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54
NAMED_PRODUCE = 12  # v13 names topics by id
NAMED_FETCH = 12  # v13 too
NAMED_COMMIT = 9  # v10 too

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def allow(principal: str, op: Operation, rtype: ResourceType, name: str, ptype: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, "*", op, ALLOW)


def sasl(user: str) -> ClientSecurity:
    return ClientSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_username=user, sasl_password="pw")


SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "scram_bootstrap_users": "admin:pw,alice:pw,bob:pw",
    "authorizer": "acl",
    "super_users": "User:admin",
}


class Secured:
    def __init__(self, broker: Broker, stack: contextlib.AsyncExitStack) -> None:
        self.broker = broker
        self.stack = stack
        self.conns: dict[str, BrokerConnection] = {}

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_for("SASL_PLAINTEXT")

    async def conn(self, user: str) -> BrokerConnection:
        if user not in self.conns:
            port = self.broker.ports["SASL_PLAINTEXT"]
            made = await BrokerConnection("127.0.0.1", port, security=sasl(user)).connect()
            self.stack.push_async_callback(made.close)
            self.conns[user] = made
        return self.conns[user]

    async def admin(self) -> Admin:
        made = Admin(self.bootstrap, **vars(sasl("admin")))
        self.stack.push_async_callback(made.close)
        return made

    async def grant(self, *bindings: AclBinding) -> None:
        await (await self.admin()).create_acls(list(bindings))

    async def topic(self, name: str, partitions: int = 1) -> None:
        await (await self.admin()).create_topic(name, partitions)

    def log_end(self, topic: str) -> int:
        assert self.broker.state is not None
        plog = self.broker.state.topics.partition(topic, 0)
        assert plog is not None
        return plog.log_end_offset


@pytest.fixture
async def secured() -> AsyncIterator[Secured]:
    async with contextlib.AsyncExitStack() as stack:
        broker = await stack.enter_async_context(Broker(storage="memory", port=0, **SECURED))
        yield Secured(broker, stack)


def produce_request(topic: str, value: bytes = b"v", transactional_id: str | None = None) -> pr.ProduceRequest:
    batch = build_batch([ProducerRecord(key=None, value=value)])
    return pr.ProduceRequest(
        transactional_id=transactional_id, acks=1, timeout_ms=1000,
        topic_data=[pr.ProduceRequestTopicData(name=topic, partition_data=[
            pr.ProduceRequestPartitionData(index=0, records=memoryview(batch))
        ])],
    )


def fetch_request(topic: str) -> fe.FetchRequest:
    return fe.FetchRequest(
        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[fe.FetchRequestTopic(topic=topic, partitions=[
            fe.FetchRequestPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        ])],
    )


# ------------------------------------------------------------------ the ACL APIs


async def test_acl_apis_need_cluster_alter_and_describe(secured: Secured) -> None:
    alice = await secured.conn("alice")
    creation = ca.CreateAclsRequestCreation(
        resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:alice", host="*",
        operation=int(Operation.ALL), permission_type=3,
    )
    created = await alice.request(ca.SPEC, ca.CreateAclsRequest(creations=[creation]))
    assert [r.error_code for r in created.results] == [CLUSTER_AUTHORIZATION_FAILED]
    described = await alice.request(dacl.SPEC, dacl.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1,
    ))
    assert described.error_code == CLUSTER_AUTHORIZATION_FAILED and described.resources == []
    deleted = await alice.request(da.SPEC, da.DeleteAclsRequest(filters=[da.DeleteAclsRequestFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1,
    )]))
    assert [r.error_code for r in deleted.filter_results] == [CLUSTER_AUTHORIZATION_FAILED]
    assert secured.broker.state is not None and secured.broker.state.authorizer is not None
    assert secured.broker.state.authorizer.bindings() == []

    # Alter on the cluster lets alice manage ACLs (and Describe is implied by Alter).
    await secured.grant(allow("User:alice", Operation.ALTER, C, "kafka-cluster"))
    created = await alice.request(ca.SPEC, ca.CreateAclsRequest(creations=[creation]))
    assert [r.error_code for r in created.results] == [0]
    admin = await secured.admin()
    assert set(await admin.describe_acls()) == {
        allow("User:alice", Operation.ALTER, C, "kafka-cluster"), allow("User:alice", Operation.ALL, T, "orders"),
    }


async def test_acl_apis_validate_filter_and_delete(secured: Secured) -> None:
    admin = await secured.admin()
    with pytest.raises(Exception, match="CLUSTER resource"):
        await admin.create_acls([AclBinding(C, "my-cluster", PatternType.LITERAL, "User:a", "*", Operation.ALTER, ALLOW)])
    with pytest.raises(Exception, match="Type:name"):
        await admin.create_acls([AclBinding(T, "t", PatternType.LITERAL, "alice", "*", Operation.READ, ALLOW)])
    a = allow("User:alice", Operation.READ, T, "orders")
    b = allow("User:alice", Operation.WRITE, T, "ord", PatternType.PREFIXED)
    c = allow("User:bob", Operation.READ, G, "g1")
    await admin.create_acls([a, b, c, a])  # creating one twice is fine
    assert sorted(await admin.describe_acls()) == sorted([a, b, c])
    matching = AclBindingFilter(resource_type=T, resource_name="orders", pattern_type=PatternType.MATCH)
    assert sorted(await admin.describe_acls(matching)) == sorted([a, b])
    assert await admin.describe_acls(AclBindingFilter(principal="User:bob")) == [c]
    conn = await secured.conn("admin")
    bad = await conn.request(dacl.SPEC, dacl.DescribeAclsRequest(
        resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1,
    ))
    assert bad.error_code == INVALID_REQUEST
    assert await admin.delete_acls([AclBindingFilter(resource_type=T)]) == sorted([a, b])
    assert await admin.describe_acls() == [c]


async def test_acl_apis_answer_security_disabled_without_an_authorizer() -> None:
    async with Broker(storage="memory", port=0) as broker, Admin(broker.bootstrap_servers) as admin:
        with pytest.raises(Exception, match="SECURITY_DISABLED"):
            await admin.describe_acls()
        with pytest.raises(Exception, match="SECURITY_DISABLED"):
            await admin.create_acls([allow("User:a", Operation.READ, T, "t")])


async def test_acls_survive_a_restart_and_old_versions_speak_literal(tmp_path: Path) -> None:
    settings: dict[str, Any] = {**SECURED, "data_dir": str(tmp_path)}
    binding = allow("User:alice", Operation.READ, T, "orders")
    async with (
        Broker(storage="disk", port=0, **settings) as broker,
        Admin(broker.bootstrap_for("SASL_PLAINTEXT"), **vars(sasl("admin"))) as admin,
    ):
        await admin.create_acls([binding, allow("User:bob", Operation.READ, T, "x", PatternType.PREFIXED)])
    assert (tmp_path / "acls.json").exists()
    async with Broker(storage="disk", port=0, **settings) as broker:
        async with Admin(broker.bootstrap_for("SASL_PLAINTEXT"), **vars(sasl("admin"))) as admin:
            assert binding in await admin.describe_acls()
        # DescribeAcls v0 has no pattern type: it filters LITERAL and answers without one.
        conn = await BrokerConnection("127.0.0.1", broker.ports["SASL_PLAINTEXT"], security=sasl("admin")).connect()
        try:
            v0 = await conn.request(dacl.SPEC, dacl.DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, principal_filter=None, host_filter=None,
                operation=1, permission_type=1,
            ), version=0)
        finally:
            await conn.close()
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in v0.resources] == [("orders", ["User:alice"])]


# ------------------------------------------------------------------ topics: metadata, produce, fetch, offsets


async def test_metadata_shows_only_what_the_principal_may_describe(secured: Secured) -> None:
    await secured.topic("orders")
    await secured.topic("secret")
    await secured.grant(allow("User:alice", Operation.READ, T, "orders"))
    alice = await secured.conn("alice")
    everything = await alice.request(md.SPEC, md.MetadataRequest(topics=None))
    assert [t.name for t in everything.topics] == ["orders"]
    named = await alice.request(md.SPEC, md.MetadataRequest(topics=[
        md.MetadataRequestTopic(name="secret"), md.MetadataRequestTopic(name="orders"),
        md.MetadataRequestTopic(name="not-there"),
    ], allow_auto_topic_creation=True))
    by_name = {t.name: t for t in named.topics}
    assert by_name["secret"].error_code == TOPIC_AUTHORIZATION_FAILED and by_name["secret"].partitions == []
    assert by_name["not-there"].error_code == TOPIC_AUTHORIZATION_FAILED
    assert by_name["orders"].error_code == 0 and len(by_name["orders"].partitions) == 1
    assert secured.broker.state is not None and secured.broker.state.topics.get("not-there") is None

    # Describe without Create: an unknown topic is not created; Create (by prefix) creates it.
    await secured.grant(allow("User:alice", Operation.DESCRIBE, T, "auto-", PatternType.PREFIXED))
    refused = await alice.request(md.SPEC, md.MetadataRequest(
        topics=[md.MetadataRequestTopic(name="auto-1")], allow_auto_topic_creation=True))
    assert refused.topics[0].error_code == TOPIC_AUTHORIZATION_FAILED
    await secured.grant(allow("User:alice", Operation.CREATE, T, "auto-", PatternType.PREFIXED))
    made = await alice.request(md.SPEC, md.MetadataRequest(
        topics=[md.MetadataRequestTopic(name="auto-1")], allow_auto_topic_creation=True))
    assert made.topics[0].error_code == 0
    assert secured.broker.state.topics.get("auto-1") is not None


async def test_produce_needs_write_and_fetch_needs_read(secured: Secured) -> None:
    await secured.topic("orders")
    alice = await secured.conn("alice")
    refused = await alice.request(pr.SPEC, produce_request("orders"), version=NAMED_PRODUCE)
    assert refused.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert secured.log_end("orders") == 0
    # A topic that does not exist is refused the same way: existence is not revealed.
    ghost = await alice.request(pr.SPEC, produce_request("ghost"), version=NAMED_PRODUCE)
    assert ghost.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED

    await secured.grant(allow("User:alice", Operation.WRITE, T, "orders"))
    written = await alice.request(pr.SPEC, produce_request("orders", b"secret-value"), version=NAMED_PRODUCE)
    assert written.responses[0].partition_responses[0].error_code == 0
    assert secured.log_end("orders") == 1

    fetched = await alice.request(fe.SPEC, fetch_request("orders"), version=NAMED_FETCH)
    part = fetched.responses[0].partitions[0]
    assert part.error_code == TOPIC_AUTHORIZATION_FAILED
    assert not part.records and part.high_watermark == -1
    await secured.grant(allow("User:bob", Operation.READ, T, "orders"))
    bob = await secured.conn("bob")
    fetched = await bob.request(fe.SPEC, fetch_request("orders"), version=NAMED_FETCH)
    part = fetched.responses[0].partitions[0]
    assert part.error_code == 0 and b"secret-value" in bytes(part.records)
    # A follower's fetch (replica id >= 0) needs ClusterAction, Read on the topic is not enough.
    as_follower = fetch_request("orders")
    as_follower.replica_id = 1
    follower = (await bob.request(fe.SPEC, as_follower, version=NAMED_FETCH)).responses[0].partitions[0]
    assert follower.error_code == TOPIC_AUTHORIZATION_FAILED and not follower.records
    await secured.grant(allow("User:bob", Operation.CLUSTER_ACTION, C, "kafka-cluster"))
    follower = (await bob.request(fe.SPEC, as_follower, version=NAMED_FETCH)).responses[0].partitions[0]
    assert follower.error_code == 0
    # Read implies Describe: bob may list offsets; alice (Write) may too; nobody else.
    offsets = lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[lo.ListOffsetsRequestTopic(
        name="orders", partitions=[lo.ListOffsetsRequestPartition(partition_index=0, timestamp=-1)])])
    assert (await bob.request(lo.SPEC, offsets)).topics[0].partitions[0].offset == 1
    admin = await secured.conn("admin")  # a super user
    assert (await admin.request(lo.SPEC, offsets)).topics[0].partitions[0].error_code == 0


async def test_list_offsets_needs_describe(secured: Secured) -> None:
    await secured.topic("orders")
    alice = await secured.conn("alice")
    offsets = lo.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[lo.ListOffsetsRequestTopic(
        name="orders", partitions=[lo.ListOffsetsRequestPartition(partition_index=0, timestamp=-1)])])
    part = (await alice.request(lo.SPEC, offsets)).topics[0].partitions[0]
    assert part.error_code == TOPIC_AUTHORIZATION_FAILED and part.offset == -1


async def test_deny_beats_allow_and_prefixes_apply(secured: Secured) -> None:
    await secured.topic("orders")
    await secured.grant(
        allow("User:*", Operation.WRITE, T, "ord", PatternType.PREFIXED),
        AclBinding(T, "orders", PatternType.LITERAL, "User:bob", "*", Operation.WRITE, DENY),
    )
    alice, bob = await secured.conn("alice"), await secured.conn("bob")
    assert (await alice.request(pr.SPEC, produce_request("orders"), version=NAMED_PRODUCE)).responses[0].partition_responses[0].error_code == 0
    denied = await bob.request(pr.SPEC, produce_request("orders"), version=NAMED_PRODUCE)
    assert denied.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED


# ------------------------------------------------------------------ producers


async def test_init_producer_id_rules(secured: Secured) -> None:
    alice = await secured.conn("alice")
    idempotent = await alice.request(ipi.SPEC, ipi.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert idempotent.error_code == CLUSTER_AUTHORIZATION_FAILED
    transactional = await alice.request(ipi.SPEC, ipi.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000))
    assert transactional.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Write on any topic is enough for an idempotent producer (Kafka 3.x).
    await secured.grant(allow("User:alice", Operation.WRITE, T, "orders"))
    idempotent = await alice.request(ipi.SPEC, ipi.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert idempotent.error_code == 0 and idempotent.producer_id >= 0
    # A transactional produce needs Write on its transactional id.
    await secured.topic("orders")
    refused = await alice.request(pr.SPEC, produce_request("orders", transactional_id="tx"), version=NAMED_PRODUCE)
    assert refused.responses[0].partition_responses[0].error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    bob = await secured.conn("bob")
    found = await bob.request(fc.SPEC, fc.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]))
    assert found.coordinators[0].error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # A refused lookup has no effect: __transaction_state is not created for it.
    assert secured.broker.state is not None and secured.broker.state.topics.get("__transaction_state") is None


async def test_write_txn_markers_needs_cluster_action(secured: Secured) -> None:
    await secured.topic("orders")
    alice = await secured.conn("alice")
    await secured.grant(allow("User:alice", Operation.ALL, T, "orders"))
    response = await alice.request(wtm.SPEC, wtm.WriteTxnMarkersRequest(markers=[wtm.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[wtm.WritableTxnMarkerTopic(name="orders", partition_indexes=[0])],
    )]))
    assert response.markers[0].topics[0].partitions[0].error_code == CLUSTER_AUTHORIZATION_FAILED
    assert secured.log_end("orders") == 0


# ------------------------------------------------------------------ groups


def orders_commit() -> oc.OffsetCommitRequest:
    """Group g1 commits offset 5 of orders-0 (standalone: no generation, no member)."""
    return oc.OffsetCommitRequest(group_id="g1", generation_id_or_member_epoch=-1, member_id="", topics=[
        oc.OffsetCommitRequestTopic(name="orders", partitions=[
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="m")])])


async def test_group_apis_need_rights_on_group_and_topics(secured: Secured) -> None:
    await secured.topic("orders")
    admin, alice = await secured.conn("admin"), await secured.conn("alice")
    commit = orders_commit()
    assert (await admin.request(oc.SPEC, commit, version=NAMED_COMMIT)).topics[0].partitions[0].error_code == 0

    join = jg.JoinGroupRequest(group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                               protocol_type="consumer", protocols=[])
    assert (await alice.request(jg.SPEC, join)).error_code == GROUP_AUTHORIZATION_FAILED
    refused_commit = await alice.request(oc.SPEC, commit, version=NAMED_COMMIT)
    assert refused_commit.topics[0].partitions[0].error_code == GROUP_AUTHORIZATION_FAILED

    fetch_all = of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g1", topics=None)])
    refused = await alice.request(of.SPEC, fetch_all)
    assert refused.groups[0].error_code == GROUP_AUTHORIZATION_FAILED and refused.groups[0].topics == []
    described = await alice.request(dgr.SPEC, dgr.DescribeGroupsRequest(groups=["g1"]))
    assert described.groups[0].error_code == GROUP_AUTHORIZATION_FAILED
    listed = await alice.request(lg.SPEC, lg.ListGroupsRequest())
    assert listed.groups == []
    found = await alice.request(fc.SPEC, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]))
    assert found.coordinators[0].error_code == GROUP_AUTHORIZATION_FAILED
    deleted = await alice.request(dg.SPEC, dg.DeleteGroupsRequest(groups_names=["g1"]))
    assert deleted.results[0].error_code == GROUP_AUTHORIZATION_FAILED

    # Read on the group, not on the topic: the group is visible, the topic's offsets are not.
    await secured.grant(allow("User:alice", Operation.READ, G, "g1"))
    assert [g.group_id for g in (await alice.request(lg.SPEC, lg.ListGroupsRequest())).groups] == ["g1"]
    assert (await alice.request(of.SPEC, fetch_all)).groups[0].topics == []
    listed_topic = of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(group_id="g1", topics=[
        of.OffsetFetchRequestTopics(name="orders", partition_indexes=[0])])])
    hidden = (await alice.request(of.SPEC, listed_topic, version=NAMED_COMMIT)).groups[0].topics[0].partitions[0]
    assert hidden.error_code == TOPIC_AUTHORIZATION_FAILED and hidden.committed_offset == -1 and hidden.metadata is None
    assert (await alice.request(oc.SPEC, commit, version=NAMED_COMMIT)).topics[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED

    await secured.grant(allow("User:alice", Operation.READ, T, "orders"))
    visible = (await alice.request(of.SPEC, listed_topic, version=NAMED_COMMIT)).groups[0].topics[0].partitions[0]
    assert visible.error_code == 0 and visible.committed_offset == 5
    assert (await alice.request(oc.SPEC, commit, version=NAMED_COMMIT)).topics[0].partitions[0].error_code == 0


async def test_offset_fetch_v7_hides_topics_without_describe(secured: Secured) -> None:
    """The one-group form (v0-7) hides topics as the groups form does: a listed topic without
    Describe answers TOPIC_AUTHORIZATION_FAILED and no offset; the all-topics form leaves it out."""
    await secured.topic("orders")
    admin, alice = await secured.conn("admin"), await secured.conn("alice")
    commit = orders_commit()
    assert (await admin.request(oc.SPEC, commit, version=NAMED_COMMIT)).topics[0].partitions[0].error_code == 0
    await secured.grant(allow("User:alice", Operation.READ, G, "g1"))
    listed = of.OffsetFetchRequest(group_id="g1", topics=[of.OffsetFetchRequestTopic(name="orders", partition_indexes=[0])])
    every = of.OffsetFetchRequest(group_id="g1", topics=None)

    hidden = (await alice.request(of.SPEC, listed, version=7)).topics[0].partitions[0]
    assert hidden.error_code == TOPIC_AUTHORIZATION_FAILED and hidden.committed_offset == -1 and hidden.metadata is None
    assert (await alice.request(of.SPEC, every, version=7)).topics == []

    await secured.grant(allow("User:alice", Operation.READ, T, "orders"))
    visible = (await alice.request(of.SPEC, listed, version=7)).topics[0].partitions[0]
    assert visible.error_code == 0 and visible.committed_offset == 5
    assert [t.name for t in (await alice.request(of.SPEC, every, version=7)).topics] == ["orders"]


async def test_group_describes_refuse_unpermitted_groups_in_place(secured: Secured) -> None:
    """DescribeGroups and ConsumerGroupDescribe answer in the request's order: a group the
    principal may Describe is the coordinator's answer, any other is refused, nothing said of it."""
    alice = await secured.conn("alice")
    await secured.grant(allow("User:alice", Operation.DESCRIBE, G, "seen"))
    classic = await alice.request(dgr.SPEC, dgr.DescribeGroupsRequest(groups=["hidden", "seen"]))
    consumer = await alice.request(cgd.SPEC, cgd.ConsumerGroupDescribeRequest(group_ids=["hidden", "seen"]))
    for groups in (classic.groups, consumer.groups):
        assert [g.group_id for g in groups] == ["hidden", "seen"]
        assert groups[0].error_code == GROUP_AUTHORIZATION_FAILED and groups[0].group_state == ""
        assert groups[1].error_code != GROUP_AUTHORIZATION_FAILED
    assert consumer.groups[0].group_epoch == -1 and consumer.groups[0].members == []


# ------------------------------------------------------------------ admin and configs


async def test_admin_apis_need_their_rights(secured: Secured) -> None:
    await secured.topic("orders")
    alice = await secured.conn("alice")
    created = await alice.request(ct.SPEC, ct.CreateTopicsRequest(topics=[ct.CreateTopicsRequestTopic(
        name="new", num_partitions=1, replication_factor=1)], timeout_ms=1000))
    assert created.topics[0].error_code == TOPIC_AUTHORIZATION_FAILED
    deleted = await alice.request(dt.SPEC, dt.DeleteTopicsRequest(topic_names=["orders"], timeout_ms=1000), version=5)
    assert deleted.responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    assert secured.broker.state is not None and secured.broker.state.topics.get("orders") is not None
    cluster = await alice.request(dc.SPEC, dc.DescribeClusterRequest())
    assert cluster.error_code == CLUSTER_AUTHORIZATION_FAILED and cluster.brokers == []
    scram = await alice.request(dus.SPEC, dus.DescribeUserScramCredentialsRequest(users=None))
    assert scram.error_code == CLUSTER_AUTHORIZATION_FAILED and scram.results == []

    described = await alice.request(dcf.SPEC, dcf.DescribeConfigsRequest(resources=[
        dcf.DescribeConfigsRequestResource(resource_type=2, resource_name="orders", configuration_keys=None),
        dcf.DescribeConfigsRequestResource(resource_type=4, resource_name="0", configuration_keys=None),
    ]))
    assert [(r.error_code, r.configs) for r in described.results] == [
        (TOPIC_AUTHORIZATION_FAILED, []), (CLUSTER_AUTHORIZATION_FAILED, []),
    ]
    altered = await alice.request(iac.SPEC, iac.IncrementalAlterConfigsRequest(resources=[
        iac.IncrementalAlterConfigsRequestResource(resource_type=2, resource_name="orders", configs=[
            iac.IncrementalAlterConfigsRequestConfig(name="retention.ms", config_operation=0, value="1000")])]))
    assert altered.responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    legacy = await alice.request(ac.SPEC, ac.AlterConfigsRequest(resources=[ac.AlterConfigsRequestResource(
        resource_type=4, resource_name="0", configs=[])]))
    assert legacy.responses[0].error_code == CLUSTER_AUTHORIZATION_FAILED

    # AlterConfigs implies DescribeConfigs; Create on the cluster creates any topic.
    await secured.grant(
        allow("User:alice", Operation.ALTER_CONFIGS, T, "orders"),
        allow("User:alice", Operation.CREATE, C, "kafka-cluster"),
    )
    altered = await alice.request(iac.SPEC, iac.IncrementalAlterConfigsRequest(resources=[
        iac.IncrementalAlterConfigsRequestResource(resource_type=2, resource_name="orders", configs=[
            iac.IncrementalAlterConfigsRequestConfig(name="retention.ms", config_operation=0, value="1000")])]))
    assert altered.responses[0].error_code == 0
    described = await alice.request(dcf.SPEC, dcf.DescribeConfigsRequest(resources=[
        dcf.DescribeConfigsRequestResource(resource_type=2, resource_name="orders", configuration_keys=["retention.ms"])]))
    assert [c.value for c in described.results[0].configs] == ["1000"]
    created = await alice.request(ct.SPEC, ct.CreateTopicsRequest(topics=[ct.CreateTopicsRequestTopic(
        name="new", num_partitions=1, replication_factor=1)], timeout_ms=1000))
    # Created, but its configs stay unsaid without DescribeConfigs on it.
    assert created.topics[0].error_code == 0
    assert created.topics[0].configs is None and created.topics[0].topic_config_error_code == TOPIC_AUTHORIZATION_FAILED


async def test_topic_ids_reveal_nothing_without_describe(secured: Secured) -> None:
    await secured.topic("orders")
    assert secured.broker.state is not None
    topic_id = secured.broker.state.topics.topics["orders"].topic_id
    admin = await secured.conn("admin")
    commit = orders_commit()
    assert (await admin.request(oc.SPEC, commit, version=NAMED_COMMIT)).topics[0].partitions[0].error_code == 0
    alice = await secured.conn("alice")
    by_id = await alice.request(md.SPEC, md.MetadataRequest(topics=[md.MetadataRequestTopic(topic_id=topic_id, name=None)]))
    assert (by_id.topics[0].error_code, by_id.topics[0].name) == (TOPIC_AUTHORIZATION_FAILED, None)
    deleted = await alice.request(dt.SPEC, dt.DeleteTopicsRequest(
        topics=[dt.DeleteTopicsRequestTopic(name=None, topic_id=topic_id)], timeout_ms=1000), version=6)
    assert (deleted.responses[0].error_code, deleted.responses[0].name) == (TOPIC_AUTHORIZATION_FAILED, None)
    request = produce_request("orders")
    request.topic_data[0].topic_id = topic_id
    produced = await alice.request(pr.SPEC, request, version=13)
    assert produced.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED
    fetch = fetch_request("orders")
    fetch.topics[0].topic_id = topic_id
    fetched = await alice.request(fe.SPEC, fetch, version=13)
    assert fetched.responses[0].partitions[0].error_code == TOPIC_AUTHORIZATION_FAILED
    # OffsetFetch v10 (topics by id) with Read on the group only: the partition is refused.
    await secured.grant(allow("User:alice", Operation.READ, G, "g1"))
    offsets = await alice.request(of.SPEC, of.OffsetFetchRequest(groups=[of.OffsetFetchRequestGroup(
        group_id="g1", topics=[of.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0])])]), version=10)
    part = offsets.groups[0].topics[0].partitions[0]
    assert (part.error_code, part.committed_offset, part.metadata) == (TOPIC_AUTHORIZATION_FAILED, -1, None)
    assert secured.broker.state.topics.get("orders") is not None


async def test_acls_survive_a_restart_on_postgres(postgres_url: str) -> None:
    # A postgres broker is one of a cluster: it needs credentials towards its peers (super user admin).
    settings: dict[str, Any] = {
        **SECURED, "storage": "postgres", "database_url": postgres_url,
        "inter_broker_sasl_username": "admin", "inter_broker_sasl_password": "pw",
    }  # fmt: skip
    binding = allow("User:alice", Operation.WRITE, T, "pay", PatternType.PREFIXED)
    async with (
        Broker(port=0, **settings) as broker,
        Admin(broker.bootstrap_for("SASL_PLAINTEXT"), **vars(sasl("admin"))) as admin,
    ):
        await admin.create_acls([binding])
    async with (
        Broker(port=0, **settings) as broker,
        Admin(broker.bootstrap_for("SASL_PLAINTEXT"), **vars(sasl("admin"))) as admin,
    ):
        assert await admin.describe_acls() == [binding]


async def test_authorized_operations_are_what_the_principal_may_do(secured: Secured) -> None:
    await secured.topic("orders")
    await secured.grant(
        allow("User:alice", Operation.WRITE, T, "orders"),
        allow("User:alice", Operation.DESCRIBE_CONFIGS, T, "orders"),
        allow("User:alice", Operation.IDEMPOTENT_WRITE, C, "kafka-cluster"),
        allow("User:alice", Operation.DESCRIBE, C, "kafka-cluster"),
        allow("User:alice", Operation.READ, G, "g1"),
    )
    alice = await secured.conn("alice")
    bits = lambda *ops: sum(1 << int(op) for op in ops)  # noqa: E731
    meta = await alice.request(md.SPEC, md.MetadataRequest(
        topics=[md.MetadataRequestTopic(name="orders")], include_topic_authorized_operations=True,
        include_cluster_authorized_operations=True), version=10)
    # Write implies Describe.
    assert meta.topics[0].topic_authorized_operations == bits(Operation.WRITE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS)
    assert meta.cluster_authorized_operations == bits(Operation.IDEMPOTENT_WRITE, Operation.DESCRIBE)
    cluster = await alice.request(dc.SPEC, dc.DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert cluster.cluster_authorized_operations == bits(Operation.IDEMPOTENT_WRITE, Operation.DESCRIBE)
    # (v5: a group nobody joined is described as Dead, without an error.)
    groups = await alice.request(
        dgr.SPEC, dgr.DescribeGroupsRequest(groups=["g1"], include_authorized_operations=True), version=5
    )
    assert groups.groups[0].authorized_operations == bits(Operation.READ, Operation.DESCRIBE)
    # Without asking: "not requested".
    plain = await alice.request(md.SPEC, md.MetadataRequest(topics=[md.MetadataRequestTopic(name="orders")]), version=10)
    assert plain.topics[0].topic_authorized_operations == -(2**31)
