"""The progress line's figures: a percent that never rounds up to done, and the ETA."""

from __future__ import annotations

import pytest

from pgmq_sim.render.progress import eta_text, floor_percent

pytestmark = pytest.mark.unit


def test_percent_never_rounds_up_to_done() -> None:
    assert floor_percent(996, 1000) == "99.6%"
    assert floor_percent(9999, 10000) == "99.9%"
    assert floor_percent(1000, 1000) == "100.0%"


def test_eta() -> None:
    assert eta_text(3600, 1.0) == "ETA 1:00:00"
    assert eta_text(0, 5.0) == "done"
    assert eta_text(10, 0.0) == "ETA -"
