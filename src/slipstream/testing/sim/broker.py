"""The simulated broker: the real GroupCoordinator, an in-memory ``__consumer_offsets`` log,
a ManualTimer on the simulated clock, and results carried out as ``result.py`` says.

Per connection the broker works on one request at a time, in arrival order; a parked
request (JoinGroup, SyncGroup) holds the requests behind it back until it is answered,
as Slipstream's server and Kafka's do. Appends are synchronous: records are appended
and replayed (``coordinator.apply``) before the answer leaves, so a restart can fall
between an append and the answer only through the network (the answer is in flight).

A restart throws the coordinator away, closes every connection, and after a downtime
builds a fresh coordinator from the log (replay in log order, then finish loading a
little later, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile).
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...coordinator import CoordinatorResult, GroupCoordinator, ManualTimer, Pending, RequestContext
from ...protocol import group_records as gr
from ...protocol.errors import ErrorCode
from .events import Event, EventQueue
from .network import Connection, Network

LogRecord = tuple[bytes, bytes | None]
CoordinatorFactory = Callable[[ManualTimer], GroupCoordinator]
# Turns the log into what a restarted coordinator replays (identity unless a bug is planted).
ReplayFilter = Callable[[list[LogRecord]], list[LogRecord]]


@dataclass(slots=True)
class Origin:
    """A request being served (or parked), and what the observers noted when it arrived."""

    conn: Connection
    corr: int
    api: str
    request: Any
    note: object = None


@dataclass
class _ConnState:
    queue: deque[tuple[int, str, int, Any]] = field(default_factory=deque)
    busy: bool = False


class BrokerObserver:
    """What the world watches: requests as they reach the coordinator and their answers."""

    def request_started(self, api: str, request: Any) -> object:
        return None

    def answered(self, origin: Origin, response: Any, append_error: int) -> None:
        """``append_error``: the append of the records that came with this very answer failed."""

    def restarted(self, old: GroupCoordinator, new: GroupCoordinator) -> None:
        pass


class SimBroker:
    def __init__(
        self,
        queue: EventQueue,
        network: Network,
        factory: CoordinatorFactory,
        rng: random.Random,
        observer: BrokerObserver,
        replay_filter: ReplayFilter | None = None,
    ) -> None:
        self.queue = queue
        self.network = network
        self.factory = factory
        self.rng = rng
        self.observer = observer
        self.replay_filter = replay_filter
        self.log: list[LogRecord] = []
        self.incarnation = 0
        self.up = False
        self.restarts = 0
        # Bumped whenever the coordinator ran something: observers skip work otherwise.
        self.activity = 0
        # Whether the offset commit served last came over a connection its member had
        # already closed (read late by the broker; see network.py): diagnosis.py names it.
        self.last_commit_was_orphaned = False
        # (downtime, load) of a crash due right after the next append, if any.
        self.restart_after_append: tuple[int, int] | None = None
        # Until then every append fails with ``append_error`` (see ``fail_appends``).
        self.appends_fail_until = -1
        self.append_error: int = ErrorCode.KAFKA_STORAGE_ERROR
        self.failed_appends = 0
        # Offset records appended so far: committed offsets change only with one (or a restart).
        self.offset_writes = 0
        # Classic groups whose latest metadata record failed to append: the coordinator goes
        # on with the unwritten state (Kafka's classic coordinator logs the failure and does
        # the same), so until a later write succeeds a restart brings back the older one.
        self.unwritten_classic: set[str] = set()
        self._timer_event: Event | None = None
        self._conns: dict[int, _ConnState] = {}
        self._parked: dict[Pending, Origin | None] = {}
        self._contexts: dict[tuple[int, int], RequestContext] = {}
        network.broker = self
        self.timer = ManualTimer(clock=lambda: self.queue.now_ms)
        self.coordinator = factory(self.timer)
        self.coordinator.finish_loading(self.queue.now_ms)
        self.up = True

    # ------------------------------------------------------------ requests

    def receive(self, conn: Connection, corr: int, api: str, version: int, request: Any) -> None:
        if not self.up or conn.broker_incarnation != self.incarnation:
            return  # sent to a broker that has since gone away
        state = self._conns.setdefault(conn.id, _ConnState())
        state.queue.append((corr, api, version, request))
        if not state.busy:
            self._serve_next(conn)

    def _serve_next(self, conn: Connection) -> None:
        state = self._conns.get(conn.id)
        while state is not None and not state.busy and state.queue:
            corr, api, version, request = state.queue.popleft()
            self.activity += 1
            if api == "offset_commit":
                self.last_commit_was_orphaned = not conn.open
            origin = Origin(conn, corr, api, request, self.observer.request_started(api, request))
            state.busy = True
            ctx = self._contexts.get((conn.id, version))
            if ctx is None:  # immutable: one per connection and version
                ctx = RequestContext(
                    api_version=version, client_id=conn.owner, client_host="/10.0.0.1", connection=conn.id
                )
                self._contexts[(conn.id, version)] = ctx
            result = getattr(self.coordinator, api)(ctx, request, self.queue.now_ms)
            answered = self._carry_out(result, origin)
            if answered:
                state.busy = False
        self._arm_timer()

    def connection_closed(self, conn: Connection) -> None:
        # Requests the broker has not started are dropped with the connection; parked
        # ones stay parked in the coordinator (their answers will find no one).
        state = self._conns.pop(conn.id, None)
        if state is not None:
            state.queue.clear()

    # ------------------------------------------------------------ carrying out results

    def _carry_out(self, result: CoordinatorResult, origin: Origin | None) -> bool:
        """Carry ``result`` out; True when ``origin`` (if any) got its answer now."""
        if (
            origin is not None
            and result.response is not None
            and result.pending is None
            and not result.records
            and not result.completions
            and result.after_append is None
        ):
            # Most requests: a plain answer, nothing written, parked or completed.
            self._answer(origin, result.response)
            return True
        waiting = origin
        now = self.queue.now_ms
        while True:
            if result.pending is not None:
                # The first handle of the chain belongs to the request that produced it.
                self._parked[result.pending] = waiting if result.response is None else None
                if result.response is None:
                    waiting = None
            error = ErrorCode.NONE
            if result.records:
                if now < self.appends_fail_until:
                    # The log refused the write (a full or failing disk): nothing is
                    # appended, nothing replayed; after_append hears the error.
                    error = self.append_error
                    self.failed_appends += 1
                    self.unwritten_classic.update(_classic_groups(result.records))
                else:
                    for record in result.records:
                        self.log.append((record.key, record.value))
                        self.coordinator.apply(record, now)
                        if record.key[0] == 0 and record.key[1] < 2:
                            self.offset_writes += 1  # key versions 0 and 1: an offset commit
                    if self.unwritten_classic:
                        self.unwritten_classic.difference_update(_classic_groups(result.records))
                    if self.restart_after_append is not None:
                        # Crash before the answer leaves (answers take >= 1 ms on the wire).
                        crash = functools.partial(self.restart, *self.restart_after_append)
                        self.restart_after_append = None
                        self.queue.after(0, "coordinator crashes after an append", crash)
            if result.response is not None and waiting is not None:
                self._answer(waiting, result.response, error)
                waiting = None
            for completion in result.completions:
                target = self._parked.pop(completion.pending, None)
                if target is not None:
                    self._answer(target, completion.response)
                    if target is not origin:
                        self._release(target.conn)
            if result.after_append is None:
                break
            result = result.after_append(error, now)
        if origin is None:
            return True
        return waiting is None and not any(o is origin for o in self._parked.values())

    def _answer(self, origin: Origin, response: Any, append_error: int = ErrorCode.NONE) -> None:
        self.observer.answered(origin, response, append_error)
        self.network.respond(origin.conn, origin.corr, response)

    def _release(self, conn: Connection) -> None:
        state = self._conns.get(conn.id)
        if state is not None and state.busy:
            state.busy = False
            self.queue.after(0, ("serve ", conn), lambda: self._serve_next(conn))

    # ------------------------------------------------------------ timers

    def _arm_timer(self) -> None:
        deadline = self.timer.next_deadline()
        current = self._timer_event
        if deadline is None:
            return
        if current is not None and not current.cancelled and current.at_ms <= deadline:
            return
        if current is not None:
            current.cancel()
        self._timer_event = self.queue.at(deadline, "coordinator timers", self._fire_timers)

    def _fire_timers(self) -> None:
        self._timer_event = None
        if not self.up:
            return
        now = self.queue.now_ms
        self.activity += 1
        while (expired := self.timer.pop_expired(now)) is not None:
            self._carry_out(expired.callback(now), None)
        self._arm_timer()

    def fail_appends(self, duration_ms: int, error: int) -> None:
        """Make every ``__consumer_offsets`` append fail for a while (disk error, lost leadership)."""
        self.appends_fail_until = self.queue.now_ms + duration_ms
        self.append_error = error

    # ------------------------------------------------------------ restarts

    def restart(self, downtime_ms: int, load_ms: int) -> None:
        """Crash now; come back after ``downtime_ms`` and serve ``load_ms`` after that."""
        if not self.up:
            return
        self.restarts += 1
        self.up = False
        self.incarnation += 1
        if self._timer_event is not None:
            self._timer_event.cancel()
            self._timer_event = None
        self._parked.clear()
        self._conns.clear()
        self.network.close_all("coordinator restarted")
        old = self.coordinator
        self.queue.after(downtime_ms, "coordinator starts", lambda: self._start(old, load_ms))

    def _start(self, old: GroupCoordinator, load_ms: int) -> None:
        now = self.queue.now_ms
        self.timer = ManualTimer(clock=lambda: self.queue.now_ms)
        self.coordinator = self.factory(self.timer)
        records = list(self.log) if self.replay_filter is None else self.replay_filter(list(self.log))
        self.coordinator.begin_loading()
        for key, value in records:
            self.coordinator.replay(key, value, now)
        self.up = True
        self.activity += 1
        self.observer.restarted(old, self.coordinator)
        self.unwritten_classic.clear()  # the new coordinator holds what the log holds
        coordinator = self.coordinator

        def loaded() -> None:
            if self.coordinator is coordinator and self.up:
                self.activity += 1
                coordinator.finish_loading(self.queue.now_ms)
                self._arm_timer()

        self.queue.after(load_ms, "coordinator loaded", loaded)


def _classic_groups(records: list[Any]) -> set[str]:
    """The classic groups whose metadata ``records`` write (key version 2)."""
    out = set()
    for record in records:
        if record.key[:2] == b"\x00\x02":
            key = gr.decode_key(record.key)
            if isinstance(key, gr.GroupMetadataKey):
                out.add(key.group)
    return out
