"""Real queues as they are (issue 40): the Go tool's own files unchanged, a team's statements run
verbatim with the design's own ids, every file tried before the run, and the real pgmq and PgQ
under the audit."""

from __future__ import annotations

import json
import shutil

import psycopg
import pytest
from conftest import REPO, Cli, assert_one_line_error

pytestmark = pytest.mark.integration

# The Go tool's schema.sql as its repository has it: no payload column, no drop.
GO_SCHEMA = "\n".join(
    [
        "create table msg_queue(",
        "msg_id integer not null,",
        "queue_type varchar(10) not null, -- type1, type2 ...",
        "status varchar(1) not null, -- N (new), P (processed)",
        "order_id integer not null, -- records with same order_id and queue_type have to be handled in"
        " correct order, 1,2,3,4...",
        "time_added timestamp with time zone not null,",
        "time_processed timestamp with time zone",
        ");",
        "create unique index msg_queue_uniq_msg_id on msg_queue(msg_id);",
        "create index msg_queue_time_added on msg_queue(time_added);",
        "",
    ]
)


def report(cli: Cli, name: str) -> dict:
    return json.loads((cli.workdir / name).read_text())


@pytest.mark.parametrize("rate", ["", "-rate 400"], ids=["prefilled", "paced"])
def test_the_go_tools_own_files_run_unchanged(cli: Cli, db: psycopg.Connection, rate: str) -> None:
    (cli.workdir / "schema.sql").write_text(GO_SCHEMA)
    shutil.copy(REPO / "next_msg.sql", cli.workdir / "next_msg.sql")
    result = cli.run(f"-fill-db 300 -workers 6 -work-ms 0-1 -poll-interval 0.05 {rate} -json g.json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = report(cli, "g.json")
    assert doc["audit"]["verdict"] == "pass" and doc["audit"]["processed"] == 300
    assert doc["files"]["schema"]["origin"] == "current directory"
    columns = {
        r[0] for r in db.execute("select attname from pg_attribute where attrelid = 'msg_queue'::regclass")
    }
    assert "payload" not in columns
    # -payload-bytes needs the column: one line, before anything changes (the last run's queue kept)
    again = cli.run("-fill-db 30 -workers 3 -payload-bytes 100")
    assert_one_line_error(again, 2, "-payload-bytes needs a payload column", "schema.sql")
    assert db.execute("select count(*) from msg_queue where status = 'P'").fetchone()[0] == 300
