"""The heartbeat interval a consumer-group member is given with each answer.

The coordinator cannot call a member, so the interval is how fast it hears of a change:

- a member whose group is changing (it has partitions to revoke or to receive, the group
  is not Stable, or its epoch moved within the settle window) gets the short reconciling
  interval; with ``consumer_group_reconciling_heartbeat_budget_per_s``, while so many
  members are changing at once that their heartbeats would pass the budget (a join
  storm), members that have reached their target skip the settle window (about half of
  a joining member's heartbeats), and the short interval stretches, up to ``MAX_STRETCH``
  times (and never past the regular interval);
- a settled member gets the regular interval, or a shorter one while the broker has few
  members (``consumer_group_heartbeat_budget_per_s``). A group's own interval (config
  resource GROUP) is always given as it is.

Both budgets count members, not requests: a member is counted as reconciling from an
answer with the short interval until it has had two such intervals to come back (its
entry then lapses) or until it is given a settled interval.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import ConsumerGroupTimeouts, CoordinatorConfig
from .consumer import ConsumerGroup, ConsumerGroupState

# A Stable group whose epoch moved this recently still heartbeats fast: members that start
# together keep arriving for a while after the first one settles.
SETTLE_WINDOW_MS = 1_000
# The members counts are refreshed at most this often (each refresh walks them all).
RECOUNT_MS = 1_000
# The reconciling interval stretches to at most this many times the short one: a member's
# heartbeats while it reconciles are mostly needed ones (revoke, then receive), so past this
# stretching mostly delays rebalances, and more members count as reconciling for longer.
MAX_STRETCH = 2


class HeartbeatIntervals:
    def __init__(
        self,
        config: CoordinatorConfig,
        timeouts: Callable[[str], ConsumerGroupTimeouts],
        member_count: Callable[[], int],
    ) -> None:
        self.config = config
        self.timeouts = timeouts
        self.member_count = member_count
        # Members of all consumer groups, counted at most once a second (the settled budget).
        self._members = 0
        self._members_at: int | None = None
        # (group id, member id) -> until when it counts as reconciling (the reconciling budget).
        self._reconciling: dict[tuple[str, str], int] = {}
        self._pruned_at: int | None = None

    def interval(
        self, group: ConsumerGroup, member_id: str, bumped: bool, reconciled: bool, now_ms: int
    ) -> int:
        """The interval for ``member_id`` of ``group``: ``bumped`` when this heartbeat moved
        the group epoch, ``reconciled`` when the member has reached its target."""
        timeouts = self.timeouts(group.group_id)
        regular = timeouts.heartbeat_interval_ms
        short = min(regular, self.config.consumer_group_reconciling_heartbeat_interval_ms)
        key = (group.group_id, member_id)
        within_budget = self._within_budget(key, now_ms)
        stable = reconciled and not bumped and group.state is ConsumerGroupState.STABLE
        if stable and now_ms - group.epoch_changed_ms < min(regular, SETTLE_WINDOW_MS):
            # Within the settle window, unless the budget is exceeded: then it waits for no
            # latecomer at everyone else's expense.
            stable = within_budget > short
        if not stable:
            fast = min(regular, MAX_STRETCH * short, max(short, within_budget))
            self._reconciling[key] = now_ms + 2 * fast
            return fast
        self._reconciling.pop(key, None)
        return self._settled_interval(timeouts, now_ms)

    def reconciling_members(self, now_ms: int) -> int:
        """Members counted as reconciling now (pruned at most once a ``RECOUNT_MS``)."""
        if self._pruned_at is None or now_ms - self._pruned_at >= RECOUNT_MS:
            self._reconciling = {k: until for k, until in self._reconciling.items() if until > now_ms}
            self._pruned_at = now_ms
        return len(self._reconciling)

    def _within_budget(self, key: tuple[str, str], now_ms: int) -> int:
        """The interval that keeps every reconciling member, ``key`` too, within the
        reconciling budget (0 without one)."""
        budget = self.config.consumer_group_reconciling_heartbeat_budget_per_s
        if budget <= 0:
            return 0
        members = self.reconciling_members(now_ms) + (key not in self._reconciling)
        return -(-members * 1000 // budget)

    def _settled_interval(self, timeouts: ConsumerGroupTimeouts, now_ms: int) -> int:
        regular = timeouts.heartbeat_interval_ms
        budget = self.config.consumer_group_heartbeat_budget_per_s
        if budget <= 0 or timeouts.interval_is_group_config:
            return regular
        if self._members_at is None or now_ms - self._members_at >= RECOUNT_MS:
            self._members = self.member_count()
            self._members_at = now_ms
        within_budget = -(-self._members * 1000 // budget)
        return min(regular, max(self.config.consumer_group_idle_heartbeat_floor_ms, within_budget))
