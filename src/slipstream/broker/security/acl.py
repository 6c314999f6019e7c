"""ACL bindings and binding filters, with Kafka's wire codes (pure: no I/O).

A binding says: this principal, from this host, is ALLOWed or DENYed this operation on
the resources this pattern names. A pattern is LITERAL (the name, or "*" for every
resource of the type) or PREFIXED (every name starting with it). Filters (DescribeAcls,
DeleteAcls) may also say ANY for a type, operation or permission, null for a name,
principal or host, and MATCH for the pattern type: every pattern that would apply to
the named resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ...protocol.acl_types import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = [
    "CLUSTER_NAME", "WILDCARD", "WILDCARD_PRINCIPAL", "AclBinding", "AclFilter", "InvalidAcl", "Operation",
    "PatternType", "Permission", "ResourceType", "make_binding", "make_filter",
]

# Resource types an ACL may name here (DelegationToken and User are not served).
SERVED_RESOURCE_TYPES = frozenset(
    {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID}
)
# Operations a binding may carry (ANY/UNKNOWN are for filters only; token ones not served).
BINDING_OPERATIONS = frozenset(Operation) - {
    Operation.UNKNOWN, Operation.ANY, Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS
}


class InvalidAcl(ValueError):
    """A binding or filter that cannot be used (answered INVALID_REQUEST)."""


def _enum(kind: type[IntEnum], code: int, what: str) -> IntEnum:
    try:
        return kind(code)
    except ValueError:
        raise InvalidAcl(f"unknown {what} code {code}") from None


def check_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"principal {principal!r} must look like Type:name (e.g. User:alice)")


def make_binding(
    resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
    operation: int, permission: int,
) -> AclBinding:
    """A binding from wire codes, checked as Kafka's controller checks a new ACL."""
    rtype = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    ptype = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = Operation(_enum(Operation, operation, "operation"))
    perm = Permission(_enum(Permission, permission, "permission type"))
    if rtype not in SERVED_RESOURCE_TYPES:
        raise InvalidAcl(f"resource type {rtype.name} cannot be used in an ACL here")
    if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"pattern type {ptype.name} cannot be used in an ACL (LITERAL or PREFIXED)")
    if op not in BINDING_OPERATIONS:
        raise InvalidAcl(f"operation {op.name} cannot be used in an ACL")
    if perm not in (Permission.ALLOW, Permission.DENY):
        raise InvalidAcl(f"permission type {perm.name} cannot be used in an ACL (ALLOW or DENY)")
    if not resource_name:
        raise InvalidAcl("resource name must not be empty")
    if rtype == ResourceType.CLUSTER and (resource_name != CLUSTER_NAME or ptype != PatternType.LITERAL):
        raise InvalidAcl(f"the only CLUSTER resource is the LITERAL {CLUSTER_NAME!r}")
    check_principal(principal)
    if not host:
        raise InvalidAcl("host must not be empty (use * for any host)")
    return AclBinding(rtype, resource_name, ptype, principal, host, op, perm)


@dataclass(frozen=True)
class AclFilter:
    """The ACL bindings a DescribeAcls or DeleteAcls request selects (``matches``)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and binding.resource_type != self.resource_type:
            return False
        if not self._pattern_matches(binding):
            return False
        if self.principal is not None and binding.principal != self.principal:
            return False
        if self.host is not None and binding.host != self.host:
            return False
        if self.operation != Operation.ANY and binding.operation != self.operation:
            return False
        return self.permission == Permission.ANY or binding.permission == self.permission

    def _pattern_matches(self, binding: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            # Every pattern that applies to the named resource (a null name: every pattern).
            if name is None:
                return True
            if binding.pattern_type == PatternType.LITERAL:
                return binding.resource_name in (name, WILDCARD)
            return name.startswith(binding.resource_name)
        if self.pattern_type != PatternType.ANY and binding.pattern_type != self.pattern_type:
            return False
        return name is None or binding.resource_name == name


def make_filter(
    resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
    host: str | None, operation: int, permission: int,
) -> AclFilter:
    """A filter from wire codes; UNKNOWN anywhere is INVALID_REQUEST, as in Kafka."""
    rtype = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    ptype = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = Operation(_enum(Operation, operation, "operation"))
    perm = Permission(_enum(Permission, permission, "permission type"))
    for value, what in ((rtype, "resource type"), (ptype, "pattern type"), (op, "operation"), (perm, "permission type")):
        if value == 0:
            raise InvalidAcl(f"a filter cannot match an UNKNOWN {what}")
    if principal is not None and principal != "":
        check_principal(principal)
    return AclFilter(rtype, resource_name, ptype, principal or None, host or None, op, perm)
