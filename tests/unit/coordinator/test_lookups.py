"""RecentLookups: distinct connections per group within a sliding horizon, bounded memory."""

from __future__ import annotations

from slipstream.coordinator.lookups import RecentLookups


def test_counts_distinct_connections_since_a_time() -> None:
    lookups = RecentLookups(horizon_ms=100)
    lookups.note("g", "a", 0)
    lookups.note("g", "a", 10)  # the same connection again counts once
    lookups.note("g", "b", 20)
    lookups.note("other", "c", 20)
    assert lookups.connections_since("g", 0, 20) == 2
    assert lookups.connections_since("g", 15, 20) == 1  # only b looked up since 15
    assert lookups.connections_since("other", 0, 20) == 1
    assert lookups.connections_since("unknown", 0, 20) == 0


def test_entries_older_than_the_horizon_are_dropped() -> None:
    lookups = RecentLookups(horizon_ms=100)
    lookups.note("g", "a", 0)
    lookups.note("g", "b", 50)
    assert lookups.connections_since("g", -1_000, 120) == 1  # a (t=0) is past the horizon
    lookups.note("h", "c", 1_000)
    assert len(lookups) == 1
    assert lookups.connections_since("g", -1_000, 1_000) == 0


def test_a_repeated_lookup_keeps_the_connection_counted_until_its_latest_expires() -> None:
    lookups = RecentLookups(horizon_ms=100)
    lookups.note("g", "a", 0)
    lookups.note("g", "a", 80)
    assert lookups.connections_since("g", 0, 150) == 1  # the t=0 entry expired, t=80 did not


def test_memory_is_bounded_by_the_horizon() -> None:
    lookups = RecentLookups(horizon_ms=100)
    for t in range(10_000):
        lookups.note(f"group-{t}", f"conn-{t}", t)
    assert len(lookups) <= 101


def test_a_zero_horizon_keeps_nothing() -> None:
    lookups = RecentLookups(horizon_ms=0)
    lookups.note("g", "a", 0)
    assert len(lookups) == 0 and lookups.connections_since("g", 0, 0) == 0


def test_a_flood_within_the_horizon_is_capped() -> None:
    lookups = RecentLookups(horizon_ms=3_000, max_entries=1_000)
    for i in range(50_000):  # one client naming 50,000 groups in one instant
        lookups.note(f"group-{i}", "flooder", 0)
    assert len(lookups) == 1_000
    assert lookups.connections_since("group-0", 0, 0) == 0  # the oldest went first
    assert lookups.connections_since("group-49999", 0, 0) == 1
