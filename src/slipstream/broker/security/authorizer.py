"""The ACL authorizer, with Kafka's StandardAuthorizer semantics (pure: no I/O).

For an action (principal, client host, operation, resource type and name):

- a super user may do anything;
- the ACLs that apply to the resource are the LITERAL ones naming it, the LITERAL "*"
  of its type, and the PREFIXED ones whose name starts its name;
- of those, the ones whose principal is the caller's or "User:*" and whose host is "*"
  or the caller's address decide: a DENY for the operation (or All) wins; else an ALLOW
  for the operation (or All, or one implying it: Read, Write, Delete and Alter imply
  Describe, AlterConfigs implies DescribeConfigs; implication never applies to DENY)
  allows;
- when no ACL applies to the resource at all (for anyone), ``allow.everyone.if.no.acl.found``
  decides; when some apply but none to the caller, the action is denied.

``authorize_any`` is Kafka's ``authorizeByResourceType``: may the caller do the operation
on at least one resource of the type (an ALLOW pattern not covered by a DENY)?
"""

from __future__ import annotations

from collections.abc import Iterable

from .acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

_IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


def parse_super_users(spec: str) -> frozenset[str]:
    """``super.users``: principals separated by ";" (Kafka's form), e.g. "User:admin;User:ops"."""
    return frozenset(p.strip() for p in spec.split(";") if p.strip())


def _grants(binding: AclBinding, operation: Operation) -> bool:
    """Whether the binding's operation covers the requested one (for its permission)."""
    if binding.operation == Operation.ALL or binding.operation == operation:
        return True
    if binding.permission != Permission.ALLOW:
        return False
    if operation == Operation.DESCRIBE:
        return binding.operation in _IMPLIES_DESCRIBE
    if operation == Operation.DESCRIBE_CONFIGS:
        return binding.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


class Authorizer:
    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        bindings: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._bindings: set[AclBinding] = set()
        # (resource type, pattern type, name) -> bindings: an action looks at a few keys.
        self._by_pattern: dict[tuple[ResourceType, PatternType, str], set[AclBinding]] = {}
        # Prefix lengths in use per resource type, so PREFIXED lookups try only those.
        self._prefix_lengths: dict[ResourceType, dict[int, int]] = {}
        for binding in bindings:
            self.add(binding)

    # ------------------------------------------------------------------ the ACL set

    def bindings(self) -> list[AclBinding]:
        return sorted(self._bindings)

    def add(self, binding: AclBinding) -> bool:
        """Add one binding; False when it was already there."""
        if binding in self._bindings:
            return False
        self._bindings.add(binding)
        key = (binding.resource_type, binding.pattern_type, binding.resource_name)
        self._by_pattern.setdefault(key, set()).add(binding)
        if binding.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths.setdefault(binding.resource_type, {})
            n = len(binding.resource_name)
            lengths[n] = lengths.get(n, 0) + 1
        return True

    def remove(self, binding: AclBinding) -> bool:
        if binding not in self._bindings:
            return False
        self._bindings.discard(binding)
        key = (binding.resource_type, binding.pattern_type, binding.resource_name)
        group = self._by_pattern[key]
        group.discard(binding)
        if not group:
            del self._by_pattern[key]
        if binding.pattern_type == PatternType.PREFIXED:
            lengths = self._prefix_lengths[binding.resource_type]
            n = len(binding.resource_name)
            lengths[n] -= 1
            if not lengths[n]:
                del lengths[n]
        return True

    def hold_exactly(self, bindings: Iterable[AclBinding]) -> None:
        """Hold these bindings and no other (the stored set, changed by other brokers too)."""
        wanted = set(bindings)
        for binding in self._bindings - wanted:
            self.remove(binding)
        for binding in wanted - self._bindings:
            self.add(binding)

    def matching(self, acl_filter: AclFilter) -> list[AclBinding]:
        return sorted(b for b in self._bindings if acl_filter.matches(b))

    # ------------------------------------------------------------------ decisions

    def _applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        found: list[AclBinding] = []
        found.extend(self._by_pattern.get((resource_type, PatternType.LITERAL, name), ()))
        if name != WILDCARD:
            found.extend(self._by_pattern.get((resource_type, PatternType.LITERAL, WILDCARD), ()))
        for n in self._prefix_lengths.get(resource_type, {}):
            if n <= len(name):
                found.extend(self._by_pattern.get((resource_type, PatternType.PREFIXED, name[:n]), ()))
        return found

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        applicable = self._applicable(resource_type, name)
        if not applicable:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for binding in applicable:
            if binding.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if binding.host not in (WILDCARD, host):
                continue
            if not _grants(binding, operation):
                continue
            if binding.permission == Permission.DENY:
                return False
            allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType (e.g. idempotent producers: Write on any topic)."""
        # Kafka first tries a made-up resource: super users, "*" ACLs and the no-ACL rule.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for binding in self._bindings:
            if binding.resource_type != resource_type:
                continue
            if binding.host not in (WILDCARD, host) or binding.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if binding.operation not in (operation, Operation.ALL):
                continue
            if binding.permission == Permission.DENY:
                if binding.pattern_type == PatternType.LITERAL:
                    if binding.resource_name == WILDCARD:
                        return False
                    deny_literal.add(binding.resource_name)
                else:
                    deny_prefixed.add(binding.resource_name)
            elif binding.pattern_type == PatternType.LITERAL and binding.resource_name == WILDCARD:
                return True
            else:
                allow.append((binding.pattern_type, binding.resource_name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                continue
            return True
        return False
