"""The limit judged window by window as the run goes (engine/limit_watch): what a window owes and
offers, and the stretches the run keeps of its windows."""

from __future__ import annotations

import pytest
from builders import settings

from pgmq_sim.engine.steps import due_between, offered_between
from pgmq_sim.model.quantities import ms_text
from pgmq_sim.render.lines import window_limits_text
from pgmq_sim.result.window_limits import WindowLimit, WindowLimitTally, usual

pytestmark = pytest.mark.unit


def test_a_window_owes_what_fell_due_a_second_before_its_edges_and_nothing_past_the_runs_end() -> None:
    """A window's edge cuts the writes of its last second: the producer owes it what fell due a
    second earlier (the run's own rule for on time); and the run's last window, which its end cuts
    short, owes nothing that would fall due after the run, nor offers it."""
    at_200 = settings(rate=200, duration=12, fill_db=None)
    assert due_between(at_200, 3, 6) == pytest.approx(600, abs=1)
    assert due_between(at_200, 0, 3, 1.0) == pytest.approx(400, abs=1)  # the first: due by 2 s
    assert due_between(at_200, 9.2, 12.24) == pytest.approx(200 * (12 - 9.2), abs=1)
    assert due_between(at_200, 9.2, 12.24, 1.0) == pytest.approx(200 * (11 - 8.2), abs=1)  # written to 12 s
    assert offered_between(at_200, 9.2, 12.24) == pytest.approx(200, rel=0.01)  # not 184/s


def test_window_limits_of_one_resource_in_a_row_are_one_stretch_with_its_worst_windows_evidence() -> None:
    """The live limit's tally: windows of one limit in a row merge into a stretch that keeps its
    worst window's p99 and evidence; the summary names the limit of most of the time and lists each
    stretch of another, with its time."""
    tally = WindowLimitTally()
    for window in (
        WindowLimit(0, 10, "workers", "workers busy 91%", 10.0),
        WindowLimit(10, 20, "workers", "workers busy 97%", 30.0),
        WindowLimit(20, 30, "locks", "pid 7 (nightly report) held AccessExclusiveLock", 5000.0),
        WindowLimit(30, 40, "locks", "pid 7 again", 2000.0),
        WindowLimit(40, 50, "workers", "no message completed", None),
    ):
        tally.add(window)
    stretches = tally.stretches()
    assert [(s.from_s, s.to_s, s.windows, s.resource) for s in stretches] == [
        (0, 20, 2, "workers"),
        (20, 40, 2, "locks"),
        (40, 50, 1, "workers"),
    ]
    assert (stretches[0].evidence, stretches[0].p99_ms) == ("workers busy 97%", 30.0)
    assert (stretches[1].evidence, stretches[1].p99_ms) == (
        "pid 7 (nightly report) held AccessExclusiveLock",
        5000.0,
    )
    last = tally.last()
    assert last is not None and last.to_s == 50
    assert usual(stretches) == "workers"
    assert window_limits_text(stretches).splitlines() == [
        "workers in 60% of the run's time (3 windows); in the others:",
        f"from 20 s to 40 s (2 windows, p99 {ms_text(5000.0)}): locks: pid 7 (nightly report) held"
        " AccessExclusiveLock",
    ]
    assert window_limits_text(stretches[:1]) == "workers in every window (2)"
    assert usual(()) is None
