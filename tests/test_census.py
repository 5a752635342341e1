"""The server's settings that shape a queue, read before the run with where each is set, and used by
the verdicts: autovacuum off by ALTER SYSTEM and synchronous_commit off on the role, on a server of
the test's own (issue 43, case 3)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest
from conftest import Cli

from pgmq_sim.embedded.postgres import LocalPostgres

pytestmark = pytest.mark.faults  # a server of its own, reconfigured (ALTER SYSTEM)


def test_settings_set_on_the_server_and_the_role_are_named_where_they_are_set(
    own_pg: LocalPostgres, tmp_path: Path
) -> None:
    with psycopg.connect(own_pg.dsn, autocommit=True) as db:
        db.execute("alter system set autovacuum = off")
        db.execute("select pg_reload_conf()")
        role = db.execute("select current_user").fetchone()[0]
        db.execute(f'alter role "{role}" set synchronous_commit = off')
        deadline = time.monotonic() + 10
        while db.execute("show autovacuum").fetchone()[0] != "off" and time.monotonic() < deadline:
            time.sleep(0.05)
    cli = Cli(own_pg.dsn, tmp_path)
    result = cli.run("-claim indexed -duration 3 -rate 300 -workers 3 -work-ms 0-1 -delmsg -json c.json -v")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    census = doc["server_settings"]
    off = census["autovacuum_off"]
    assert off.startswith("autovacuum = off (the server's configuration file (") and "auto.conf" in off, off
    assert census["settings"]["autovacuum"]["source"] == "configuration file"
    sync = census["synchronous_commit_off"]
    assert sync.startswith(f"synchronous_commit = off (ALTER ROLE {role} SET): commits do not wait"), sync
    assert census["settings"]["autovacuum_naptime"]["value"] and census["read_ms"] < 5000
    (named,) = [a for a in doc["advice"] if a.startswith(f"autovacuum off ({off}): dead tuples ")]
    assert "MB per hour; nothing reclaims them" in named
    out = " ".join(result.stdout.split())
    assert "server settings" in out and "synchronous_commit = off (ALTER ROLE" in out  # a row, wrapped
