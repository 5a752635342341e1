"""Test helper: values the unit tests build, with one place for their defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from pgmq_sim.cli.options import RUN
from pgmq_sim.cli.plan import settings_of
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.settings import Settings


def settings(**changes: Any) -> Settings:
    """The seed's settings (6 workers, 1-10 ms of work, two orders), with these changes (by field;
    a choice may be given as its text). Built as a run builds them: from the options' defaults."""
    options = {o.param: o.default for o in RUN} | {"fill_db": 1000, "logfile": "-", "workers": 6, "seed": 1}
    by_field = {o.field: o for o in RUN if o.field is not None}
    typed = {
        key: by_field[key].value(by_field[key].checked(value))
        if key in by_field and isinstance(by_field[key].choices, type) and isinstance(value, str)
        else value
        for key, value in changes.items()
    }
    return dataclasses.replace(settings_of(options), **typed)


def enqueue(tally: EnqueueTally, session_s: float, group_s: float, server_s: float) -> None:
    """One enqueue, due at 0, by its parts: waiting for a session, for its group, the round trip."""
    ready = group_s
    sent = ready + session_s
    tally.add([(sent, sent + server_s, ready, 0.0)])
