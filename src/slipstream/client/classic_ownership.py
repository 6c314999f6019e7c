"""The partitions a classic group member owns, and what each step of a rebalance gives up
(:class:`OwnedPartitions`), without I/O."""

from __future__ import annotations

from .assignors import DEFAULT_GENERATION, EAGER, RebalanceProtocol, TopicPartition
from .membership_types import PrepareResult


class OwnedPartitions:
    """What the member owns, and the last assignment it received with its generation.

    The last assignment outlives an EAGER member's revoke-everything before rejoining:
    sticky assignors put it in their user data.
    """

    def __init__(self) -> None:
        self.partitions: set[TopicPartition] = set()
        self.last_assignment: tuple[TopicPartition, ...] = ()
        self.last_assignment_generation: int = DEFAULT_GENERATION

    def before_join(
        self, *, generation_reset: bool, protocol: RebalanceProtocol, subscription: tuple[str, ...]
    ) -> PrepareResult:
        """What to give up before JoinGroup (ConsumerCoordinator.onJoinPrepare): everything is
        lost after a generation reset; EAGER revokes everything, COOPERATIVE only the
        partitions of topics no longer subscribed to."""
        owned = tuple(sorted(self.partitions))
        if generation_reset:
            if owned:
                self.partitions.clear()
                return PrepareResult("lost", owned)
            return PrepareResult("")
        if protocol == EAGER:
            self.partitions.clear()
            return PrepareResult("revoked", owned) if owned else PrepareResult("")
        gone = tuple(tp for tp in owned if tp[0] not in subscription)
        if gone:
            self.partitions.difference_update(gone)
            return PrepareResult("revoked", gone)
        return PrepareResult("")

    def give_up(self, kind: str) -> PrepareResult:
        """Everything owned, given up as ``kind`` ("lost" or "revoked"); empty if nothing was."""
        owned = self.take_all()
        return PrepareResult(kind, owned) if owned else PrepareResult("")

    def take_all(self) -> tuple[TopicPartition, ...]:
        owned = tuple(sorted(self.partitions))
        self.partitions.clear()
        return owned

    def assign(
        self, new: set[TopicPartition], generation_id: int
    ) -> tuple[tuple[TopicPartition, ...], tuple[TopicPartition, ...]]:
        """Own ``new`` from now on; returns (revoked, added)."""
        revoked = tuple(sorted(self.partitions - new))
        added = tuple(sorted(new - self.partitions))
        self.partitions = new
        self.last_assignment = tuple(sorted(new))
        self.last_assignment_generation = generation_id
        return revoked, added
