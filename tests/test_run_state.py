"""A run's state: every note, whichever part records it, goes one way (the report's list and the
log, on screen unless kept for the summary); what the check established is a record set once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psycopg
import pytest
from builders import settings

from pgmq_sim.actors.worker import session_plan
from pgmq_sim.cli.plan import run_input
from pgmq_sim.engine.bounded import Signals
from pgmq_sim.engine.checking import team_timeouts
from pgmq_sim.engine.preflight import Preflight
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.facts import PathFacts
from pgmq_sim.model.kinds import PoolerMode
from pgmq_sim.model.timeouts import ServerSetting, ServerTimeouts
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.result.serverpath import RunPath
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


@pytest.mark.unit
def test_the_checks_record_is_made_once_and_holds_the_session_plan_it_was_made_from() -> None:
    """A run's state has no record before the check passes (a refused or interrupted check leaves
    none); the record cannot be changed once made, and its session plan keeps the role's statement
    and lock timeouts that are on, no other."""
    given = run_input(settings())
    state = RunState(given, Server(DSN, "test", False), Screen(), RunLog("-"), Signals())
    assert state.preflight is None
    timeouts = ServerTimeouts(
        "tester",
        "nothing",
        (
            ServerSetting("statement_timeout", 3000, "3s", "user"),
            ServerSetting("lock_timeout", 0, "0", "default"),
            ServerSetting("idle_session_timeout", 1000, "1s", "database"),
        ),
    )
    facts = PathFacts(PoolerMode.NONE, "no pooler", None, False, True, 170000)
    team = team_timeouts(timeouts)
    assert team == (("statement_timeout", 3000),)
    state.preflight = preflight = Preflight(
        RunPath(PoolerMode.NONE, True, (), facts),
        timeouts,
        session_plan(given.settings, given.design, team_timeouts=team),
        spare_connections=12,
    )
    assert preflight.session.team_timeouts == team and preflight.pooler is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        preflight.spare_connections = 0  # type: ignore[misc]
    assert state.preflight.spare_connections == 12
