"""ACL and SCRAM changes made through two brokers of a cluster (one PostgreSQL database)
before either has followed the other's: both survive, in the database and in memory."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.broker.handlers import alter_user_scram_credentials, create_acls, delete_acls
from slipstream.broker.security.acl import Operation, PatternType, Permission, ResourceType
from slipstream.broker.security.acl_store import AclStore
from slipstream.broker.security.authorizer import Authorizer
from slipstream.broker.security.credentials import CredentialStore
from slipstream.log.postgres import PostgresLogStore
from slipstream.protocol.apis.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from slipstream.protocol.apis.create_acls import CreateAclsRequest, CreateAclsRequestCreation
from slipstream.protocol.apis.delete_acls import DeleteAclsRequest, DeleteAclsRequestFilter
from slipstream.protocol.scram import SCRAM_SHA_256, SCRAM_SHA_512

pytestmark = pytest.mark.timeout(60)


class BrokerStub:
    """What the security handlers use of a broker: its state, over a shared database."""

    def __init__(self, url: str) -> None:
        self.log_store = PostgresLogStore(url)
        metadata = self.log_store.metadata()
        self.state = SimpleNamespace(
            authorizer=Authorizer(), acl_store=AclStore(metadata), credentials=CredentialStore(metadata)
        )

    def context(self) -> Any:
        return SimpleNamespace(state=self.state, authorized_cluster=lambda operation: True)


@pytest.fixture
def brokers(postgres_url: str) -> Iterator[tuple[BrokerStub, BrokerStub]]:
    a, b = BrokerStub(postgres_url), BrokerStub(postgres_url)
    yield a, b
    a.log_store.close()
    b.log_store.close()


def creation(principal: str, topic: str) -> CreateAclsRequestCreation:
    return CreateAclsRequestCreation(
        resource_type=int(ResourceType.TOPIC), resource_name=topic, resource_pattern_type=int(PatternType.LITERAL),
        principal=principal, host="*", operation=int(Operation.WRITE), permission_type=int(Permission.ALLOW),
    )


def principals(stub: BrokerStub) -> list[str]:
    return [binding.principal for binding in stub.state.authorizer.bindings()]


def upsert(name: str, mechanism: int) -> ScramCredentialUpsertion:
    scram = SCRAM_SHA_256 if mechanism == 1 else SCRAM_SHA_512
    salt = b"s" * 16
    return ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=4096, salt=salt, salted_password=scram.salted_password("pw", salt, 4096)
    )


async def test_acl_changes_through_two_brokers_both_survive(brokers: tuple[BrokerStub, BrokerStub]) -> None:
    a, b = brokers
    created = await create_acls.handle(a.context(), CreateAclsRequest(creations=[creation("User:alice", "orders")]))
    assert [r.error_code for r in created.results] == [0]
    # b has not followed a's change yet (its next heartbeat would) when it makes its own.
    created = await create_acls.handle(b.context(), CreateAclsRequest(creations=[creation("User:bob", "payments")]))
    assert [r.error_code for r in created.results] == [0]
    assert [binding.principal for binding in AclStore(b.state.acl_store.metadata).load()] == ["User:alice", "User:bob"]
    assert principals(b) == ["User:alice", "User:bob"]

    # a (still without bob's ACL in memory) deletes every Write ACL: bob's goes too.
    write_acls = DeleteAclsRequestFilter(
        resource_type_filter=int(ResourceType.ANY), resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter=None, host_filter=None, operation=int(Operation.WRITE), permission_type=int(Permission.ANY),
    )
    deleted = await delete_acls.handle(a.context(), DeleteAclsRequest(filters=[write_acls]))
    assert [r.error_code for r in deleted.filter_results] == [0]
    assert AclStore(a.state.acl_store.metadata).load() == []
    assert principals(a) == []


async def test_scram_changes_through_two_brokers_both_survive(brokers: tuple[BrokerStub, BrokerStub]) -> None:
    a, b = brokers
    for stub, request in [
        (a, AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert("alice", 1), upsert("carol", 2)])),
        (b, AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert("bob", 2)])),
    ]:
        answer = await alter_user_scram_credentials.handle(stub.context(), request)
        assert [r.error_code for r in answer.results] == [0] * len(request.upsertions)
    # a deletes one of its own users; bob, added through b, stays.
    answer = await alter_user_scram_credentials.handle(
        a.context(), AlterUserScramCredentialsRequest(deletions=[ScramCredentialDeletion(name="carol", mechanism=2)], upsertions=[])
    )
    assert [r.error_code for r in answer.results] == [0]
    stored = CredentialStore(a.state.credentials.metadata)
    stored.load()
    assert stored.users() == ["alice", "bob"]
    assert a.state.credentials.users() == ["alice", "bob"]
    assert b.state.credentials.users() == ["alice", "bob", "carol"]  # until b follows a's last change


async def test_deleting_through_a_broker_that_had_not_seen_the_acl_lists_it(
    brokers: tuple[BrokerStub, BrokerStub],
) -> None:
    a, b = brokers
    created = await create_acls.handle(a.context(), CreateAclsRequest(creations=[creation("User:alice", "orders")]))
    assert [r.error_code for r in created.results] == [0]
    assert principals(b) == []  # b has not followed a's change yet
    alice_only = DeleteAclsRequestFilter(
        resource_type_filter=int(ResourceType.ANY), resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter="User:alice", host_filter=None, operation=int(Operation.ANY), permission_type=int(Permission.ANY),
    )
    write_acls = DeleteAclsRequestFilter(
        resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter=None, host_filter=None, operation=int(Operation.WRITE), permission_type=int(Permission.ANY),
    )
    deleted = await delete_acls.handle(b.context(), DeleteAclsRequest(filters=[alice_only, write_acls]))
    first, second = deleted.filter_results
    assert (first.error_code, second.error_code) == (0, 0)
    # Listed once, under the first filter that matched it, as an ACL b held would be.
    assert [(m.principal, m.resource_name, m.operation) for m in first.matching_acls] == [
        ("User:alice", "orders", int(Operation.WRITE))
    ]
    assert second.matching_acls == []
    assert AclStore(b.state.acl_store.metadata).load() == []


async def test_scram_bootstrap_adds_only_missing_users_to_the_stored_document(
    brokers: tuple[BrokerStub, BrokerStub],
) -> None:
    a, b = brokers
    a.state.credentials.load()  # a starts and reads the (empty) document...
    answer = await alter_user_scram_credentials.handle(
        b.context(), AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsert("bob", 1), upsert("admin", 1)])
    )
    assert [r.error_code for r in answer.results] == [0, 0]
    bobs = b.state.credentials.get("bob", "SCRAM-SHA-256")
    admins = b.state.credentials.get("admin", "SCRAM-SHA-256")
    # ...then bootstraps its users after b's change: bob stays, admin (made through b in
    # the meantime) keeps b's credential, carol is added.
    a.state.credentials.bootstrap("admin:other-secret,carol:carol-secret", ["SCRAM-SHA-256"])
    stored = CredentialStore(a.state.credentials.metadata)
    stored.load()
    assert stored.users() == ["admin", "bob", "carol"]
    assert stored.get("bob", "SCRAM-SHA-256") == bobs
    assert stored.get("admin", "SCRAM-SHA-256") == admins
    assert a.state.credentials.users() == ["admin", "bob", "carol"]
    assert a.state.credentials.get("admin", "SCRAM-SHA-256") == admins
