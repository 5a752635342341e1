"""Real queues as they are (issue 40): the Go tool's own files unchanged, a team's statements run
verbatim with the design's own ids, every file tried before the run, and the real pgmq and PgQ
under the audit."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from conftest import REPO, Cli, assert_one_line_error
from psycopg import conninfo

from pgmq_sim.embedded.postgres import LocalPostgres

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


@pytest.mark.integration
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


# graphile-worker's shape: a jobs table and a named-queues table; the claim locks a job's queue,
# then, in a second data-modifying CTE, marks the queue locked and updates the job (get_job's form).
NAMED_QUEUES = {
    "schema.sql": """
        drop table if exists jobs;
        drop table if exists job_queues;
        create table job_queues (queue_name text primary key, locked_at timestamptz, locked_by text);
        create table jobs (
            id bigint primary key,
            task text not null,
            grp bigint not null,
            queue_name text not null references job_queues,
            attempts int not null default 0,
            done boolean not null default false
        );
        create index jobs_pending on jobs (queue_name, id) where not done;
    """,
    "enqueue.sql": """
        with q as (insert into job_queues (queue_name) values ($2 || ':' || $3) on conflict do nothing)
        insert into jobs (id, task, grp, queue_name) values ($1, $2, $3, $2 || ':' || $3)
    """,
    "claim.sql": """
        with j as (
            select jobs.id, jobs.queue_name from jobs
            join job_queues q on q.queue_name = jobs.queue_name
            where jobs.task = $1 and not jobs.done and q.locked_at is null
              and jobs.id = (select min(h.id) from jobs h where h.queue_name = jobs.queue_name and not h.done)
            order by jobs.id
            limit $2
            for update skip locked
        ),
        q as (
            update job_queues set locked_at = now(), locked_by = 'worker'
            from j where job_queues.queue_name = j.queue_name
        )
        update jobs set attempts = attempts + 1 from j where jobs.id = j.id
        returning jobs.id as msg_id, jobs.task as queue_type, jobs.grp as order_id
    """,
    "complete.sql": """
        with d as (update jobs set done = true where id = $1 returning queue_name)
        update job_queues set locked_at = null, locked_by = null
        from d where job_queues.queue_name = d.queue_name
    """,
    "pending.sql": "select id from jobs where not done",
}


def write_folder(cli: Cli, name: str, files: dict[str, str]) -> None:
    where = cli.workdir / name
    where.mkdir()
    for file, text in files.items():
        (where / file).write_text(text)


@pytest.mark.integration
def test_a_claim_with_data_modifying_ctes_runs_as_written(cli: Cli, db: psycopg.Connection) -> None:
    write_folder(cli, "named", NAMED_QUEUES)
    result = cli.run("-queue ./named -fill-db 300 -workers 6 -work-ms 0-2 -orders 10 -json n.json")
    assert result.returncode == 0, result.stdout + result.stderr
    audit = report(cli, "n.json")["audit"]
    assert (audit["verdict"], audit["processed"], audit["order_checked"]) == ("pass", 300, True), audit
    assert db.execute("select count(*) from job_queues where locked_at is not null").fetchone()[0] == 0
    assert db.execute("select count(*), sum(attempts) from jobs where done").fetchone() == (300, 300)


@pytest.mark.integration
def test_a_broken_pending_sql_is_refused_before_the_run(cli: Cli, db: psycopg.Connection) -> None:
    write_folder(cli, "named", NAMED_QUEUES | {"pending.sql": "truncate jobs"})
    result = cli.run("-queue ./named -fill-db 50 -workers 3")
    assert_one_line_error(result, 2, "pending.sql of", 'syntax error at or near "truncate"')
    assert db.execute("select to_regclass('jobs')").fetchone()[0] is None  # nothing changed
    assert not (cli.workdir / "msg_queue.log").exists()


@pytest.mark.integration
def test_an_audit_that_cannot_run_says_why_and_fails_the_run(cli: Cli) -> None:
    """pending.sql runs in the trial (one message) and fails at the end (300): the run exits 1, not 0,
    with the server's message, and -no-audit is the way to ask for a run without it."""
    failing = (
        "select id from jobs where not done"
        " and 1 / (case when (select count(*) from jobs) > 10 then 0 else 1 end) = 1"
    )
    write_folder(cli, "named", NAMED_QUEUES | {"pending.sql": failing})
    result = cli.run("-queue ./named -fill-db 60 -workers 3 -work-ms 0 -orders 10 -json a.json")
    assert result.returncode == 1, result.stdout + result.stderr
    doc = report(cli, "a.json")
    assert doc["audit"] is None and "division by zero" in doc["audit_skipped"], doc["audit_skipped"]
    assert "not run: division by zero" in " ".join(result.stdout.split())
    assert cli.run("-queue ./named -fill-db 60 -workers 3 -work-ms 0 -orders 10 -no-audit").returncode == 0


