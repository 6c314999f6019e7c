"""A simulated network between members and the broker: per-connection FIFO, random delays, drops.

Kafka answers the requests of one connection in order, and TCP delivers in order,
so each direction of a connection is a FIFO: a message is delivered no earlier
than the one sent before it. Delays come from the connection's own random stream
(seeded from the history seed and the connection's owner), so dropping an
unrelated action while shrinking does not reshuffle every delay.

Closing a connection (a dropped link, a request timeout, a broker restart) fails
every request the client still waits for. Requests already on their way to the
broker are, up to a random point, still read and processed by it (the broker read
them before it noticed); their answers are lost. That is how "the log accepted the
record but the member never heard back" happens.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .events import Event, EventQueue

OnResponse = Callable[[Any], None]
OnFailure = Callable[[str], None]


def message_delay_ms(rng: random.Random) -> int:
    """Mostly a few ms, sometimes tens, rarely up to a second (a long tail, like a real LAN)."""
    r = rng.random()
    if r < 0.9:
        return 1 + rng.randrange(5)
    if r < 0.99:
        return 10 + rng.randrange(90)
    return 100 + rng.randrange(900)


@dataclass(slots=True)
class InFlight:
    corr: int
    api: str
    on_response: OnResponse
    on_failure: OnFailure
    timeout: Event | None = None


@dataclass(eq=False)
class Connection:
    id: int
    owner: str
    broker_incarnation: int
    rng: random.Random
    open: bool = True
    c2b_last_ms: int = 0
    b2c_last_ms: int = 0
    # Requests sent and not yet answered, in send order (dicts keep insertion order).
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    # Requests on their way to the broker: corr -> delivery event.
    in_transit: dict[int, Event] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"conn#{self.id}({self.owner})"


class BrokerEnd(Protocol):
    """The broker's end of every connection, as the network sees it (``broker.SimBroker``)."""

    up: bool
    incarnation: int  # bumped by every restart: connections of an older one are dead

    def receive(self, conn: Connection, corr: int, api: str, version: int, request: Any) -> None: ...

    def connection_closed(self, conn: Connection) -> None: ...


class Network:
    def __init__(self, queue: EventQueue, seed: int) -> None:
        self.queue = queue
        self.seed = seed
        self.broker: BrokerEnd | None = None  # attached by the broker
        self._ids = itertools.count(1)
        self._corr = itertools.count(1)
        self.connections: dict[int, Connection] = {}

    def rng_for(self, owner: str) -> random.Random:
        # A string seed is hashed with SHA-512 by random.Random: stable across processes.
        return random.Random(f"{self.seed}/net/{owner}")

    # ------------------------------------------------------------ connecting

    def connect(
        self, owner: str, rng: random.Random, on_connected: Callable[[Connection], None], on_failed: OnFailure
    ) -> None:
        """Open a connection to the coordinator after a connect delay (fails while it is down)."""
        delay = message_delay_ms(rng) * 2

        def done() -> None:
            broker = self.broker
            if broker is None or not broker.up:
                on_failed("coordinator unavailable")
                return
            conn = Connection(next(self._ids), owner, broker.incarnation, rng)
            conn.c2b_last_ms = conn.b2c_last_ms = self.queue.now_ms
            self.connections[conn.id] = conn
            on_connected(conn)

        self.queue.after(delay, ("connect ", owner), done)

    # ------------------------------------------------------------ requests and responses

    def request(
        self,
        conn: Connection,
        api: str,
        version: int,
        request: Any,
        on_response: OnResponse,
        on_failure: OnFailure,
        timeout_ms: int,
    ) -> None:
        if not conn.open:
            self.queue.after(0, ("fail ", api, " ", conn), lambda: on_failure("connection closed"))
            return
        corr = next(self._corr)
        flight = InFlight(corr, api, on_response, on_failure)
        conn.in_flight[corr] = flight
        at = max(conn.c2b_last_ms, self.queue.now_ms + message_delay_ms(conn.rng))
        conn.c2b_last_ms = at

        def deliver() -> None:
            conn.in_transit.pop(corr, None)
            broker = self.broker
            if broker is not None:
                broker.receive(conn, corr, api, version, request)

        conn.in_transit[corr] = self.queue.at(at, (api, " -> broker (", conn, ")"), deliver)
        flight.timeout = self.queue.after(
            timeout_ms, ("timeout ", api, " ", conn), lambda: self.close(conn, f"{api} timed out")
        )

    def respond(self, conn: Connection, corr: int, response: Any) -> None:
        """The broker answers; lost if the connection is closed before it arrives."""
        if not conn.open:
            return
        at = max(conn.b2c_last_ms, self.queue.now_ms + message_delay_ms(conn.rng))
        conn.b2c_last_ms = at

        def deliver() -> None:
            if not conn.open:
                return
            flight = conn.in_flight.pop(corr, None)
            if flight is None:
                return
            if flight.timeout is not None:
                flight.timeout.cancel()
            flight.on_response(response)

        self.queue.at(at, ("response ", corr, " -> ", conn.owner), deliver)

    # ------------------------------------------------------------ failures

    def close(self, conn: Connection, reason: str, *, broker_side: bool = False) -> None:
        """Close ``conn``: the client's waiting requests fail; a random prefix of those in
        transit still reaches the broker (unless the broker itself went away)."""
        if not conn.open:
            return
        conn.open = False
        self.connections.pop(conn.id, None)
        transit = list(conn.in_transit.values())
        keep = 0 if broker_side or not transit else conn.rng.randrange(len(transit) + 1)
        for event in transit[keep:]:
            event.cancel()
        flights = list(conn.in_flight.values())
        conn.in_flight.clear()
        for flight in flights:
            if flight.timeout is not None:
                flight.timeout.cancel()
            self.queue.after(0, ("fail ", flight.api, " ", conn, ": ", reason), functools.partial(flight.on_failure, reason))
        broker = self.broker
        if broker is not None:
            broker.connection_closed(conn)

    def close_all(self, reason: str) -> None:
        for conn in list(self.connections.values()):
            self.close(conn, reason, broker_side=True)
