"""Coordinator configuration (Kafka's group.* / offsets.* broker settings)."""

from __future__ import annotations

from dataclasses import dataclass

# (Its own module: the broker's config checks the policy without loading this one.)
from .migration_policy import MigrationPolicy

# group.initial.rebalance.delay.ms: Kafka's default is 3000 ms, which makes a lone
# consumer wait three seconds for its first assignment. We default to 100 ms, and
# a group leaving Empty first waits only a quarter of it (25 ms): a lone consumer
# starts fast. A member joining (or being handed its member id) during a wait, or
# a member handed an id that has not rejoined yet, extends it by the full delay,
# bounded by the rebalance timeout, so consumers started together still land in
# one generation (see ClassicRebalance._on_initial_delay).
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 100
# See CoordinatorConfig.consumer_group_reconciling_heartbeat_interval_ms.
DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS = 200


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The coordinators' settings (Kafka's group.* and offsets.* broker configs)."""

    # group.min.session.timeout.ms / group.max.session.timeout.ms: JoinGroup outside
    # this range answers INVALID_SESSION_TIMEOUT.
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    # group.initial.rebalance.delay.ms (see DEFAULT_INITIAL_REBALANCE_DELAY_MS).
    group_initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS
    # group.max.size: GROUP_MAX_SIZE_REACHED beyond it.
    group_max_size: int = 2**31 - 1
    # How long a new member's parked JoinGroup may wait before it is dropped
    # (Kafka's group.classic.new.member.join.timeout, 5 minutes).
    group_new_member_join_timeout_ms: int = 300_000
    # offsets.retention.minutes, in milliseconds (7 days).
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    # offsets.retention.check.interval.ms: how often expire_offsets runs by itself.
    offsets_retention_check_interval_ms: int = 600_000
    # offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE beyond it.
    offset_metadata_max_bytes: int = 4096
    # offsets.topic.num.partitions: __consumer_offsets partition count.
    offsets_topic_num_partitions: int = 50
    # Consumer (KIP-848) groups: group.consumer.session.timeout.ms,
    # group.consumer.heartbeat.interval.ms, group.consumer.max.size and
    # group.consumer.assignors (the first one is the default), Kafka's defaults.
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_max_size: int = 2**31 - 1
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    # group.consumer.migration.policy (see MigrationPolicy and migration.py).
    consumer_group_migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL
    # Ours: the heartbeat interval given to a member while its group is changing (it
    # has partitions to revoke or to receive, the group is not Stable, or its epoch
    # moved less than one regular interval ago). The coordinator cannot call a member,
    # so this is how fast a rebalance completes; a Stable group heartbeats at the
    # regular interval.
    consumer_group_reconciling_heartbeat_interval_ms: int = DEFAULT_RECONCILING_HEARTBEAT_INTERVAL_MS
    # Ours: settled members' heartbeats per second the coordinator budgets for, over all
    # consumer groups. A settled member is given the interval that keeps all of them within
    # the budget, never below consumer_group_idle_heartbeat_floor_ms and never above the
    # regular interval: a broker with few members notices a joining member within the
    # floor (the members that must revoke learn of it at their next heartbeat), a busy one
    # stays at the regular interval. 0: always the regular interval, as Kafka. A group's
    # own interval (config resource GROUP) is always given as it is.
    consumer_group_heartbeat_budget_per_s: int = 0
    consumer_group_idle_heartbeat_floor_ms: int = 500
    # Ours: reconciling members' heartbeats per second the coordinator budgets for, over
    # all consumer groups. While more members are changing at once than the reconciling
    # interval allows within it (a join storm), members that have reached their target stop
    # waiting out the settle window, and the others' interval stretches towards the budget,
    # to twice the reconciling interval at most (consumer_intervals.py). 0: no budget.
    consumer_group_reconciling_heartbeat_budget_per_s: int = 0
    # Ours: group.history.max.events, the rebalance-history events kept per group (history.py).
    group_history_max_events: int = 1_000

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group_min_session_timeout_ms must not exceed group_max_session_timeout_ms")
        if self.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group_initial_rebalance_delay_ms must be >= 0")
        if self.group_max_size < 1:
            raise ValueError("group_max_size must be >= 1")
        if self.offsets_topic_num_partitions < 1:
            raise ValueError("offsets_topic_num_partitions must be >= 1")
        if self.consumer_group_heartbeat_interval_ms >= self.consumer_group_session_timeout_ms:
            raise ValueError("consumer_group_heartbeat_interval_ms must be below consumer_group_session_timeout_ms")
        if not 0 < self.consumer_group_reconciling_heartbeat_interval_ms <= self.consumer_group_heartbeat_interval_ms:
            raise ValueError(
                "consumer_group_reconciling_heartbeat_interval_ms must be in 1..consumer_group_heartbeat_interval_ms"
            )
        if self.consumer_group_heartbeat_budget_per_s < 0:
            raise ValueError("consumer_group_heartbeat_budget_per_s must be >= 0")
        if self.consumer_group_reconciling_heartbeat_budget_per_s < 0:
            raise ValueError("consumer_group_reconciling_heartbeat_budget_per_s must be >= 0")
        if self.consumer_group_idle_heartbeat_floor_ms < 1:
            raise ValueError("consumer_group_idle_heartbeat_floor_ms must be >= 1")
        if self.consumer_group_max_size < 1:
            raise ValueError("consumer_group_max_size must be >= 1")
        if not self.consumer_group_assignors:
            raise ValueError("consumer_group_assignors must name at least one assignor")
        if self.group_history_max_events < 1:
            raise ValueError("group_history_max_events must be >= 1")
        if self.offsets_retention_ms < 1 or self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offset retention settings must be positive")


@dataclass(frozen=True, slots=True)
class ConsumerGroupTimeouts:
    """A group's session timeout and regular heartbeat interval (broker defaults or the
    group's own configs)."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    # The interval is the group's own (config resource GROUP), not the broker default: it
    # is given as it is, never shortened by the heartbeat budget.
    interval_is_group_config: bool = False
