"""What the transaction coordinator's handlers return.

A ``TxnResult`` is a ``CoordinatorResult`` (see ``coordinator/result.py``: records
to append - here to ``__transaction_state`` -, then ``after_append``; the answer
to the request is ``response``, possibly set by the result ``after_append``
returns) with one addition: ``markers``, transaction markers to write once the
records are durable. The caller writes each job's markers into its partitions
(retrying what fails for a reason that may pass), then runs ``job.on_written(now)``
on the coordinator's ordered path and carries out what that returns the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..result import CoordinatorResult

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """COMMIT or ABORT markers for every partition of one transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    on_written: Callable[[int], CoordinatorResult] = field(compare=False, repr=False)


@dataclass(slots=True)
class TxnResult(CoordinatorResult):
    markers: list[MarkerJob] = field(default_factory=list)
