"""``slipstream acls``: add, list and remove ACLs on a running broker (like kafka-acls.sh).

::

    slipstream acls add --allow-principal User:alice --operation Read --topic orders
    slipstream acls add --allow-principal User:alice --consumer --topic orders --group billing
    slipstream acls list --topic orders
    slipstream acls remove --allow-principal User:alice --operation Read --topic orders

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable) and
``--cluster``; ``--resource-pattern-type`` literal (default) or prefixed (list and
remove also take any and match). ``--producer`` stands for Write, Describe and Create on
the topics (and Write/Describe on the transactional ids), ``--consumer`` for Read and
Describe on the topics and Read on the groups, as in kafka-acls.sh. Talks to the broker
through CreateAcls/DescribeAcls/DeleteAcls (``--command-config`` for a secured listener).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..client.acl_admin import AclBindingFilter, create_acls, delete_acls, describe_acls
from ..client.cluster import Cluster
from ..protocol.acl_types import (
    CLUSTER_NAME,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from .client_commands import _bootstrap_arg, _run

if TYPE_CHECKING:
    from .client_commands import Sub

OPERATIONS = {op.name.replace("_", "").lower(): op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)}
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "any": PatternType.ANY,
                 "match": PatternType.MATCH}


def add_commands(sub: Sub) -> None:
    acls = sub.add_parser(
        "acls",
        help="add, list and remove ACLs (needs a broker started with authorizer=acl)",
        description="ACLs of a running broker, like kafka-acls.sh.",
    )
    asub = acls.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    p = asub.add_parser("add", help="add ALLOW (--allow-principal) or DENY (--deny-principal) ACLs")
    _acl_args(p, listing=False)
    p.set_defaults(func=_run(_add))
    p = asub.add_parser("list", help="list ACLs (all, or those of the named resources)")
    _acl_args(p, listing=True)
    p.set_defaults(func=_run(_list))
    p = asub.add_parser("remove", help="remove the ACLs matching the given principals, operations and resources")
    _acl_args(p, listing=True)
    p.set_defaults(func=_run(_remove))


def _acl_args(p: argparse.ArgumentParser, *, listing: bool) -> None:
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="e.g. User:alice or User:* (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL", help="(repeatable)")
    if listing:
        p.add_argument("--principal", action="append", default=[], help="any permission, this principal (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default * (any host)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default * (any host)")
    p.add_argument("--operation", action="append", default=[], type=_operation,
                   help=f"one of {', '.join(_op_label(o) for o in OPERATIONS.values())} (repeatable)")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    choices = sorted(PATTERN_TYPES) if listing else ["literal", "prefixed"]
    p.add_argument("--resource-pattern-type", choices=choices, default="any" if listing else "literal")
    p.add_argument("--producer", action="store_true", help="Write, Describe, Create on topics (+ transactional ids)")
    p.add_argument("--consumer", action="store_true", help="Read, Describe on topics, Read on groups")
    _bootstrap_arg(p)


def _op_label(op: Operation) -> str:
    return "".join(part.capitalize() for part in op.name.split("_"))


def _operation(text: str) -> Operation:
    found = OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if found is None:
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}")
    return found


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations_for(args: argparse.Namespace, rtype: ResourceType) -> list[Operation]:
    ops = list(args.operation)
    if args.producer:
        if rtype == ResourceType.TOPIC:
            ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
        elif rtype == ResourceType.TRANSACTIONAL_ID:
            ops += [Operation.WRITE, Operation.DESCRIBE]
    if args.consumer:
        if rtype == ResourceType.TOPIC:
            ops += [Operation.READ, Operation.DESCRIBE]
        elif rtype == ResourceType.GROUP:
            ops += [Operation.READ]
    return list(dict.fromkeys(ops))


def _entries(args: argparse.Namespace) -> list[tuple[str, str, Permission]]:
    """(principal, host, permission) for each principal given, with each host given."""
    entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host or ["*"], Permission.ALLOW),
        (args.deny_principal, args.deny_host or ["*"], Permission.DENY),
    ):
        entries += [(principal, host, permission) for principal in principals for host in hosts]
    return entries


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    resources = _resources(args)
    if not resources:
        raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
    entries = _entries(args)
    if not entries:
        raise ValueError("name a principal: --allow-principal or --deny-principal")
    pattern = PATTERN_TYPES[args.resource_pattern_type]
    bindings = []
    for rtype, name in resources:
        ops = _operations_for(args, rtype)
        if not ops and not (args.producer or args.consumer):
            raise ValueError("name an operation (--operation) or use --producer / --consumer")
        for principal, host, permission in entries:
            bindings += [AclBinding(rtype, name, pattern, principal, host, op, permission) for op in ops]
    return bindings


def filters_of(args: argparse.Namespace) -> list[AclBindingFilter]:
    """Filters for list/remove: each named resource (or any), each principal (or any), each
    operation (or any)."""
    pattern = PATTERN_TYPES[args.resource_pattern_type]
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args)) or [(ResourceType.ANY, None)]
    principals: list[tuple[str | None, str | None, Permission]] = list(_entries(args))
    principals += [(p, None, Permission.ANY) for p in args.principal]
    if not principals:
        principals = [(None, None, Permission.ANY)]
    filters = []
    for rtype, name in resources:
        ops = _operations_for(args, rtype) if rtype != ResourceType.ANY else list(args.operation)
        for principal, host, permission in principals:
            for op in ops or [Operation.ANY]:
                filters.append(AclBindingFilter(
                    resource_type=rtype, resource_name=name, pattern_type=pattern, principal=principal,
                    host=None if host in (None, "*") and permission == Permission.ANY else host,
                    operation=op, permission=permission,
                ))
    return filters


async def _add(args: argparse.Namespace, cluster: Cluster) -> int:
    bindings = bindings_to_add(args)
    await create_acls(cluster, bindings)
    print(f"added {len(bindings)} ACL{'s' if len(bindings) != 1 else ''}:")
    print_acls(bindings)
    return 0


async def _list(args: argparse.Namespace, cluster: Cluster) -> int:
    found: dict[AclBinding, None] = {}
    for f in filters_of(args):
        for binding in await describe_acls(cluster, f):
            found[binding] = None
    print_acls(sorted(found))
    return 0


async def _remove(args: argparse.Namespace, cluster: Cluster) -> int:
    if not (_resources(args) or _entries(args) or args.principal):
        raise ValueError("name what to remove (a resource and/or a principal); refusing to remove every ACL")
    removed = await delete_acls(cluster, filters_of(args))
    print(f"removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
    print_acls(removed)
    return 0


def print_acls(bindings: list[AclBinding]) -> None:
    print(f"{'RESOURCE':<32} {'PATTERN':<9} {'PRINCIPAL':<20} {'HOST':<15} {'OPERATION':<16} PERMISSION")
    for b in bindings:
        resource = f"{_op_label_type(b.resource_type)}:{b.resource_name}"
        print(
            f"{resource:<32} {b.pattern_type.name:<9} {b.principal:<20} {b.host:<15} "
            f"{_op_label(b.operation):<16} {b.permission.name}"
        )


def _op_label_type(rtype: ResourceType) -> str:
    return "".join(part.capitalize() for part in rtype.name.split("_"))
