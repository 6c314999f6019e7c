"""The lease renewal timing of a cluster member (broker/cluster/renewal.py), on a manual
clock: a broker busy committing keeps its own leases (issue 16)."""

from __future__ import annotations

from slipstream.broker.cluster.renewal import MIN_TIMEOUT_MS, RenewalSchedule

SESSION_MS = 6000  # the default cluster.broker.session.ms: a beat every 2000 ms
IDLE_TIMEOUT_MS = 2000


def schedule() -> RenewalSchedule:
    return RenewalSchedule(SESSION_MS, idle_timeout_ms=IDLE_TIMEOUT_MS)


def test_before_the_first_renewal_a_beat_is_due_at_once_and_nothing_expires() -> None:
    s = schedule()
    assert s.wait_ms(0) == 0
    assert s.timeout_ms(0) == IDLE_TIMEOUT_MS
    assert not s.expired(10**9)


def test_the_next_beat_is_due_an_interval_after_the_last_renewal_was_sent() -> None:
    s = schedule()
    s.renewed(10_000)
    assert s.interval_ms == 2000
    assert s.wait_ms(10_000) == 2000
    # The rest of that heartbeat (reloads, topic and ACL refresh) took 1500 ms: the next
    # beat is not pushed back by it.
    assert s.wait_ms(11_500) == 500
    assert s.wait_ms(12_700) == 0


def test_a_renewal_may_wait_until_the_leases_would_expire() -> None:
    """The beat's UPDATE of the lease rows waits for a lock on them (a claim racing it, a
    FOR SHARE lease check of a broker from before schema version 6); given up after a third
    of the session, the next try came a third later and the leases had expired - one wait
    that long cost the broker all its leases."""
    s = schedule()
    s.renewed(0)
    assert s.timeout_ms(2000) == 4000  # not the interval
    # The commit ends at 5000: the beat sent at 2000 is answered then.
    s.renewed(2000)
    assert not s.expired(5000)
    assert s.deadline_ms() == 8000
    assert s.wait_ms(5000) == 0  # due since 4000: the next renewal goes at once


def test_the_leases_count_from_when_the_renewal_was_sent() -> None:
    """The database extends them from a moment after the beat was sent, so this broker
    never believes it holds a lease longer than the database does."""
    s = schedule()
    s.renewed(1000)  # answered at, say, 3500
    assert not s.expired(6999)
    assert s.expired(7000)


def test_a_failed_beat_is_retried_soon_with_what_is_left_of_the_leases() -> None:
    s = schedule()
    s.renewed(0)
    s.failed(2300)  # the database refused (restarting)
    assert s.wait_ms(2300) == 500
    assert s.timeout_ms(2800) == 3200
    assert s.timeout_ms(5950) == MIN_TIMEOUT_MS
    assert not s.expired(5999)
    assert s.expired(6000)  # then the member stops serving its partitions
    s.renewed(6500)
    assert not s.expired(6500)
    assert s.wait_ms(6500) == 2000


def test_once_the_leases_expired_a_beat_gets_the_idle_timeout_and_interval() -> None:
    """Nothing is at stake any more: a database slow to come back is given time."""
    s = schedule()
    s.renewed(0)
    s.failed(6000)
    assert s.timeout_ms(6500) == IDLE_TIMEOUT_MS
    assert s.wait_ms(6000) == 2000  # and a database that is down is not asked more often


def test_a_failed_first_beat_is_retried_after_the_interval() -> None:
    s = schedule()
    s.failed(0)
    assert s.wait_ms(0) == 2000
    assert s.timeout_ms(2000) == IDLE_TIMEOUT_MS


def test_a_member_whose_commits_hold_the_lease_rows_keeps_them() -> None:
    """A broker beating on this schedule while its commits hold the lease rows (a commit
    starting every 4.1 s, each holding them ``hold_ms``) renews every time as long as a
    commit holds them less than ``session - interval``: a beat sent while one runs is
    answered when it ends, before the leases it renews expire."""
    for hold_ms in (0, 500, 2500, 3900):
        commits = [(start, start + hold_ms) for start in range(100, 100_000, 4100)]
        s = schedule()
        s.renewed(0)
        now = 0
        for _ in range(30):
            now += s.wait_ms(now)
            sent = now
            answered = max((end for start, end in commits if start <= sent < end), default=sent) + 5
            assert answered - sent < s.timeout_ms(sent), (hold_ms, sent)  # not given up
            assert not s.expired(answered), (hold_ms, sent)  # the leases were still held
            s.renewed(sent)
            now = answered
