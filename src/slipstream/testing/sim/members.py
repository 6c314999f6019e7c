"""What every simulated member does besides the group protocol: connect, process, commit.

A member is one incarnation of a consumer process. It owns a coordinator connection
(found and reconnected with backoff, like the client's ``CoordinatorLocator``), and for
every partition it holds it fetches the committed offset, "processes" records (its
position moves forward) and commits its positions now and then. The group protocol
itself lives in the subclasses: ``ClassicMember`` drives the real ``MemberCore``,
``ConsumerMember`` a KIP-848 heartbeat core.

Every callback a member schedules goes through ``_guard``: a dead member ignores it, a
paused one (a long GC pause, a stopped VM) queues it and runs the backlog in order when
it resumes, which is how a frozen process catches up.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ...client.retry import Backoff
from ...protocol.apis.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from ...protocol.apis.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from .coverage import Coverage
from .events import Event, EventQueue
from .network import Connection, Network
from .topics import Topics
from .workload import Setup, Timing

TopicPartition = tuple[str, int]

REQUEST_TIMEOUT_MS = 30_000
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1_000


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who a commit claims to come from: (member id, generation or member epoch)."""

    member_id: str
    generation: int


class MemberWorld(Protocol):
    """What a member uses of the world it lives in (``state.WorldState`` is one)."""

    seed: int
    setup: Setup
    timing: Timing
    queue: EventQueue
    network: Network
    topics: Topics
    coverage: Coverage

    def group_of(self, slot: int) -> str: ...

    def partition_counts(self, topics: list[str]) -> dict[str, int]: ...

    def touch(self, member: SimMember) -> None:
        """``member`` runs code now: the world looks at it after this step."""

    def member_failed(self, member: SimMember, code: int, reason: str) -> None:
        """``member`` got a fatal answer and is over."""


class Locator:
    """The member's coordinator connection: reconnects with backoff until it has one."""

    def __init__(self, member: SimMember) -> None:
        self.member = member
        self.conn: Connection | None = None
        self._waiters: list[Callable[[Connection], None]] = []
        self._connecting = False
        self._attempt = 0

    @property
    def known(self) -> bool:
        return self.conn is not None and self.conn.open

    def connection(self, then: Callable[[Connection], None]) -> None:
        if self.conn is not None and self.conn.open:
            then(self.conn)
            return
        self._waiters.append(then)
        if not self._connecting:
            self._connecting = True
            self._try()

    def _try(self) -> None:
        m = self.member
        m.world.network.connect(m.label, m.net_rng, m.guard(self._connected), m.guard(self._failed))

    def _connected(self, conn: Connection) -> None:
        self._connecting = False
        self._attempt = 0
        self.conn = conn
        waiters, self._waiters = self._waiters, []
        for then in waiters:
            then(conn)

    def _failed(self, _reason: str) -> None:
        delay = self.member.backoff_ms(self._attempt)
        self._attempt += 1
        self.member.after(delay, "reconnect", self._try)

    def mark_unknown(self, reason: str) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and conn.open:
            self.member.world.network.close(conn, reason)

    def close(self) -> None:
        self._waiters.clear()
        self.mark_unknown("member closed")


