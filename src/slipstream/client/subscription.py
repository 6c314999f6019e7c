"""Pattern subscription: which of the cluster's topics a regular expression selects.

Like the Java client's ``subscribe(Pattern)``: a topic is selected when the whole
name matches (``re.fullmatch``), internal topics (``__consumer_offsets``) are left
out, and the selection is re-evaluated on every metadata refresh so topics created
later join the subscription (and deleted ones leave it) with a rebalance.
This module is sans-I/O; the consumer runtime (consumer_runtime.py) runs the refresh loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .cluster import TopicInfo


class TopicPattern:
    """A compiled subscription pattern and the topics it selects."""

    def __init__(self, pattern: re.Pattern[str] | str) -> None:
        self.regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)

    def select(self, names: Iterable[str]) -> tuple[str, ...]:
        """The names the pattern matches in full, sorted (what the member subscribes to)."""
        full = self.regex.fullmatch
        return tuple(sorted(n for n in set(names) if full(n)))

    def select_from(self, topics: Mapping[str, TopicInfo]) -> tuple[str, ...]:
        """As :meth:`select` over a metadata answer, skipping internal and errored topics."""
        return self.select(
            name for name, info in topics.items() if info.error_code == 0 and not info.is_internal
        )

    def __repr__(self) -> str:
        return f"TopicPattern({self.regex.pattern!r})"
