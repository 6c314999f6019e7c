"""What a handler is given for one request: the broker's state, the group and
transaction coordinator adapters, the request header and version, the peer's address,
the listener the request came through and the principal it is authenticated as (what
an authorizer checks)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.api import RequestHeader
from .connection_seq import connection_seq
from .security.acl import CLUSTER_NAME, Operation, ResourceType
from .security.session import ANONYMOUS, ConnectionSession
from .state import BrokerState

if TYPE_CHECKING:
    from ..coordinator.result import RequestContext as CoordinatorContext

    # Type-only: the coordinators load after the listener opens (Broker.start).
    from .groups import GroupCoordinatorAdapter
    from .transactions import TransactionCoordinatorAdapter

_MAX_COORDINATOR_CONTEXTS = 4096


@dataclass
class RequestContext:
    """What a handler gets with its request: the broker's state, the coordinators, the header, the connection's session."""

    state: BrokerState
    # The coordinator adapters: None only for the APIs a starting broker answers before
    # it has loaded them (Dispatcher.SERVED_WHILE_STARTING), whose handlers use neither.
    groups_or_none: GroupCoordinatorAdapter | None
    header: RequestHeader
    api_version: int
    client_host: str
    transactions_or_none: TransactionCoordinatorAdapter | None
    # None for requests made without a connection (tests): a PLAINTEXT, anonymous one.
    session: ConnectionSession | None = None
    # The connection sends FileRegion parts itself (direct_sender.py): a Fetch may answer with them.
    file_regions: bool = False
    # Decisions already taken for this request (a long-polled Fetch asks again and again).
    _decisions: dict[tuple[Operation, ResourceType, str], bool] = field(default_factory=dict, repr=False)

    @property
    def groups(self) -> GroupCoordinatorAdapter:
        assert self.groups_or_none is not None, "the group coordinator is not loaded yet"
        return self.groups_or_none

    @property
    def transactions(self) -> TransactionCoordinatorAdapter:
        assert self.transactions_or_none is not None, "the transaction coordinator is not loaded yet"
        return self.transactions_or_none

    @property
    def listener(self) -> str:
        return self.session.listener.name if self.session is not None else "PLAINTEXT"

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else ANONYMOUS

    @property
    def client_ip(self) -> str:
        """The peer's address without its port (what an ACL's host is compared with)."""
        return self.client_host.rsplit(":", 1)[0]

    def authorized(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal do ``operation`` on the resource? Always, without an
        authorizer."""
        authorizer = self.state.authorizer
        if authorizer is None:
            return True
        key = (operation, resource_type, name)
        found = self._decisions.get(key)
        if found is None:
            found = self._decisions[key] = authorizer.authorize(
                self.principal, self.client_ip, operation, resource_type, name
            )
        return found

    @property
    def authorizing(self) -> bool:
        """Whether an authorizer is configured (without one, every check passes)."""
        return self.state.authorizer is not None

    def topic_allowed(self, operation: Operation, topic: str) -> bool:
        return self.authorized(operation, ResourceType.TOPIC, topic)

    def group_allowed(self, operation: Operation, group: str) -> bool:
        return self.authorized(operation, ResourceType.GROUP, group)

    def authorized_cluster(self, operation: Operation) -> bool:
        return self.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, resource_type: ResourceType, name: str, operations: Iterable[Operation]) -> int:
        """Kafka's authorized-operations bit field: bit ``op`` set for each of ``operations``
        the principal may do on the resource (asked only when an authorizer is configured)."""
        field = 0
        for op in operations:
            if self.authorized(op, resource_type, name):
                field |= 1 << int(op)
        return field

    def authorized_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """May the principal do ``operation`` on at least one resource of the type?"""
        authorizer = self.state.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_any(self.principal, self.client_ip, operation, resource_type)

    def advertised_endpoint(self) -> tuple[str, int]:
        """Host and port this node is reached at through the request's listener."""
        found = self.state.advertised.get(self.listener)
        if found is not None:
            return found
        return self.state.advertised_host, self.state.advertised_port

    def coordinator_context(self) -> CoordinatorContext:
        """What the group coordinator sees of this request: version, client id, client host."""
        connection = connection_seq()
        key = (self.api_version, self.header.client_id, self.client_host, connection)
        cache = self.state.coordinator_contexts
        found = cache.get(key)
        if found is not None:
            return found
        from ..coordinator.result import RequestContext as CoordinatorContext  # (first miss only)

        host = self.client_host.rsplit(":", 1)[0]
        # Kafka shows client hosts as InetAddress.toString(): "/127.0.0.1".
        made = CoordinatorContext(
            api_version=self.api_version,
            client_id=self.header.client_id or "",
            client_host=f"/{host}",
            connection=connection,
        )
        if len(cache) >= _MAX_COORDINATOR_CONTEXTS:
            cache.clear()
        cache[key] = made
        return made
