"""The progress line's figures: a percent that never rounds up to done, the ETA, and what was
judged so far."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pgmq_sim.render.progress import RunProgress, eta_text, floor_percent
from pgmq_sim.result.audit import LiveAudit
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.window_limits import WindowLimit, WindowLimitTally

pytestmark = pytest.mark.unit


def test_percent_never_rounds_up_to_done() -> None:
    assert floor_percent(996, 1000) == "99.6%"
    assert floor_percent(9999, 10000) == "99.9%"
    assert floor_percent(1000, 1000) == "100.0%"


def test_eta() -> None:
    assert eta_text(3600, 1.0) == "ETA 1:00:00"
    assert eta_text(0, 5.0) == "done"
    assert eta_text(10, 0.0) == "ETA -"


def test_the_plain_line_says_the_audit_so_far_and_the_last_windows_limit() -> None:
    """Once a window closed, the line gives the audit so far and the last closed window's limit;
    before, neither."""
    tally = WindowLimitTally()
    audit: list[LiveAudit] = []
    figures = LiveFigures(
        [WorkerStats(name="w1", queue_type="type1")],
        None,
        lambda: 40,
        60.0,
        audit=lambda: audit[-1] if audit else None,
        limit=tally.last,
    )
    progress = RunProgress(Console(file=io.StringIO()), figures, "plain")
    assert progress.line(30, 12.0, 3.0) == "progress: 30 processed, 3 msg/s, backlog 10, 12 of 60 s"
    audit.append(LiveAudit(windows=2, through=25, checked=25))
    tally.add(WindowLimit(0, 10, "workers", "workers busy 97%", 12.0))
    tally.add(WindowLimit(10, 20, "locks", "pid 7 held AccessExclusiveLock on msg_queue", 900.0))
    assert progress.line(30, 12.0, 3.0).endswith(", audit ok 25 checked in 2 window(s), limit locks")
