"""What a handler is given for one request: the broker's state, the group and
transaction coordinator adapters, the request header and version, the peer's address,
the listener the request came through and the principal it is authenticated as (what
an authorizer checks)."""

from __future__ import annotations

from dataclasses import dataclass

from ..coordinator.result import RequestContext as CoordinatorContext
from ..protocol.api import RequestHeader
from .groups import GroupCoordinatorAdapter
from .security.session import ANONYMOUS, ConnectionSession
from .state import BrokerState
from .transactions import TransactionCoordinatorAdapter

_MAX_COORDINATOR_CONTEXTS = 4096


@dataclass
class RequestContext:
    state: BrokerState
    groups: GroupCoordinatorAdapter
    header: RequestHeader
    api_version: int
    client_host: str
    transactions: TransactionCoordinatorAdapter
    # None for requests made without a connection (tests): a PLAINTEXT, anonymous one.
    session: ConnectionSession | None = None

    @property
    def listener(self) -> str:
        return self.session.listener.name if self.session is not None else "PLAINTEXT"

    @property
    def principal(self) -> str:
        return self.session.principal if self.session is not None else ANONYMOUS

    def advertised_endpoint(self) -> tuple[str, int]:
        """Host and port this node is reached at through the request's listener."""
        found = self.state.advertised.get(self.listener)
        if found is not None:
            return found
        return self.state.advertised_host, self.state.advertised_port

    def coordinator_context(self) -> CoordinatorContext:
        """What the group coordinator sees of this request: version, client id, client host."""
        key = (self.api_version, self.header.client_id, self.client_host)
        cache = self.state.coordinator_contexts
        found = cache.get(key)
        if found is not None:
            return found
        host = self.client_host.rsplit(":", 1)[0]
        # Kafka shows client hosts as InetAddress.toString(): "/127.0.0.1".
        made = CoordinatorContext(
            api_version=self.api_version, client_id=self.header.client_id or "", client_host=f"/{host}"
        )
        if len(cache) >= _MAX_COORDINATOR_CONTEXTS:
            cache.clear()
        cache[key] = made
        return made
