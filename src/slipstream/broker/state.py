"""Everything a request handler may touch, in one place: topics, producers, clock, config."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..log.api import PartitionLog
from ..log.metadata import MetadataStore
from ..protocol.apis.api_versions import ApiVersionsResponseApiVersion
from . import topic_config
from .config import BrokerConfig
from .durability import GroupCommitter
from .group_configs import GroupConfigs
from .metrics import BrokerMetrics
from .mutation_quota import MutationQuotas
from .notifier import AppendNotifier
from .producer_ids import ProducerIdAllocator
from .security.acl_store import AclStore
from .security.authorizer import Authorizer
from .security.credentials import CredentialStore
from .topics import TopicManager

# The produce and fetch path (record batches, compression, batch checks, producer state,
# fetch sessions, append policies) is imported where first used, not here: a broker's
# first answers need none of it, and the worker thread that loads the coordinators after
# the listener opens loads it too (broker.py, SERVING_PATH_MODULES).
if TYPE_CHECKING:
    from ..coordinator.result import RequestContext as CoordinatorContext
    from .append_policy import AppendPolicies
    from .cluster.view import ClusterView
    from .fetch_sessions import FetchSessionCache
    from .producer_state import PartitionProducerState


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class BrokerState:
    """The broker's shared state: config, topics, producers, sessions, quotas, metrics, clock."""

    config: BrokerConfig
    topics: TopicManager
    cluster_id: str
    producer_ids: ProducerIdAllocator
    group_configs: GroupConfigs
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    # Listener name -> the (host, port) clients connecting through it are told about.
    advertised: dict[str, tuple[str, int]] = field(default_factory=dict)
    credentials: CredentialStore = field(default_factory=lambda: CredentialStore(None))
    # None: no authorizer configured, every request is allowed (request_context.py asks it).
    authorizer: Authorizer | None = None
    acl_store: AclStore = field(default_factory=lambda: AclStore(None))
    clock: Callable[[], int] = wall_clock_ms
    notifier: AppendNotifier = field(default_factory=AppendNotifier)
    committer: GroupCommitter = field(default_factory=GroupCommitter)
    producer_states: dict[tuple[str, int], PartitionProducerState] = field(default_factory=dict)
    # The same few (api version, client id, peer) triples arrive over and over: the
    # coordinator's view of a request is made once per triple (bounded, see RequestContext).
    coordinator_contexts: dict[tuple[int, str | None, str, int], CoordinatorContext] = field(default_factory=dict)
    # The ApiVersions answer: every served API and its version range (set by the dispatcher).
    api_versions: list[ApiVersionsResponseApiVersion] = field(default_factory=list)
    # KIP-599 buckets for controller.mutation.rate (mutation_quota.py).
    mutation_quotas: MutationQuotas = field(default_factory=MutationQuotas)
    # Request, byte and record counts (read by the admin listener's /metrics).
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    # A cluster over PostgreSQL: live brokers and the partitions this broker leads.
    cluster: ClusterView | None = None

    @cached_property
    def fetch_sessions(self) -> FetchSessionCache:
        """The incremental fetch sessions (KIP-227), made at the first Fetch."""
        from .fetch_sessions import FetchSessionCache

        return FetchSessionCache(self.config.max_incremental_fetch_session_cache_slots)

    @cached_property
    def append_policies(self) -> AppendPolicies:
        """Each topic's produce-time configs, parsed once per change (append_policy.py)."""
        from .append_policy import AppendPolicies

        return AppendPolicies()

    def __post_init__(self) -> None:
        self.committer.round_wait_s = self.config.commit_round_wait_s

    def not_leader(self, topic: str, partition: int) -> bool:
        """In a cluster, whether another broker (or none, for now) leads the partition."""
        return self.cluster is not None and not self.cluster.leads(topic, partition)

    def high_watermark(self, plog: PartitionLog) -> int:
        """The end consumers may read to: in a cluster, what the database holds."""
        if self.cluster is None:
            return plog.log_end_offset
        return min(plog.log_end_offset, getattr(plog, "committed_end", plog.log_end_offset))

    def producer_state(self, topic: str, partition: int) -> PartitionProducerState:
        key = (topic, partition)
        state = self.producer_states.get(key)
        if state is None:
            from .producer_state import PartitionProducerState

            state = self.producer_states[key] = PartitionProducerState()
            plog = self.topics.partition(topic, partition)
            if plog is not None and plog.log_end_offset > plog.log_start_offset:
                state.rebuild(plog.batch_headers())
        return state

    def last_stable_offset(self, topic: str, partition: int, plog: PartitionLog) -> int:
        """First offset of the earliest open transaction, else the high watermark; never
        below the log start (DeleteRecords or retention may pass an open transaction's
        start, as in Kafka)."""
        hwm = self.high_watermark(plog)
        lso = self.producer_state(topic, partition).last_stable_offset(hwm)
        return max(min(lso, hwm), plog.log_start_offset)

    def topic_log_config(self, topic: str) -> Any:
        t = self.topics.topics[topic]
        return topic_config.log_config(self.topics.effective_configs(t))


def load_cluster_id(metadata: MetadataStore | None) -> str:
    """Kafka cluster ids are Uuid strings (22-char url-safe base64); ours persists in
    meta.properties and is read back as stored (one made before the no-leading-"-" rule too)."""
    from ..protocol.uuid_strings import random_uuid_string

    fresh = random_uuid_string()
    if metadata is None:
        return fresh
    update = getattr(metadata, "update", None)
    if update is not None:
        # Brokers of a cluster starting together: the first to write names the cluster.
        def keep_first(current: str | None) -> str:
            return current if current and "cluster.id=" in current else f"version=1\ncluster.id={fresh}\n"

        saved: str | None = update("meta.properties", keep_first)
    else:
        saved = metadata.load("meta.properties")
    for line in (saved or "").splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    metadata.save("meta.properties", f"version=1\ncluster.id={fresh}\n")
    return fresh
