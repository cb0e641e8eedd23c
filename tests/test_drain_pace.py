"""The agent's drain wait (actors/cluster/crew.py ``next_wait``): long only while nothing can change but a
visit ending, which returns a drain at once anyway."""

from __future__ import annotations

from raycrawl.actors.cluster.crew import DRAIN_WAIT, MAX_DRAIN_WAIT, next_wait

WAITING = {"in_flight": 0, "earliest": 1e9}  # a host due later (politeness)
FETCHING = {"in_flight": 3, "earliest": None}
EMPTY = {"in_flight": 0, "earliest": None}  # nothing scheduled: the crawl may be ending


def test_quiet_rounds_double_the_wait_up_to_the_bound() -> None:
    waits = [DRAIN_WAIT]
    for _ in range(6):
        waits.append(next_wait(waits[-1], False, [WAITING]))
    assert waits[:4] == [DRAIN_WAIT, 2 * DRAIN_WAIT, 4 * DRAIN_WAIT, 8 * DRAIN_WAIT]
    assert max(waits) == MAX_DRAIN_WAIT == waits[-1]
    assert next_wait(DRAIN_WAIT, False, [EMPTY, FETCHING]) == 2 * DRAIN_WAIT  # one fetcher busy is enough


def test_any_change_or_nothing_scheduled_brings_it_back() -> None:
    assert next_wait(MAX_DRAIN_WAIT, True, [WAITING]) == DRAIN_WAIT  # visits ended, or URLs moved
    assert next_wait(MAX_DRAIN_WAIT, False, [EMPTY]) == DRAIN_WAIT  # idle fetchers: check the end soon
    assert next_wait(MAX_DRAIN_WAIT, False, [EMPTY, EMPTY]) == DRAIN_WAIT


def test_a_quiet_round_after_the_first_never_makes_a_spin() -> None:
    """The crew's first drain waits 0 s (``Crew.first_wait``: nothing is in flight, and the first
    request waits on the step after it); a quiet round after it waits the shortest wait, not
    twice zero (a loop of Ray and Redis calls with no wait at all)."""
    assert next_wait(0.0, False, [WAITING]) == DRAIN_WAIT
