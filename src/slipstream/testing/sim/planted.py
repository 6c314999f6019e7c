"""Bugs planted on purpose, from outside the real code, to prove the simulator finds them.

Each plant patches the coordinator only inside the simulating process and only for
the duration of one history (``installed``), or wraps one coordinator instance, or
filters what a restarted coordinator replays. Nothing under ``slipstream.coordinator``
is edited.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ...coordinator import GroupCoordinator, GroupState, consumer_rebalance
from ...coordinator.consumer.member import ConsumerGroupMember
from ...protocol.errors import ErrorCode
from .broker import LogRecord


@dataclass(frozen=True)
class Plant:
    name: str
    protocols: tuple[str, ...]
    description: str
    # Context manager patching module/class attributes for one history.
    patch: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    # Applied to every coordinator the broker builds.
    wrap: Callable[[GroupCoordinator], None] | None = None
    # What a restarted coordinator replays.
    replay_filter: Callable[[list[LogRecord]], list[LogRecord]] | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if self.patch is None:
            yield
            return
        with self.patch():
            yield


@contextlib.contextmanager
def _attribute(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


# ---------------------------------------------------------------- early hand-off (KIP-848)


def _early_handoff() -> contextlib.AbstractContextManager[None]:
    real = consumer_rebalance.reconcile

    def reconcile(member: Any, target_epoch: int, target: Any, _owner_epoch: Any, owned: Any) -> Any:
        # Every partition looks free: the new owner gets it while the old one still holds it.
        return real(member, target_epoch, target, lambda _t, _p: -1, owned)

    return _attribute(consumer_rebalance, "reconcile", reconcile)


# ---------------------------------------------------------------- stale commits


def _stale_commits(coordinator: GroupCoordinator) -> None:
    offsets = coordinator.offset_manager
    validate = offsets._validate_commit
    commit = offsets.commit

    def lenient_validate(
        group_id: str, member_id: str, instance_id: str | None, generation: int, version: int, now_ms: int
    ) -> Any:
        error, group = validate(group_id, member_id, instance_id, generation, version, now_ms)
        classic = offsets.groups.get(group_id)
        if (
            error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID)
            and classic is not None
            and classic.state is not GroupState.DEAD
            and 0 <= generation < classic.generation_id
        ):
            return ErrorCode.NONE, classic  # "an older generation is fine"
        return error, group

    def lenient_commit(ctx: Any, req: Any, now_ms: int) -> Any:
        group = coordinator.consumer_group(req.group_id)
        member = None if group is None else group.member(req.member_id)
        sent = req.generation_id_or_member_epoch
        if member is not None and 0 < sent < member.member_epoch:
            req.generation_id_or_member_epoch = member.member_epoch  # "an older epoch is fine"
            try:
                return commit(ctx, req, now_ms)
            finally:
                req.generation_id_or_member_epoch = sent
        return commit(ctx, req, now_ms)

    offsets._validate_commit = lenient_validate  # type: ignore[method-assign]
    offsets.commit = lenient_commit  # type: ignore[method-assign]


# ---------------------------------------------------------------- no epoch bump (KIP-848)


def _no_epoch_bump() -> contextlib.AbstractContextManager[None]:
    def never_differs(self: ConsumerGroupMember, other: ConsumerGroupMember) -> bool:
        return False

    return _attribute(ConsumerGroupMember, "subscription_differs", never_differs)


# ---------------------------------------------------------------- lost record


def _lose_last_record(log: list[LogRecord]) -> list[LogRecord]:
    return log[:-1]


PLANTS: dict[str, Plant] = {
    p.name: p
    for p in (
        Plant(
            "early-handoff",
            ("consumer",),
            "a partition goes to its new owner before the old one released it",
            patch=_early_handoff,
        ),
        Plant(
            "stale-commit",
            ("classic", "consumer"),
            "a commit from a stale generation / member epoch is accepted",
            wrap=_stale_commits,
        ),
        Plant(
            "no-epoch-bump",
            ("consumer",),
            "a subscription change does not bump the group epoch",
            patch=_no_epoch_bump,
        ),
        Plant(
            "lose-record",
            ("classic", "consumer"),
            "a restarted coordinator loses the last record of the log on replay",
            replay_filter=_lose_last_record,
        ),
    )
}
