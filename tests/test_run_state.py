"""A run's state: every note, whichever part records it, goes one way (the report's list and the
log, on screen unless kept for the summary)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from builders import settings

from pgmq_sim.cli.plan import run_input
from pgmq_sim.engine.bounded import Signals
from pgmq_sim.engine.state import RunState
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import Server

DSN = "postgresql://tester:s3cret@127.0.0.1:1/nothing"  # never reached: nothing here connects


class Screen:
    """What the person running the tool would see."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, line: str) -> None:
        self.lines.append(line)

    def watching(self, figures: LiveFigures) -> None: ...

    def tick(self) -> None: ...

    def stopped_watching(self) -> None: ...


def logged(log: RunLog, path: Path) -> list[str]:
    log.open()
    log.close()
    return path.read_text().splitlines()


@pytest.mark.unit
def test_the_plans_notes_and_the_meters_note_are_recorded_as_every_note_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's notes (here -batch with a claim that takes one message) and a failed reading of the
    server's statistics are in the report's list and the log, and kept off the screen for the
    summary; a note said as it happens is also on screen."""
    given = run_input(settings(claim="seed", batch=4))
    assert given.notes  # the plan said something
    path = tmp_path / "run.log"
    log, screen = RunLog(str(path)), Screen()
    state = RunState(given, Server(DSN, "test", False), screen, log, Signals())
    assert state.notes == list(given.notes)

    def refused() -> None:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(state.views, "counters", refused)
    assert state.meters.counters() is None
    state.note("said now")
    unread = "server statistics not read: connection refused"
    assert state.notes == [*given.notes, unread, "said now"]
    assert screen.lines == ["note: said now"]
    lines = logged(log, path)
    for note in state.notes:
        assert sum(line.endswith(f"note: {note}") for line in lines) == 1, (note, lines)
    assert not any("s3cret" in line for line in [*lines, *state.notes])
