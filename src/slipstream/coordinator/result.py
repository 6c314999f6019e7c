"""What a coordinator handler returns, and how the caller must carry it out.

Handlers never block and never do I/O. Each returns a ``CoordinatorResult``:

- ``response``: the answer to *this* request, or None when it is parked;
- ``pending``: the handle under which a parked request's answer will come;
- ``records``: ``__consumer_offsets`` records to append, in order;
- ``completions``: answers to requests parked earlier (by handle);
- ``events``: what the operation decided, with its cause (history.py), for the
  group's rebalance history; the caller records them (``GroupHistory.record``);
- ``after_append``: called once the append of ``records`` finished, with the
  error code (``ErrorCode.NONE`` when durable) and the time; it returns the
  next result to carry out the same way (Kafka's append-future callbacks:
  e.g. SyncGroup answers the members only once the group's assignment is
  durable, and answers an error if the write failed).

The caller (the broker's asyncio adapter; the unit tests' context) carries a
result out like this:

1. register ``pending`` (if any) so a later completion can find the request;
2. if ``records``: append them to ``__consumer_offsets`` (each to its
   ``partition``) and, as soon as the log has accepted them, in order,
   ``coordinator.replay(key, value)`` each one; that is what updates committed
   offsets and removes deleted groups. Replay must happen before the
   coordinator runs the next request or timer callback (the next handler must
   see this one's writes). Records the log refused are not replayed;
3. once the records are durable (or the append failed), deliver ``response``
   and every completion (answers for handles whose connection is gone are
   dropped), then carry out ``after_append(err, now_ms)`` the same way, with
   ``err`` = ``ErrorCode.NONE`` or the append's error code (the first one, if
   a result spanning partitions failed partly).

Steps 2 and 3 may be one step (await durability before the next request), or
the adapter may run further requests while an fsync is in flight and finish
step 3 later, in order: the coordinator's callbacks re-check the group state
they act on. Only ``expire_offsets`` and ``delete_groups`` results can span
several partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..protocol.schema import Struct, fast_frozen_init

if TYPE_CHECKING:
    from ..protocol.group_records import ConsumerGroupKey, ConsumerGroupValue
    from .history import GroupEvent
    from .offset_and_metadata import OffsetAndMetadata


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the coordinator needs from the request header and connection."""

    api_version: int
    client_id: str = ""
    # Kafka reports the peer address as InetAddress.toString(), e.g. "/127.0.0.1".
    client_host: str = ""
    # The connection it came on, numbered in the order the broker accepted them (0: unknown).
    connection: int = 0


@fast_frozen_init  # made on every request: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True, eq=False)
class Pending:
    """A parked request (JoinGroup, SyncGroup, or one whose answer waits for an append).

    Compared by identity: each parked request gets its own handle.
    """

    id: int
    api_key: int
    # The version of the parked request: its answer is shaped for it.
    api_version: int

    def __repr__(self) -> str:
        return f"Pending(#{self.id}, api_key={self.api_key}, v{self.api_version})"


@fast_frozen_init  # made on every request: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True)
class Completion:
    pending: Pending
    response: Struct


@fast_frozen_init  # made on every request: see schema.fast_frozen_init
@dataclass(frozen=True, slots=True)
class Record:
    """One ``__consumer_offsets`` record; ``value`` None is a tombstone."""

    partition: int
    key: bytes
    value: bytes | None
    # For an offset commit the coordinator built: (group, topic, partition, what
    # replaying the value yields), so ``GroupCoordinator.apply`` need not decode
    # the bytes just encoded. Not part of the record's identity.
    commit: tuple[str, str, int, OffsetAndMetadata] | None = field(default=None, compare=False, repr=False)
    # (producer id, epoch) of a TxnOffsetCommit: the record goes into that producer's
    # transactional batch and stays pending until the transaction's marker.
    producer: tuple[int, int] | None = None
    # For a consumer-group record the coordinator built: the key and value its bytes
    # encode, so ``GroupCoordinator.apply`` need not decode them (a heartbeat that moves
    # a member writes one to a few). Not part of the record's identity.
    consumer: tuple[ConsumerGroupKey, ConsumerGroupValue | None] | None = field(
        default=None, compare=False, repr=False
    )


AfterAppend = Callable[[int, int], "CoordinatorResult"]


@dataclass(slots=True)
class CoordinatorResult:
    response: Struct | None = None
    pending: Pending | None = None
    records: list[Record] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    after_append: AfterAppend | None = None
    # A tuple by default: most results carry no event, and need no list for it.
    events: Sequence[GroupEvent] = ()

    @property
    def is_empty(self) -> bool:
        return (
            self.response is None
            and self.pending is None
            and not self.records
            and not self.completions
            and self.after_append is None
            and not self.events
        )


# A timer's action: run at (or after) its deadline with the current time.
TimerCallback = Callable[[int], CoordinatorResult]
