"""Test helper: values the unit tests build, with one place for their defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from pgmq_sim.settings import Settings, WorkTime


def settings(**changes: Any) -> Settings:
    """The seed's settings (6 workers, 1-10 ms of work, two orders), with these changes."""
    base = Settings(
        dsn=None,
        delmsg=False,
        fill_db=1000,
        logfile="-",
        rate=0.0,
        schema=None,
        next_msg=None,
        workers=6,
        work=WorkTime(1, 10),
        orders=2,
        poll_interval=1.0,
        seed=1,
    )
    return dataclasses.replace(base, **changes)