# The outbox with ids of its own: a sequence (starting far from the tool's numbers) or uuid keys with
# a sequence for the order; the enqueue returns the id, and every statement takes it.
OWN_IDS = {
    "bigserial": {
        "schema.sql": """
            drop table if exists outbox;
            create table outbox (
                id bigint generated always as identity (start with 5000) primary key,
                topic text not null, customer bigint not null, phase text not null default 'new',
                due timestamptz not null
            );
            create index outbox_new on outbox (topic, customer, id) where phase = 'new';
        """,
        "order": "id",
    },
    "uuid": {
        "schema.sql": """
            drop table if exists outbox;
            create table outbox (
                id uuid primary key default gen_random_uuid(), seq bigserial not null unique,
                topic text not null, customer bigint not null, phase text not null default 'new',
                due timestamptz not null, error text
            );
            create index outbox_new on outbox (topic, customer, seq) where phase = 'new';
        """,
        "order": "seq",
    },
}


def own_ids_folder(kind: str) -> dict[str, str]:
    order = OWN_IDS[kind]["order"]
    return {
        "schema.sql": OWN_IDS[kind]["schema.sql"],
        "enqueue.sql": "insert into outbox (topic, customer, due) values ($2, $3, $5) returning id as msg_id",
        "claim.sql": f"""
            with picked as (
                select o.id from outbox o
                where o.topic = $1 and o.phase = 'new' and o.due <= clock_timestamp()
                  and not exists (select 1 from outbox e where e.topic = o.topic and e.customer = o.customer
                                  and e.phase = 'new' and e.{order} < o.{order})
                order by o.{order} limit $2
                for update skip locked
            )
            update outbox o set phase = 'sending' from picked where o.id = picked.id
            returning o.id as msg_id, o.topic as queue_type, o.customer as order_id
        """,
        "complete.sql": "update outbox set phase = 'sent' where id = $1",
        "fail.sql": (  # a dead letter leaves its group: only 'new' messages keep a group waiting
            "update outbox set phase = case when $4::timestamptz is null then 'dead' else 'new' end,"
            " due = coalesce($4, due), error = $3 where id = $1"
        ),
        "pending.sql": "select id from outbox where phase not in ('sent', 'dead')",
    }


@pytest.mark.integration
@pytest.mark.parametrize(
    ("kind", "flags"),
    [("bigserial", "-rate 300"), ("uuid", "-fail-rate 0.1 -max-attempts 2 -backoff-ms 5 -tx single")],
)
def test_the_designs_own_ids_returned_by_its_enqueue(
    cli: Cli, db: psycopg.Connection, kind: str, flags: str
) -> None:
    files = own_ids_folder(kind)
    if kind == "bigserial":
        del files["fail.sql"]
        files["schema.sql"] = files["schema.sql"].replace(", error text", "")
    write_folder(cli, "outbox", files)
    result = cli.run(f"-queue ./outbox -fill-db 200 -workers 6 -work-ms 0-1 -orders 10 {flags} -json k.json")
    assert result.returncode == 0, result.stdout + result.stderr
    audit = report(cli, "k.json")["audit"]
    assert audit["verdict"] == "pass" and audit["processed"] + audit["dead_lettered"] == 200, audit
    assert audit["duplicates"] == audit["missing"] == audit["order_violations"] == 0
    # the team's ids are its own; the tool's numbers 1..200 map to them, and the journal keeps the tool's
    mapped = db.execute(
        "select count(*), min(e.msg_id), max(e.msg_id) from pgmq_sim_enqueued e"
        " join outbox o on o.id::text = e.design_id"
    ).fetchone()
    assert mapped == (200, 1, 200)
    assert (
        db.execute("select count(*) from msg_journal where msg_id between 1 and 200").fetchone()[0]
        == (audit["processed"])
    )
    if kind == "bigserial":
        assert db.execute("select min(id) from outbox").fetchone()[0] >= 5000
    else:
        assert audit["failed_attempts"] > 0


