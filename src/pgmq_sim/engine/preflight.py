"""What the check phase established before anything changed: the path, the server's timeouts, the
connection budget, the pooler's console, the design's trial and the workers' session plan. Made once
by engine/checking and never changed afterwards, so a reader knows none of it moves while the run
goes (what does move is in engine/state's RunState)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.actors.pgqd import Pgqd
from pgmq_sim.db.pooler import PoolerConsole
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.model.timeouts import ServerTimeouts
from pgmq_sim.result.serverpath import RunPath


@dataclass(frozen=True)
class Preflight:
    """The check's findings. `pooler` and `pgqd` are handles (a console reached, a daemon to start)
    kept for the whole run: the record holds them, the halt closes them."""

    path: RunPath  # the pooler mode, found or given, and what it changed
    timeouts: ServerTimeouts  # the server's timeouts for the run's role, and where each is set
    session: SessionPlan  # what the workers' sessions run: from the path, the timeouts and the design
    spare_connections: int | None = None  # what the server and the role allow beyond the run's own
    pool_server_room: int | None = None  # pooled: the slots left the pooler, its own included
    pooler: PoolerConsole | None = None  # -pooler-admin, reached
    id_type: str | None = None  # a folder design's own ids: their type, as its enqueue returns them
    product: dict[str, str] | None = None  # a built-in product's name and the version of its SQL run
    ticker: dict[str, Any] | None = None  # -queue pgq: a ticker already serving the database
    pgqd: Pgqd | None = None  # -queue pgq and no ticker serving: the one to start for the run