class SimMember:
    protocol = ""

    def __init__(self, world: MemberWorld, slot: int, incarnation: int, topics: list[str], instance_id: str | None) -> None:
        self.world = world
        self.slot = slot
        self.incarnation = incarnation
        self.label = f"m{slot}.{incarnation}"
        self.instance_id = instance_id
        self.rng = random.Random(f"{world.seed}/member/{self.label}")
        self.net_rng = world.network.rng_for(self.label)
        self.group_id = world.group_of(slot)
        self.locator = Locator(self)
        self.gone = False  # crashed, closed or failed: the process is over
        self.closing = False
        self.paused_until: int | None = None
        self._backlog: list[Callable[[], None]] = []
        self.positions: dict[TopicPartition, int] = {}
        self._fetch_tokens: dict[TopicPartition, int] = {}
        self._tokens = 0
        self.touched = False  # ran since the world last looked at it (see MemberWorld.touch)

    # ------------------------------------------------------------ scheduling

    @property
    def now(self) -> int:
        return self.world.queue.now_ms

    @property
    def paused(self) -> bool:
        return self.paused_until is not None

    def guard(self, fn: Callable[..., None]) -> Callable[..., None]:
        # A partial, not a closure: made for every event and request, it is the cheaper.
        return functools.partial(self._guarded, fn)

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        if self.gone:
            return
        if self.paused_until is not None:
            self._backlog.append(functools.partial(self._guarded, fn, *args))
            return
        if not self.touched:
            self.world.touch(self)
        fn(*args)

    def after(self, delay_ms: int, label: str, fn: Callable[[], None]) -> Event:
        return self.world.queue.after(delay_ms, (self.label, " ", label), functools.partial(self._guarded, fn))

    def backoff_ms(self, attempt: int) -> int:
        backoff = Backoff(RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, rand=self.rng.random)
        return max(1, int(backoff.delay_s(attempt) * 1000))

    def send(
        self,
        conn: Connection,
        api: str,
        version: int,
        request: Any,
        on_response: Callable[[Any], None],
        on_failure: Callable[[str], None],
        timeout_ms: int = REQUEST_TIMEOUT_MS,
    ) -> None:
        self.world.network.request(
            conn, api, version, request, self.guard(on_response), self.guard(on_failure), timeout_ms
        )

    # ------------------------------------------------------------ lifecycle (driven by the world)

    def start(self) -> None:
        self._tick_commit()

    def crash(self) -> None:
        """The process dies: no leave, no commit; its connection resets."""
        self.gone = True
        self._backlog.clear()
        self.locator.close()

    def pause(self, duration_ms: int) -> None:
        if self.gone or self.paused:
            return
        self.paused_until = self.now + duration_ms
        self.world.queue.after(duration_ms, (self.label, " resumes"), self._resume)

    def _resume(self) -> None:
        self.paused_until = None
        self.on_resume()
        backlog, self._backlog = self._backlog, []
        for fn in backlog:
            fn()

    def on_resume(self) -> None:
        """Hook: what a member checks first when it wakes from a pause."""

    def drop_connection(self) -> None:
        if not self.gone and self.locator.conn is not None:
            self.world.network.close(self.locator.conn, "link dropped")

    def leave(self) -> None:
        raise NotImplementedError

    def subscribe(self, topics: list[str]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ what the invariants read

    def held(self) -> set[TopicPartition]:
        """Partitions this member believes it may consume right now."""
        raise NotImplementedError

    @property
    def subscription(self) -> tuple[str, ...]:
        raise NotImplementedError

    def commit_credentials(self) -> Credentials | None:
        raise NotImplementedError

    # ------------------------------------------------------------ partitions gained and lost

    def partitions_added(self, tps: list[TopicPartition]) -> None:
        """Fetch the committed offsets before processing (positions unknown until then)."""
        for tp in tps:
            self._tokens += 1
            self._fetch_tokens[tp] = self._tokens
            self.positions.pop(tp, None)
        if tps:
            self._fetch(sorted(tps), 0)

    def partitions_removed(self, tps: list[TopicPartition] | tuple[TopicPartition, ...]) -> None:
        for tp in tps:
            self.positions.pop(tp, None)
            self._fetch_tokens.pop(tp, None)

    def _fetch(self, tps: list[TopicPartition], attempt: int) -> None:
        tokens = {tp: self._fetch_tokens.get(tp) for tp in tps}

        def wanted() -> list[TopicPartition]:
            # Still held, still the same grant, and no answer yet: a retried fetch whose
            # first attempt was answered after all must not rewind a position in use.
            held = self.held()
            return [
                tp
                for tp in tps
                if tp in held and self._fetch_tokens.get(tp) == tokens[tp] and tp not in self.positions
            ]

        def retry(_why: str) -> None:
            still = wanted()
            if still:
                self.after(self.backoff_ms(attempt), "refetch", lambda: self._fetch(still, attempt + 1))

        def on_response(response: Any) -> None:
            group = response.groups[0]
            if group.error_code:
                retry("error")
                return
            committed = {(t.name, p.partition_index): p.committed_offset for t in group.topics for p in t.partitions}
            for tp in wanted():
                self.positions[tp] = max(0, committed.get(tp, -1))

        def connected(conn: Connection) -> None:
            todo = wanted()
            if not todo:
                return
            by_topic: dict[str, list[int]] = {}
            for topic, partition in todo:
                by_topic.setdefault(topic, []).append(partition)
            member_id, epoch = self.fetch_identity()
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        group_id=self.group_id,
                        member_id=member_id,
                        member_epoch=epoch,
                        topics=[OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                    )
                ],
                require_stable=True,
            )
            self.send(conn, "offset_fetch", 9, request, on_response, retry)

        self.locator.connection(connected)

    def fetch_identity(self) -> tuple[str | None, int]:
        return None, -1

    # ------------------------------------------------------------ processing and commits

    def _process(self, tps: Iterable[TopicPartition]) -> None:
        """Processing is implicit: when positions are read, each partition processed has
        moved on by a random amount (no event per poll keeps histories cheap)."""
        for tp in sorted(tps):
            if tp in self.positions:
                self.positions[tp] += self.rng.randrange(8)

    def _tick_commit(self) -> None:
        self._process(self.held())
        self.commit(sorted(self.positions))
        self.after(300 + self.rng.randrange(2_700), "commit", self._tick_commit)

    def commit(
        self,
        tps: list[TopicPartition] | tuple[TopicPartition, ...],
        creds: Credentials | None = None,
        releasing: bool = False,
    ) -> None:
        """Commit the positions of ``tps`` this member holds, with its credentials now.

        ``releasing``: the final commit of partitions being given up (the listener's
        commit on revocation), sent with ``creds`` even though they are no longer held.
        """
        creds = creds if creds is not None else self.commit_credentials()
        held = set(tps) if releasing else self.held()
        offsets = {tp: self.positions[tp] for tp in tps if tp in self.positions and tp in held}
        if creds is None or not offsets or self.locator.conn is None or not self.locator.conn.open:
            return
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""
                )
            )
        request = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=creds.generation,
            member_id=creds.member_id,
            group_instance_id=self.instance_id,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        def on_response(response: Any) -> None:
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code:
                        self.on_commit_error(p.error_code, creds)
                        return

        self.send(self.locator.conn, "offset_commit", 9, request, on_response, lambda _why: None)

    def on_commit_error(self, code: int, creds: Credentials) -> None:
        """Hook: a commit answer saying the membership is stale."""
