"""The Prometheus view of a broker, built at scrape time.

A custom collector on a registry of the broker's own (never the process-global
one, so two brokers in one process do not mix): each scrape reads the plain
counters of broker/metrics.py and the live state (logs, groups, committed offsets)
and yields metric families. Nothing calls prometheus_client per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from ...coordinator.consumer.group import ConsumerGroupState
from ...coordinator.coordinator import GroupCoordinator
from ...coordinator.group_admin import CLASSIC_GROUP_TYPE, CONSUMER_GROUP_TYPE
from ...coordinator.state import GroupState
from ..handlers import api_name
from ..metrics import LATENCY_BUCKETS
from ..state import BrokerState
from . import views

CONTENT_TYPE = CONTENT_TYPE_LATEST

# Every live state of each group type, so a dashboard sees zeros rather than gaps.
_STATES = {
    CLASSIC_GROUP_TYPE: [s.value for s in GroupState if s is not GroupState.DEAD],
    CONSUMER_GROUP_TYPE: [s.value for s in ConsumerGroupState if s is not ConsumerGroupState.DEAD],
}
_BUCKET_LABELS = [repr(b) for b in LATENCY_BUCKETS] + ["+Inf"]


class BrokerCollector(Collector):
    def __init__(
        self,
        state: BrokerState,
        coordinator: GroupCoordinator,
        open_connections: Callable[[], int],
        committed: views.CommittedOffsets,
    ) -> None:
        self.state = state
        self.coordinator = coordinator
        self.open_connections = open_connections
        self.committed = committed

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._traffic()
        yield from self._logs()
        yield from self._groups()
        connections = GaugeMetricFamily("slipstream_open_connections", "Kafka protocol connections open now.")
        connections.add_metric([], self.open_connections())
        yield connections
        ready = GaugeMetricFamily("slipstream_ready", "1 once __consumer_offsets is loaded, else 0.")
        ready.add_metric([], 1 if views.is_ready(self.coordinator) else 0)
        yield ready

    def _requests(self) -> Iterator[Metric]:
        labels = ["api", "version"]
        count = CounterMetricFamily("slipstream_requests", "Requests answered, per API and version.", labels=labels)
        latency = HistogramMetricFamily(
            "slipstream_request_latency_seconds",
            "Time from a request's decoding to its answer, per API and version.",
            labels=labels,
        )
        for (api_key, version), stats in sorted(self.state.metrics.requests.items()):
            values = [api_name(api_key), str(version)]
            count.add_metric(values, stats.count)
            cumulative = 0
            buckets = []
            for label, in_bucket in zip(_BUCKET_LABELS, stats.buckets, strict=True):
                cumulative += in_bucket
                buckets.append((label, cumulative))
            latency.add_metric(values, buckets, stats.seconds)
        yield count
        yield latency

    def _traffic(self) -> Iterator[Metric]:
        labels = ["topic"]
        families = {
            "bytes_in": CounterMetricFamily("slipstream_topic_bytes_in", "Bytes appended by producers.", labels=labels),
            "records_in": CounterMetricFamily(
                "slipstream_topic_records_in", "Records appended by producers.", labels=labels
            ),
            "bytes_out": CounterMetricFamily("slipstream_topic_bytes_out", "Bytes sent to fetchers.", labels=labels),
            "records_out": CounterMetricFamily(
                "slipstream_topic_records_out", "Records sent to fetchers.", labels=labels
            ),
        }
        for topic, traffic in sorted(self.state.metrics.topics.items()):
            for attribute, family in families.items():
                family.add_metric([topic], getattr(traffic, attribute))
        yield from families.values()

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("slipstream_log_size_bytes", "Bytes in a partition's log.", labels=labels)
        segments = GaugeMetricFamily("slipstream_log_segments", "Segments of a partition's log.", labels=labels)
        end = GaugeMetricFamily("slipstream_log_end_offset", "A partition's next offset.", labels=labels)
        start = GaugeMetricFamily("slipstream_log_start_offset", "A partition's first offset.", labels=labels)
        for name, topic in sorted(self.state.topics.topics.items()):
            for index, plog in enumerate(topic.partitions):
                values = [name, str(index)]
                size.add_metric(values, plog.size_bytes)
                segments.add_metric(values, views.segment_count(plog))
                end.add_metric(values, plog.log_end_offset)
                start.add_metric(values, plog.log_start_offset)
        yield from (size, segments, end, start)

    def _groups(self) -> Iterator[Metric]:
        summaries = views.group_summaries(self.coordinator)
        counts = {(t, s): 0 for t, states in _STATES.items() for s in states}
        for summary in summaries:
            key = (summary.group_type, summary.state)
            counts[key] = counts.get(key, 0) + 1
        groups = GaugeMetricFamily("slipstream_groups", "Groups by type and state.", labels=["type", "state"])
        for (group_type, state), n in sorted(counts.items()):
            groups.add_metric([group_type, state], n)
        yield groups
        labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "slipstream_consumer_group_lag",
            "Log end offset minus the group's committed offset, computed on the broker.",
            labels=labels,
        )
        committed = GaugeMetricFamily(
            "slipstream_consumer_group_committed_offset", "The group's committed offset.", labels=labels
        )
        for group_id in views.groups_with_offsets(self.coordinator, self.committed):
            for p in views.group_lag(self.state, self.committed, group_id):
                values = [group_id, p.topic, str(p.partition)]
                lag.add_metric(values, p.lag)
                committed.add_metric(values, p.committed)
        yield lag
        yield committed


def broker_registry(collector: BrokerCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
