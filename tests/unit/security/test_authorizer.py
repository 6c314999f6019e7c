"""The ACL authorizer (pure): Kafka's StandardAuthorizer rules, table-driven, plus
binding/filter validation, filters, and the by-resource-type check."""

from __future__ import annotations

import itertools

import pytest

from slipstream.broker.security.acl import (
    AclBinding,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    make_binding,
    make_filter,
)
from slipstream.broker.security.authorizer import Authorizer, parse_super_users

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(
    rtype: ResourceType = T, name: str = "orders", ptype: PatternType = LIT, principal: str = ALICE,
    host: str = "*", op: Operation = Op.READ, perm: Permission = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, ptype, principal, host, op, perm)


def may(auth: Authorizer, op: Operation, name: str = "orders", rtype: ResourceType = T,
        principal: str = ALICE, host: str = HOST) -> bool:
    return auth.authorize(principal, host, op, rtype, name)


# ---------------------------------------------------------------- no ACLs


def test_no_acl_denies_by_default_and_allow_everyone_opens_it() -> None:
    assert not may(Authorizer(), Op.READ)
    assert may(Authorizer(allow_everyone_if_no_acl_found=True), Op.READ)


def test_allow_everyone_only_applies_when_no_acl_names_the_resource() -> None:
    # Bob has an ACL on the topic: alice is then denied even with allow.everyone.
    auth = Authorizer(allow_everyone_if_no_acl_found=True, bindings=[acl(principal=BOB)])
    assert not may(auth, Op.READ)
    assert may(auth, Op.READ, name="other")
    assert may(auth, Op.READ, principal=BOB)


def test_super_users_may_do_anything_even_against_deny() -> None:
    auth = Authorizer(super_users=parse_super_users("User:admin; User:ops"), bindings=[acl(principal="User:*", op=Op.ALL, perm=DENY)])
    for op in (Op.READ, Op.WRITE, Op.ALTER, Op.CLUSTER_ACTION):
        assert may(auth, op, principal="User:admin")
        assert may(auth, op, principal="User:ops")
        assert not may(auth, op)
    assert parse_super_users("") == frozenset()


# ---------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("binding", "resource", "applies"),
    [
        (acl(name="orders"), "orders", True),
        (acl(name="orders"), "orders2", False),
        (acl(name="order"), "orders", False),  # a literal is not a prefix
        (acl(name="*"), "orders", True),  # the literal wildcard
        (acl(name="*"), "*", True),
        (acl(name="ord", ptype=PRE), "orders", True),
        (acl(name="orders", ptype=PRE), "orders", True),
        (acl(name="ordersX", ptype=PRE), "orders", False),
        (acl(name="x", ptype=PRE), "orders", False),
        (acl(name="*", ptype=PRE), "orders", False),  # "*" prefixed is a literal star prefix
        (acl(name="*", ptype=PRE), "*topic", True),
    ],
)
def test_pattern_matching(binding: AclBinding, resource: str, applies: bool) -> None:
    assert may(Authorizer(bindings=[binding]), Op.READ, name=resource) is applies


def test_resource_types_do_not_mix() -> None:
    auth = Authorizer(bindings=[acl(rtype=G, name="orders")])
    assert may(auth, Op.READ, rtype=G)
    assert not may(auth, Op.READ, rtype=T)
    assert not may(auth, Op.READ, rtype=X)


# ---------------------------------------------------------------- principals and hosts


@pytest.mark.parametrize(
    ("principal", "host", "allowed"),
    [
        (ALICE, "*", True),
        ("User:*", "*", True),
        (BOB, "*", False),
        ("User:Alice", "*", False),  # case matters
        (ALICE, HOST, True),
        (ALICE, "10.0.0.2", False),
        ("User:*", HOST, True),
    ],
)
def test_principal_and_host_matching(principal: str, host: str, allowed: bool) -> None:
    auth = Authorizer(bindings=[acl(principal=principal, host=host)])
    assert may(auth, Op.READ) is allowed


# ---------------------------------------------------------------- operations