@pytest.mark.integration
def test_the_real_pgmq_keeps_order_under_12_workers_and_archives(cli: Cli, db: psycopg.Connection) -> None:
    from pgmq.install import get_embedded_sql_version

    version = get_embedded_sql_version()
    result = cli.run(
        "-queue pgmq -archive -fill-db 150 -rate 300 -workers 12 -orders 10 -work-ms 0-2"
        " -wakeup notify -poll-interval 0.5 -json q.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = report(cli, "q.json")
    audit = doc["audit"]
    assert (audit["verdict"], audit["processed"], audit["order_checked"]) == ("pass", 150, True), audit
    assert audit["duplicates"] == audit["order_violations"] == 0 and audit["delivery"] == "at-least-once"
    said = " ".join(result.stdout.split())
    assert f"pgmq: {version}, the pgmq package's SQL" in said  # installed from the package, not a copy
    # one pgmq queue per type, every message archived by pgmq.archive, none left in a queue
    archived = sum(db.execute(f"select count(*) from pgmq.a_type{i}").fetchone()[0] for i in (1, 2, 3))
    left = sum(db.execute(f"select count(*) from pgmq.q_type{i}").fetchone()[0] for i in (1, 2, 3))
    assert (archived, left) == (150, 0)
    # pgmq's own insert notification woke the workers: claims made on a notification took messages,
    # more than the 0.5 s poll's did, and the notifications came from the run's own producer (known
    # by its pid, though it may have ended before the listener named it)
    claims = doc["claims"]
    assert claims["took"]["notified"] >= 10 and claims["took"]["notified"] > claims["took"]["poll"], claims
    assert claims["senders"] and all(s["own"] is True for s in claims["senders"]), claims["senders"]
    assert claims["inflated_by_outside"] is False
    # the next run finds the tool's install and says so; round-robin reads keep order too
    again = cli.run("-queue pgmq-rr -fill-db 120 -workers 12 -orders 10 -work-ms 0-2 -json r.json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"pgmq: {version} (the pgmq package's SQL), installed by an earlier run" in " ".join(
        again.stdout.split()
    )
    assert report(cli, "r.json")["audit"]["verdict"] == "pass"


def pgq_bindir() -> Path | None:
    """A distribution PostgreSQL with PgQ's extension installed beside it (Debian's postgresql-NN-pgq3)."""
    for bindir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: -int(p.parent.name)):
        if (bindir / "postgres").is_file() and Path(
            f"/usr/share/postgresql/{bindir.parent.name}/extension/pgq.control"
        ).is_file():
            return bindir
    return None


def pgq_skip_reason() -> str | None:
    if pgq_bindir() is None:
        return "no PostgreSQL with PgQ (apt-get install -y postgresql-15-pgq3; .ci/run does as root)"
    if shutil.which("pgqd") is None:
        return "no pgqd, PgQ's ticker (apt-get install -y pgqd; .ci/run does as root)"
    return None


@pytest.mark.integration
def test_without_pgq_on_the_server_one_line_names_the_package(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run("-queue pgq -fill-db 10 -workers 3")  # the embedded server: no PgQ
    assert_one_line_error(result, 2, "postgresql-NN-pgq3", "pgqd")
    assert db.execute("select to_regclass('pgmq_sim_pgq_events')").fetchone()[0] is None


@pytest.mark.faults  # a server of its own
@pytest.mark.skipif(pgq_skip_reason() is not None, reason=pgq_skip_reason() or "")
def test_the_real_pgq_shares_batches_keeps_order_and_redelivers(tmp_path: Path) -> None:
    with LocalPostgres(bindir=pgq_bindir()) as pg:
        cli = Cli(pg.dsn, tmp_path)
        result = cli.run(
            "-queue pgq -fill-db 200 -workers 12 -orders 10 -work-ms 0-2 -poll-interval 0.1 -json p.json"
        )
        assert result.returncode == 0, result.stdout + result.stderr
        doc = report(cli, "p.json")
        audit = doc["audit"]
        assert (audit["verdict"], audit["processed"], audit["order_checked"]) == ("pass", 200, True), audit
        assert audit["order_violations"] == audit["duplicates"] == 0
        ticker = doc["queue"]["ticker"]  # the ticker's settings set the batch latency: in the report
        assert ticker["started_by"] == "pgmq-sim" and ticker["ticker_period_s"] > 0
        assert ticker["queues"]["pgmq_sim_type1"]["ticker_max_lag_s"] == pytest.approx(0.1)
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            batches, events = conn.execute(
                "select count(distinct batch_id), count(*) from pgmq_sim_pgq_events"
            ).fetchone()
            assert events == 200 and batches >= 1
            # the workers of a type shared its batches: one batch's events went to several workers
            shared = conn.execute(
                "select max(n) from (select count(distinct j.worker) n from msg_journal j"
                " join pgmq_sim_enqueued e on e.msg_id = j.msg_id"
                " join pgmq_sim_pgq_events v on v.queue_type || ':' || v.ev_id = e.design_id"
                " group by v.queue_type, v.batch_id) per_batch"
            ).fetchone()[0]
            assert shared > 1
            # nothing left behind: pgqd stopped, its directory gone
            assert (
                conn.execute(
                    "select count(*) from pg_stat_activity where query ilike '%pgq.ticker%'"
                    " and pid <> pg_backend_pid()"
                ).fetchone()[0]
                == 0
            )
        assert not list(Path(tempfile.gettempdir()).glob("pgmq-sim-pgqd-*"))
        # an event its worker does not finish within its lease is delivered again, and counted
        slow = cli.run(
            "-queue pgq -fill-db 24 -workers 6 -orders 12 -work-ms 1100-1400 -lease 1 -json s.json"
        )
        assert slow.returncode == 0, slow.stdout + slow.stderr
        audit = report(cli, "s.json")["audit"]
        assert audit["verdict"] == "pass" and audit["redelivered"] > 0 and audit["duplicates"] == 0, audit
        # a plain role cannot create the extension: the line says an administrator creates it once
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("create role plain login password 'plain'")
            conn.execute("create database plain_db owner plain")
        plain = conninfo.make_conninfo(pg.dsn, user="plain", password="plain", dbname="plain_db")
        refused = Cli(plain, tmp_path).run("-queue pgq -fill-db 10 -workers 3")
        assert_one_line_error(refused, 2, "needs a superuser", "administrator", "create extension pgq")
