"""A small in-memory ring of consumer-lag samples per group, for the console's lag chart.

Pure: the admin listener's sampler calls ``record`` with the time and each group's lag
per partition (views.group_lag); readers ask ``document``. Each group keeps the last
``max_samples`` samples (default: 5 minutes at one sample a second), and at most
``max_groups`` groups are kept, so the ring stays bounded whatever clients do. Groups
that no longer report are dropped at the next sample. Lost on restart, by design: the
chart shows the last minutes, Prometheus keeps the long view.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_SAMPLES = 300
DEFAULT_MAX_GROUPS = 1_000


@dataclass(frozen=True, slots=True)
class LagSample:
    at_ms: int
    lag: dict[str, int]  # "topic-partition" -> lag


@dataclass
class LagHistory:
    max_samples: int = DEFAULT_MAX_SAMPLES
    max_groups: int = DEFAULT_MAX_GROUPS
    _rings: dict[str, deque[LagSample]] = field(default_factory=dict)

    def record(self, now_ms: int, lags: Mapping[str, Mapping[tuple[str, int], int]]) -> None:
        """One sample for each group in ``lags`` (group -> (topic, partition) -> lag)."""
        for gone in [g for g in self._rings if g not in lags]:
            del self._rings[gone]
        for group_id in sorted(lags)[: self.max_groups]:
            ring = self._rings.get(group_id)
            if ring is None:
                ring = self._rings[group_id] = deque(maxlen=self.max_samples)
            per_partition = {f"{t}-{p}": n for (t, p), n in sorted(lags[group_id].items())}
            ring.append(LagSample(now_ms, per_partition))

    def samples(self, group_id: str) -> list[LagSample]:
        return list(self._rings.get(group_id, ()))

    def document(self, group_id: str) -> dict[str, Any]:
        """``{"group_id", "partitions": [names], "samples": [{"at_ms", "lag": {name: n}}]}``."""
        samples = self.samples(group_id)
        names = sorted({name for s in samples for name in s.lag}, key=_partition_order)
        return {
            "group_id": group_id,
            "partitions": names,
            "samples": [{"at_ms": s.at_ms, "lag": s.lag} for s in samples],
        }


def _partition_order(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition("-")
    return (topic, int(partition)) if partition.isdigit() else (name, -1)
