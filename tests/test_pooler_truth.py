"""Verdicts behind a real PgBouncer in transaction pooling that must stay true: a server whose
connection slots another application holds is named as the refusal it is, never as a pool to
raise; a session named as the run's is the pool's, unless it runs the run's own statement (unit)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import psycopg
import pytest
from conftest import Cli
from pooler import PgBouncer, skip_reason

from pgmq_sim.embedded.postgres import LocalPostgres
from pgmq_sim.model.facts import lock_blocker
from pgmq_sim.model.identity import Whose, whose
from pgmq_sim.result.waits import BlockerSeen
from pgmq_sim.verdicts.lock_holders import blocker_text

HOGS = 10  # of max_connections 12: the pooler may open at most 2 server connections


def bouncer(server: LocalPostgres, pool_size: int = 20) -> PgBouncer:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    assert server.password is not None
    return PgBouncer("127.0.0.1", server.port, "postgres", server.password, "postgres", pool_size=pool_size)


@pytest.mark.faults  # a server of its own
@pytest.mark.parametrize("console", [True, False], ids=["pooler-admin", "without-console"])
def test_a_server_whose_slots_another_application_holds_is_the_limit_not_the_pool(
    tmp_path: Path, console: bool
) -> None:
    """Another application holds most of the server's slots: the pool of 20 gets at most two
    server connections for twelve workers. The limit names the server's refusal, max_connections and
    who holds the slots, and the fix is about the slots, never a pool size the pooler cannot fill."""
    settings = {"max_connections": "12", "superuser_reserved_connections": "0"}
    with (
        LocalPostgres(tcp=True, host="127.0.0.1", settings=settings) as server,
        contextlib.ExitStack() as held,
    ):
        for _ in range(HOGS):
            held.enter_context(psycopg.connect(server.dsn, application_name="hog", autocommit=True))
        with bouncer(server) as pooler:
            cli = Cli(pooler.dsn, tmp_path)
            result = cli.run(
                "-fill-db 600 -workers 12 -orders 12 -claim indexed -work-ms 0-1 -poll-interval 0.05",
                f"-pooler-admin {pooler.admin_dsn}" if console else "",
                "-json out.json",
            )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    limit = report["limit"]
    assert limit["resource"] == "pool", (limit, report["pooler"], report["advice"])
    assert "and the server refused it more: 2 slot(s) were left for the pooler" in limit["evidence"], limit
    assert (
        "max_connections = 12" in limit["evidence"] and f"{HOGS} by application 'hog'" in limit["evidence"]
    ), limit
    fix = next(line for line in report["advice"] if line.startswith("limit pool:"))
    assert "reserve slots for the pooler's role" in fix and "shrink what holds them" in fix, fix
    assert "raise the pooler's pool size" not in " ".join(report["advice"]), report["advice"]


@pytest.mark.faults  # a server of its own
def test_the_runs_own_pooled_backend_is_never_a_session_outside_the_run(tmp_path: Path) -> None:
    """Eight workers through a pool of three hold a row each while they work. The housekeeper asking
    who holds the rows is handed a backend a worker's transaction just left, and the server names
    it by the housekeeper's application_name: that backend is the run's pool's, never a session
    outside the run holding rows of the queue, nor one to end."""
    with LocalPostgres(tcp=True, host="127.0.0.1") as server, bouncer(server, pool_size=3) as pooler:
        cli = Cli(pooler.dsn, tmp_path)
        result = cli.run(
            "-fill-db 400 -workers 8 -orders 8 -claim indexed -work-ms 10-20 -poll-interval 0.05",
            "-json out.json",
        )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    holders = report["locks"]["holders"]
    assert not [h for h in holders if h["application"].startswith("pgmq-sim")], holders
    said = " ".join([report["limit"]["evidence"], *report["advice"]])
    assert "pgmq-sim housekeeper" not in said and "outside the run" not in said, said
    if not report["locks"]["pool_holdings"]:
        pytest.skip("no census sample saw a backend of the pool holding rows under the housekeeper's name")


@pytest.mark.unit
@pytest.mark.parametrize(
    "application,query,same_database,pooled,expected",
    [
        ("pgmq-sim housekeeper", "select ...", True, False, Whose.OURS),  # a session of its own: its name
        ("pgmq-sim housekeeper", "select ...", True, True, Whose.POOL),  # the last client's name only
        ("pgmq-sim w3", "select * from pgmq_sim_claim($1)", True, True, Whose.OURS),  # runs the run's
        ("report job", "select * from pgmq_sim_claim($1)", True, True, Whose.OUTSIDE),  # another's name
        ("pgmq-sim producer", "insert ...", False, False, Whose.OUTSIDE),  # another database's
        ("pgmq-sim pressure", "lock table msg_queue", True, False, Whose.OUTSIDE),  # stands for one outside
    ],
)
def test_whose_a_session_is_follows_the_paths_pooling(
    application: str, query: str, same_database: bool, pooled: bool, expected: Whose
) -> None:
    """Behind a transaction pooler a backend named as the run's is its pool's, unless what it runs
    now is the run's own statement; nothing is outside the run without another name or database."""
    assert whose(application, query, same_database, pooled) == expected


@pytest.mark.unit
def test_a_pooled_blocker_named_as_the_run_is_neither_outside_it_nor_said_to_be_its_own() -> None:
    """A blocker row of sql/lock_blockers.sql behind a transaction pooler: the backend's name is the
    last client's, so the blocker is not outside the run, and its text says whose is not known."""
    head = (101, "pgmq-sim w1", 202)
    row = (*head, "pgmq-sim housekeeper", "active", "tuple", "msg_queue", "", 0.1, "select 1", "", "")
    b = lock_blocker(row, transaction_pooled=True)
    assert b.ours
    seen = blocker_text(BlockerSeen(b.pid, b.application, b.state, b.ours, b.lock, b.target, b.mode, 1))
    assert "whose transaction, not known" in seen and "outside the run" not in seen, seen
    assert "the run's own" not in seen, seen
    assert not lock_blocker((*head, "report job", *row[4:]), transaction_pooled=True).ours