ALL_OPS = [
    Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION,
    Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
]
IMPLIED = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS},
}


@pytest.mark.parametrize(("granted", "asked"), list(itertools.product([*ALL_OPS, Op.ALL], ALL_OPS)))
def test_allow_grants_its_operation_all_and_the_implied_ones(granted: Operation, asked: Operation) -> None:
    auth = Authorizer(bindings=[acl(op=granted)])
    expected = granted in (Op.ALL, asked) or granted in IMPLIED.get(asked, set())
    assert may(auth, asked) is expected


@pytest.mark.parametrize(("denied", "asked"), list(itertools.product([*ALL_OPS, Op.ALL], ALL_OPS)))
def test_deny_wins_for_its_operation_and_all_but_implies_nothing(denied: Operation, asked: Operation) -> None:
    auth = Authorizer(bindings=[acl(op=Op.ALL), acl(op=denied, perm=DENY)])
    assert may(auth, asked) is not (denied in (Op.ALL, asked))


def test_deny_anywhere_wins_over_allow_elsewhere() -> None:
    # Allowed literally, denied by prefix, by wildcard, by User:* or for the host: each denies.
    for deny in (
        acl(name="ord", ptype=PRE, perm=DENY),
        acl(name="*", perm=DENY),
        acl(principal="User:*", perm=DENY),
        acl(host=HOST, perm=DENY),
    ):
        assert not may(Authorizer(bindings=[acl(), deny]), Op.READ), deny
    # A deny for another host or principal does not apply.
    assert may(Authorizer(bindings=[acl(), acl(host="10.9.9.9", perm=DENY)]), Op.READ)
    assert may(Authorizer(bindings=[acl(), acl(principal=BOB, perm=DENY)]), Op.READ)


def test_acls_on_the_resource_for_others_deny_by_default() -> None:
    auth = Authorizer(allow_everyone_if_no_acl_found=True, bindings=[acl(name="ord", ptype=PRE, principal=BOB)])
    assert not may(auth, Op.READ, name="orders")  # an ACL applies to it (for bob): not "no ACL"
    assert may(auth, Op.READ, name="payments")


# ---------------------------------------------------------------- the ACL set


def test_add_remove_and_matching_with_filters() -> None:
    auth = Authorizer()
    a, b, c = acl(), acl(name="ord", ptype=PRE, op=Op.WRITE), acl(rtype=G, name="g1", principal=BOB)
    assert auth.add(a) and auth.add(b) and auth.add(c)
    assert not auth.add(a)
    assert auth.bindings() == sorted([a, b, c])
    anything = make_filter(1, None, 1, None, None, 1, 1)
    assert auth.matching(anything) == sorted([a, b, c])
    assert auth.matching(make_filter(2, None, 1, None, None, 1, 1)) == sorted([a, b])
    assert auth.matching(make_filter(2, "orders", 3, None, None, 1, 1)) == [a]  # LITERAL filter: exact
    assert auth.matching(make_filter(2, "orders", 2, None, None, 1, 1)) == sorted([a, b])  # MATCH
    assert auth.matching(make_filter(2, "ord", 4, None, None, 1, 1)) == [b]
    assert auth.matching(make_filter(1, None, 1, BOB, None, 1, 1)) == [c]
    assert auth.matching(make_filter(1, None, 1, None, None, int(Op.WRITE), 1)) == [b]
    assert auth.matching(make_filter(1, None, 1, None, "*", 1, int(DENY))) == []
    assert auth.remove(b) and not auth.remove(b)
    assert not may(auth, Op.WRITE, name="orders")
    assert auth.remove(a)
    assert not may(auth, Op.READ)


def test_prefix_index_survives_removal_of_one_of_two_same_length_prefixes() -> None:
    auth = Authorizer(bindings=[acl(name="ab", ptype=PRE), acl(name="cd", ptype=PRE)])
    auth.remove(acl(name="ab", ptype=PRE))
    assert may(auth, Op.READ, name="cde")
    assert not may(auth, Op.READ, name="abc")


