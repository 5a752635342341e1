"""-queue pgq's ticker: one already serving the database, or pgqd started for the run (PgQ hands
out nothing between ticks)."""

from __future__ import annotations

from typing import Any

from pgmq_sim.actors.pgqd import TICKER_PERIOD_S, Pgqd, pgqd_binary
from pgmq_sim.engine.bounded import call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import UsageError
from pgmq_sim.model.quantities import count_text


def find_ticker(state: RunState) -> tuple[dict[str, Any] | None, Pgqd | None]:
    """-queue pgq: a ticker already serving the database is used (and said); else pgqd is started
    for the run once the queues exist (refused here, before anything changes, without pgqd).
    Returned: the ticker serving (its report), or the pgqd to start."""
    database, tickers = call_bounded(state.db.pgq_ticker, 30, state.signals, "ticker check", True)
    if tickers:
        state.note(
            f"pgq: a ticker already serves database {database} ({count_text(tickers)} session(s) running"
            " pgq.ticker): it is used, and no pgqd is started"
        )
        return {"started_by": "already serving the database", "sessions": tickers}, None
    if pgqd_binary() is None:
        raise UsageError(
            "-queue pgq needs a ticker (PgQ hands out nothing between ticks): install Debian's pgqd"
            " package, or run pgqd for this database yourself"
        )
    return None, Pgqd(state.server.dsn, database)


def start_ticker(state: RunState) -> None:
    """pgqd for the run (its settings and the queues' in the report)."""
    assert state.preflight is not None
    pgqd = state.preflight.pgqd
    state.ticker = state.preflight.ticker
    if pgqd is not None:
        call_bounded(pgqd.start, 30, state.signals, "starting pgqd")
        state.ticker = pgqd.settings
        state.log.event(f"pgqd started for database {pgqd.database} (ticker period {TICKER_PERIOD_S:g} s)")
    if state.ticker is not None:
        queues = call_bounded(state.db.pgq_queue_settings, 30, state.signals, "queue settings")
        state.ticker = state.ticker | {"queues": queues}