# ---------------------------------------------------------------- by resource type


def test_authorize_any_finds_an_allowed_topic_unless_denied_over_it() -> None:
    assert not Authorizer().authorize_any(ALICE, HOST, Op.WRITE, T)
    assert Authorizer(allow_everyone_if_no_acl_found=True).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert Authorizer(bindings=[acl(op=Op.WRITE)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert Authorizer(bindings=[acl(op=Op.ALL)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert not Authorizer(bindings=[acl(op=Op.READ)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert not Authorizer(bindings=[acl(op=Op.WRITE, principal=BOB)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert not Authorizer(bindings=[acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    # A prefix deny covering the allowed literal, or a wildcard deny, denies.
    assert not Authorizer(
        bindings=[acl(op=Op.WRITE), acl(name="or", ptype=PRE, op=Op.WRITE, perm=DENY)]
    ).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert not Authorizer(
        bindings=[acl(op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=DENY)]
    ).authorize_any(ALICE, HOST, Op.WRITE, T)
    # A deny on another topic leaves the allowed one.
    assert Authorizer(
        bindings=[acl(op=Op.WRITE), acl(name="pay", ptype=PRE, op=Op.WRITE, perm=DENY)]
    ).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert Authorizer(bindings=[acl(name="*", op=Op.WRITE)]).authorize_any(ALICE, HOST, Op.WRITE, T)
    assert Authorizer(super_users={ALICE}).authorize_any(ALICE, HOST, Op.WRITE, T)


# ---------------------------------------------------------------- validation


def test_make_binding_accepts_what_kafka_accepts() -> None:
    b = make_binding(2, "orders", 4, "User:alice", "*", 3, 3)
    assert b == AclBinding(T, "orders", PRE, "User:alice", "*", Op.READ, ALLOW)
    assert AclBinding.from_json(b.to_json()) == b
    assert make_binding(4, "kafka-cluster", 3, "User:bob", "1.2.3.4", 7, 2).resource_type == C


@pytest.mark.parametrize(
    "args",
    [
        (1, "orders", 3, ALICE, "*", 3, 3),  # ANY resource type
        (0, "orders", 3, ALICE, "*", 3, 3),  # UNKNOWN resource type
        (6, "tok", 3, ALICE, "*", 3, 3),  # delegation tokens are not served
        (2, "orders", 2, ALICE, "*", 3, 3),  # MATCH is for filters
        (2, "orders", 1, ALICE, "*", 3, 3),  # ANY is for filters
        (2, "orders", 3, ALICE, "*", 1, 3),  # operation ANY
        (2, "orders", 3, ALICE, "*", 0, 3),  # operation UNKNOWN
        (2, "orders", 3, ALICE, "*", 3, 1),  # permission ANY
        (2, "orders", 3, "alice", "*", 3, 3),  # principal without a type
        (2, "orders", 3, "User:", "*", 3, 3),
        (2, "", 3, ALICE, "*", 3, 3),
        (2, "orders", 3, ALICE, "", 3, 3),
        (4, "my-cluster", 3, ALICE, "*", 7, 3),  # the cluster is named kafka-cluster
        (4, "kafka-", 4, ALICE, "*", 7, 3),
        (2, "orders", 3, ALICE, "*", 99, 3),  # no such operation code
        (2, "orders", 9, ALICE, "*", 3, 3),
    ],
)
def test_make_binding_refuses_what_kafka_refuses(args: tuple[int, str, int, str, str, int, int]) -> None:
    with pytest.raises(InvalidAcl):
        make_binding(*args)


def test_make_filter_refuses_unknown_codes() -> None:
    for args in ((0, None, 1, None, None, 1, 1), (1, None, 0, None, None, 1, 1), (1, None, 1, None, None, 0, 1),
                 (1, None, 1, None, None, 1, 0), (1, None, 1, "bad", None, 1, 1), (1, None, 7, None, None, 1, 1)):
        with pytest.raises(InvalidAcl):
            make_filter(*args)
