"""A queue design is a folder of SQL: a team's own table runs under the tool, the audit proves it,
a batch commits several messages at once, an unsafe claim is caught and explained, and a broken
folder is refused before anything changes. Without a server (unit): how a folder is read, what a
claim's text says about its locks, and the claim the workers prepare being the file as written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import psycopg
import pytest
from conftest import REPO, Cli, Refuse, assert_one_line_error

from pgmq_sim.designs.design import load_design
from pgmq_sim.errors import UsageError
from pgmq_sim.model.locks import ClaimLocks

# An outbox, shaped unlike the seed's table: its own names, a text phase, a bigint id kept from $1.
OUTBOX = {
    "schema.sql": """
        drop table if exists outbox;
        create table outbox (
            id bigint primary key,
            topic text not null,
            customer bigint not null,
            phase text not null default 'new',
            due timestamptz not null,
            sent_at timestamptz
        );
        create index outbox_new on outbox (topic, customer, id) where phase = 'new';
    """,
    "enqueue.sql": "insert into outbox (id, topic, customer, due) values ($1, $2, $3, $5)",
    "claim.sql": """
        with recursive heads as (
            (select customer, id from outbox where topic = $1 and phase = 'new'
              order by customer, id limit 1)
            union all
            select n.customer, n.id from heads h cross join lateral (
                select customer, id from outbox
                where topic = $1 and phase = 'new' and customer > h.customer
                order by customer, id limit 1) n
        ),
        picked as (
            select l.id from heads h cross join lateral (
                select id from outbox o where o.id = h.id and o.phase = 'new' for update skip locked) l
            limit $2
        )
        update outbox o set phase = 'sending' from picked where o.id = picked.id
        returning o.id as msg_id, o.topic as queue_type, o.customer as order_id
    """,
    "complete.sql": "update outbox set phase = 'sent', sent_at = clock_timestamp() where id = $1",
    "pending.sql": "select id from outbox where phase <> 'sent'",
}

# Seed 001's exercise: the head read without a lock, updated without re-checking its phase.
UNSAFE_CLAIM = """
    with head as (
        select id from outbox o where topic = $1 and phase = 'new'
          and not exists (select 1 from outbox e where e.topic = o.topic and e.customer = o.customer
                                                 and e.phase = 'new' and e.id < o.id)
        order by id limit $2
    )
    update outbox set phase = 'sending' from head where outbox.id = head.id
    returning outbox.id as msg_id, outbox.topic as queue_type, outbox.customer as order_id
"""


def folder(root: Path, name: str = "outbox", **changes: str | None) -> Path:
    """The outbox design in root/name, with some files replaced (or, given None, left out)."""
    where = root / name
    where.mkdir()
    for file, text in {**OUTBOX, **changes}.items():
        if text is not None:
            (where / file).write_text(text)
    return where


@pytest.mark.integration
@pytest.mark.parametrize("batch", [1, 5])
def test_a_teams_own_queue_runs_and_the_audit_proves_it(cli: Cli, db: psycopg.Connection, batch: int) -> None:
    folder(cli.workdir)
    result = cli.run(
        f"-queue ./outbox -batch {batch} -fill-db 400 -workers 6 -work-ms 0-2 -orders 20 -json o.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "o.json").read_text())
    audit = doc["audit"]
    assert (audit["verdict"], audit["processed"], audit["order_checked"]) == ("pass", 400, True)
    assert audit["duplicates"] == audit["missing"] == audit["order_violations"] == audit["left_behind"] == 0
    assert doc["queue"]["name"] == "outbox" and doc["queue"]["seed_table"] is False
    assert doc["queue"]["tables"] == ["public.outbox"]
    assert {"schema", "enqueue", "claim", "complete", "pending"} <= set(doc["files"])
    assert doc["latency_ms"]["e2e"]["p50"] is not None  # from the tool's log of what it enqueued
    # the team's table holds every message, finished, under the tool's ids
    sent, low, high = db.execute(
        "select count(*), min(id), max(id) from outbox where phase = 'sent'"
    ).fetchone()
    assert (sent, low, high) == (400, 1, 400)
    comment = db.execute("select obj_description('outbox'::regclass, 'pg_class')").fetchone()[0]
    assert comment.startswith("pgmq-sim: ")  # the next run may replace it
    if batch > 1:  # a claim took several messages: fewer transactions than messages
        assert doc["server_cost"] is None or doc["server_cost"]["commits_per_msg"] < 0.9


@pytest.mark.integration
def test_a_claim_without_a_lock_fails_the_audit_and_is_named(cli: Cli, dsn: str) -> None:
    folder(cli.workdir, **{"claim.sql": UNSAFE_CLAIM})
    result = cli.run("-queue ./outbox -fill-db 300 -workers 6 -work-ms 1-3 -orders 30 -json u.json")
    assert result.returncode == 1, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "u.json").read_text())["audit"]
    assert audit["verdict"] == "fail" and audit["duplicates"] > 0
    cause = audit["causes"][0]
    assert "duplicate completion" in cause and "takes no row lock" in cause and "msg_id" in cause
    assert "FOR UPDATE SKIP LOCKED" in audit["fix"]
    out = " ".join(result.stdout.split())
    assert "audit cause" in out and "advice: audit failed: lock what the claim selects" in out
    advice = [line for line in result.stdout.splitlines() if line.startswith("advice:")]
    assert advice[0].startswith("advice: audit failed"), advice  # the limit does not lead
    again = cli.audit("-dsn", dsn)  # the queue a run left, judged again from the record
    assert again.returncode == 1 and "takes no row lock" in " ".join(again.stdout.split())


BAD = [
    ("no-complete", {"complete.sql": None}, "has no complete.sql"),
    ("claim-does-not-parse", {"claim.sql": "selec id from outbox"}, "claim.sql of"),
    (
        "claim-lacks-a-column",
        {"claim.sql": OUTBOX["claim.sql"].replace("o.customer as order_id", "o.customer as account")},
        "claim.sql of",
    ),
    (
        "enqueue-drops-the-id",
        {
            "schema.sql": OUTBOX["schema.sql"].replace("id bigint primary key", "id bigserial primary key"),
            "enqueue.sql": "insert into outbox (topic, customer, due) values ($2, $3, $5)",
        },
        "does not keep the tool's message",
    ),
    (
        "complete-finishes-nothing",
        {"complete.sql": "update outbox set phase = 'sent' where id = -$1"},
        "finished 0",
    ),
    (
        "uses-a-table-it-did-not-create",
        {
            "claim.sql": OUTBOX["claim.sql"].replace(
                "o.phase = 'new' for update skip locked",
                "o.customer in (select id from ledger) for update skip locked",
            )
        },
        "uses table public.ledger",
    ),
    ("drops-a-table-of-others", {"schema.sql": "drop table ledger;" + OUTBOX["schema.sql"]}, "ledger"),
    ("unknown-toml-key", {"queue.toml": "transactions = 'split'\n"}, "unknown key(s) transactions"),
    ("toml-does-not-parse", {"queue.toml": "ordered = maybe\n"}, "is not valid TOML"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("changes", "needle"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_broken_design_is_refused_before_anything_changes(
    cli: Cli, db: psycopg.Connection, changes: dict[str, str | None], needle: str
) -> None:
    db.execute("create table ledger (id bigint primary key)")  # the team's own, not pgmq-sim's
    db.execute("insert into ledger values (1)")
    db.commit()
    folder(cli.workdir, **changes)
    result = cli.run("-queue ./outbox -fill-db 50 -workers 3")
    assert_one_line_error(result, 2, needle)
    tables = {
        r[0]
        for r in db.execute(
            "select relname from pg_class where relkind = 'r' and relnamespace = 'public'::regnamespace"
        )
    }
    assert tables == {"ledger"}, tables  # no outbox, no run record, no journal left behind
    assert db.execute("select count(*) from ledger").fetchone()[0] == 1
    assert not (cli.workdir / "msg_queue.log").exists()  # the log opens only once the checks pass


@pytest.mark.unit
@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        ("-delmsg", "has only complete.sql"),
        ("-fail-rate 0.1", "fail.sql"),
        ("-wakeup notify", "notify.sql"),
        ("-tx split", "runs its transactions as its queue.toml says"),
        ("-schema schema.sql", "edit its files instead"),
    ],
)
def test_what_a_design_cannot_do_is_refused_with_its_fix(
    refuse: Refuse, tmp_path: Path, flags: str, needle: str
) -> None:
    folder(tmp_path)
    shutil.copy(REPO / "schema.sql", tmp_path / "schema.sql")
    assert_one_line_error(refuse(f"-queue ./outbox -fill-db 50 -workers 3 {flags}"), 2, needle)


@pytest.mark.integration
def test_the_example_design_with_notify_and_failures(cli: Cli) -> None:
    shutil.copytree(REPO / "examples" / "jobs", cli.workdir / "jobs")
    result = cli.run(
        "-queue ./jobs -fill-db 300 -rate 300 -workers 6 -work-ms 0-2 -orders 20 -wakeup notify"
        " -poll-interval 0.2 -fail-rate 0.1 -max-attempts 2 -backoff-ms 5 -json j.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "j.json").read_text())["audit"]
    assert audit["verdict"] == "pass" and audit["failed_attempts"] > 0
    assert audit["processed"] + audit["dead_lettered"] == 300 and audit["missing"] == 0


@pytest.mark.integration
@pytest.mark.parametrize(
    ("design", "flags"),
    [
        # a retry or a delayed message becomes due without a notification: the fallback claims it
        (
            "next-attempt",
            "-fail-rate 0.1 -max-attempts 3 -backoff-ms 10 -delay 0.2:0.2-0.4 -poll-interval 0.1",
        ),
        ("priority", "-priority 1-3 -delay 0.2:0.2-0.4 -batch 3"),
        ("visibility", "-archive -batch 3"),
    ],
)
def test_each_seed_design_passes_the_audit(cli: Cli, db: psycopg.Connection, design: str, flags: str) -> None:
    result = cli.run(
        f"-queue {design} -fill-db 400 -rate 400 -workers 6 -work-ms 0-2 -orders 30 {flags} -json d.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "d.json").read_text())
    audit = doc["audit"]
    assert audit["verdict"] == "pass" and audit["processed"] + audit["dead_lettered"] == 400, audit
    assert audit["early"] == 0 and audit["duplicates"] == audit["missing"] == audit["order_violations"] == 0
    assert doc["queue"]["name"] == design and doc["queue"]["origin"] == "built-in"
    if design == "visibility":  # archived, not deleted: every message is in the archive table
        assert db.execute("select count(distinct msg_id) from a_messages").fetchone()[0] == 400
    if design == "next-attempt":
        assert audit["failed_attempts"] > 0 and doc["retries"]["blocked_s_total"] > 0


@pytest.mark.integration
def test_a_worker_slower_than_the_visibility_timeout_sees_its_message_redelivered(cli: Cli) -> None:
    result = cli.run(
        "-queue visibility -fill-db 60 -workers 6 -work-ms 150-400 -lease 0.2 -orders 30 -json v.json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "v.json").read_text())["audit"]
    assert audit["verdict"] == "pass" and audit["delivery"] == "at-least-once"
    assert audit["redelivered"] > 0 and audit["redelivered_ids"] and audit["duplicates"] == 0
    assert "redelivered after their lease passed" in " ".join(result.stdout.split())


@pytest.mark.integration
def test_a_claim_that_ignores_the_due_time_completes_early_and_fails_the_audit(cli: Cli) -> None:
    shutil.copytree(REPO / "src" / "pgmq_sim" / "designs" / "priority", cli.workdir / "eager")
    claim = cli.workdir / "eager" / "claim.sql"
    claim.write_text(claim.read_text().replace(" and t.not_before <= clock_timestamp()", ""))
    result = cli.run(
        "-queue ./eager -fill-db 200 -workers 6 -work-ms 0-1 -orders 30 -delay 0.3:1-2 -json e.json"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "e.json").read_text())["audit"]
    assert audit["early"] > 0 and audit["early_ids"] and audit["verdict"] == "fail"
    assert "before their not-before time" in audit["causes"][0]


@pytest.mark.integration
def test_under_a_backlog_the_top_priority_waits_less_than_half_as_long(cli: Cli) -> None:
    result = cli.run(
        "-queue priority -fill-db 1500 -workers 6 -work-ms 1-2 -orders 300 -priority 1-5 -json p.json -v"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    by_level = json.loads((cli.workdir / "p.json").read_text())["latency_ms"]["e2e_by_priority"]
    assert sorted(by_level) == ["1", "2", "3", "4", "5"]
    assert by_level["5"]["p50"] < 0.5 * by_level["1"]["p50"], by_level
    assert "end-to-end ms by priority" in result.stdout


# Urgency before id: the group's row is locked with the message, so a group never has two messages in
# flight, but a free group gives its most urgent pending message, not its earliest.
URGENT = {
    "schema.sql": """
        drop table if exists job;
        drop table if exists job_group;
        create table job_group (queue_type text, order_id bigint, primary key (queue_type, order_id));
        create table job (id bigint primary key, queue_type text not null, order_id bigint not null,
                          priority integer not null, state text not null default 'new', due timestamptz);
        create index job_new on job (queue_type, priority desc, id) where state = 'new';
    """,
    "enqueue.sql": """
        with g as (insert into job_group values ($2, $3) on conflict do nothing)
        insert into job (id, queue_type, order_id, priority, due) values ($1, $2, $3, $4, $5)
    """,
    "claim.sql": """
        with picked as (
            select j.id from job j
            join job_group g on g.queue_type = j.queue_type and g.order_id = j.order_id
            where j.queue_type = $1 and j.state = 'new'
            order by j.priority desc, j.id
            limit $2
            for update of j, g skip locked
        )
        update job j set state = 'running' from picked where j.id = picked.id
        returning j.id as msg_id, j.queue_type, j.order_id
    """,
    "complete.sql": "update job set state = 'done' where id = $1",
    "pending.sql": "select id from job where state <> 'done'",
}


@pytest.mark.integration
def test_a_claim_that_ranks_urgency_before_the_id_overtakes_and_the_cause_says_so(cli: Cli) -> None:
    """Never two messages of a group in flight, yet messages overtake their group's earlier ones
    while those are pending: the audit fails, and its cause says overtaking, not in flight, and
    names the claim's ORDER BY."""
    folder(cli.workdir, "urgent", **{**{k: None for k in OUTBOX}, **URGENT})
    result = cli.run(
        "-queue ./urgent -priority 1-5 -fill-db 300 -workers 4 -orders 10 -work-ms 0-1 -json u.json"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "u.json").read_text())["audit"]
    assert audit["duplicates"] == audit["missing"] == 0 and audit["order_violations"] > 20, audit
    assert audit["overtaking"] == audit["order_violations"], audit  # none while one was in flight
    (cause,) = audit["causes"]
    assert cause.startswith(f"{audit['overtaking']} message(s) overtook an earlier message of their group")
    assert "while it was still pending" in cause and "in flight" not in cause.split("(claimed before")[0]
    assert "claim.sql orders by priority desc, before id (order by j.priority desc, j.id)" in cause
    assert "earliest unfinished message" in audit["fix"] and "head is locked" not in audit["fix"]


@pytest.mark.unit
def test_the_seed_table_refuses_what_it_cannot_hold(refuse: Refuse) -> None:
    assert_one_line_error(refuse("-fill-db 50 -priority 1-3"), 2, "no priority and no due time")
    assert_one_line_error(refuse("-claim indexed -fill-db 50 -delay 0.5:1-2"), 2, "-queue priority")
    assert_one_line_error(refuse("-fill-db 50 -archive"), 2, "-archive")


# A team's text key: 48 bits of milliseconds, then random hex; the customer inside a jsonb document.
# Ids made within one millisecond do not sort in enqueue order.
TIME_RANDOM = {
    "schema.sql": """
        drop table if exists doc_queue;
        create table doc_queue (
            id text primary key default
                lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0')
                || md5(random()::text),
            topic text not null,
            data jsonb not null,
            state text not null default 'new'
        );
        create index doc_queue_open on doc_queue (topic, (data->>'customer'), id) where state <> 'done';
    """,
    "enqueue.sql": """
        insert into doc_queue (topic, data) values ($2, jsonb_build_object('customer', $3))
        returning id as msg_id
    """,
    "claim.sql": """
        with heads as (
            select distinct on ((data->>'customer')) id from doc_queue
            where topic = $1 and state <> 'done'
            order by (data->>'customer'), id
        ),
        picked as (
            select d.id from heads h join doc_queue d on d.id = h.id
            where d.state = 'new'
            limit $2
            for update of d skip locked
        )
        update doc_queue d set state = 'running' from picked where d.id = picked.id
        returning d.id as msg_id, d.topic as queue_type, (d.data->>'customer')::bigint as order_id
    """,
    "complete.sql": "update doc_queue set state = 'done' where id = $1",
    "pending.sql": "select id from doc_queue where state <> 'done'",
}


@pytest.mark.integration
def test_ids_that_do_not_sort_in_enqueue_order_are_the_measured_cause(cli: Cli) -> None:
    """The claim takes each customer's smallest id: right, were the ids in enqueue order. The audit
    fails, and its cause is what the rows say (ids inverted, made within one millisecond), not the
    claim's ordering by customer, which is the group's own key."""
    folder(cli.workdir, "docs", **{**{k: None for k in OUTBOX}, **TIME_RANDOM})
    result = cli.run("-queue ./docs -fill-db 400 -workers 4 -orders 5 -work-ms 0-1 -json d.json")
    assert result.returncode == 1, result.stdout + result.stderr
    audit = json.loads((cli.workdir / "d.json").read_text())["audit"]
    assert audit["duplicates"] == audit["missing"] == 0 and audit["order_violations"] > 5, audit
    facts = audit["order_facts"]
    assert facts["keyed"] and facts["ids_inverted"] * 2 > facts["pairs"], facts
    (cause,) = audit["causes"]
    measured = cause.index("measured from the rows: the design's ids do not increase in enqueue order:")
    assert f"{facts['ids_inverted']} of {facts['pairs']} pair(s) inverted" in cause
    assert "all enqueued within the same millisecond" in cause or "all enqueued less than 1 ms apart" in cause
    later, later_id, earlier, earlier_id = facts["example"]
    assert f"msg_id {later} has id {later_id}, below msg_id {earlier}'s {earlier_id}" in cause
    assert later_id < earlier_id and int(later) > int(earlier)
    assert "customer" not in cause  # the group's own key is no cause
    assert "(a guess, not measured)" in cause and cause.index("(a guess") > measured
    assert "make the design's ids increase in enqueue order" in audit["fix"]
    assert "ids do not increase in enqueue order" in " ".join(result.stdout.split())


@pytest.mark.integration
def test_autovacuum_off_on_the_queue_table_is_read_before_the_run_and_named(cli: Cli) -> None:
    """Issue 43, case 3, on a team's table: its schema.sql turns autovacuum off for the queue table.
    The census reads the reloption before the run; the note, the table row and the advice name it
    with the dead tuples left and the table's growth per hour."""
    schema = OUTBOX["schema.sql"].replace("sent_at timestamptz\n        );", "sent_at timestamptz\n        )"
                                          " with (autovacuum_enabled = false, fillfactor = 50);")  # fmt: skip
    assert "autovacuum_enabled = false" in schema
    folder(cli.workdir, **{"schema.sql": schema})
    result = cli.run(
        "-queue ./outbox -duration 3 -rate 200 -workers 3 -work-ms 0-1 -orders 20 -json v.json -v"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads((cli.workdir / "v.json").read_text())
    census = doc["server_settings"]
    assert census["tables"]["public.outbox"] == ["autovacuum_enabled=false", "fillfactor=50"], census
    off = "table public.outbox's own reloption autovacuum_enabled=false"
    assert census["autovacuum_off"] == off and census["settings"]["autovacuum"]["value"] == "on"
    assert census["settings"]["synchronous_commit"]["set_by"] and census["read_ms"] > 0
    assert census["connection_slots"]["role"] and census["pg_stat_statements"]
    (named,) = [a for a in doc["advice"] if a.startswith(f"autovacuum off ({off}): dead tuples ")]
    found = re.search(r"dead tuples [\d,]+ -> ([\d,]+), table ", named)
    dead = int(found.group(1).replace(",", "")) if found else 0
    assert dead > 100 and "MB per hour; nothing reclaims them" in named, named
    out = " ".join(result.stdout.split())
    assert f"note: autovacuum is off for the queue's tables ({off})" in out
    assert "autovacuum off: table public.outbox" in out and "autovacuum x" not in out


@pytest.mark.unit
def test_advisory_locks_are_transaction_level_only() -> None:
    """A transaction pooler hands the server connection to another client at every commit: a
    session-level advisory lock would stay with the connection, not with the worker."""
    root = REPO / "src" / "pgmq_sim"
    texts = {str(path.relative_to(root)): path.read_text() for path in root.rglob("*.sql")}
    session_level = re.compile(r"pg_(try_)?advisory_(lock|unlock)(_shared)?\s*\(")
    assert [name for name, text in texts.items() if session_level.search(text)] == []
    for name in ("designs/advisory/claim.sql", "designs/advisory/claim_split.sql"):
        assert "pg_try_advisory_xact_lock(" in texts[name], name


@pytest.mark.unit
def test_a_claim_skips_locked_rows_by_its_code_not_its_comments(tmp_path: Path) -> None:
    """Every built-in claim passes over what another worker holds; a team's claim is read from its
    code: SKIP LOCKED named only in a comment, or a blocking advisory lock, does not skip."""
    from pgmq_sim.designs.design import built_in_designs, load_design

    # (pgmq's and PgQ's claims call functions: their locks are not in the claim's text)
    assert all(load_design(n).skips_locked for n in built_in_designs() if load_design(n).requires is None)
    said = tmp_path / "said.sql"
    said.write_text("-- no SKIP LOCKED here\nselect 1 /* nor FOR UPDATE SKIP LOCKED */ for update")
    blocking = tmp_path / "blocking.sql"
    blocking.write_text("select 1 where pg_advisory_xact_lock(1) is not null")
    trying = tmp_path / "trying.sql"
    trying.write_text("select 1 where pg_try_advisory_xact_lock(1)")
    assert not load_design("indexed", next_msg=said).skips_locked
    assert not load_design("seed", next_msg=blocking).skips_locked
    assert load_design("seed", next_msg=trying).skips_locked


FILES = ("schema.sql", "enqueue.sql", "claim.sql", "complete.sql")


def make(tmp_path: Path, toml: str | None = None, **extra: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (tmp_path / name).write_text("select 1")
    for name, text in extra.items():
        (tmp_path / name.replace("_sql", ".sql")).write_text(text)
    if toml is not None:
        (tmp_path / "queue.toml").write_text(toml)
    return tmp_path


@pytest.mark.unit
def test_a_folder_is_read_with_its_options(tmp_path: Path) -> None:
    design = load_design(
        str(make(tmp_path, 'transaction = "split"\ndelivery = "at-least-once"\nordered = false\n'))
    )
    assert (design.transaction, design.at_least_once, design.ordered, design.seed_table) == (
        "split",
        True,
        False,
        False,
    )
    assert design.origin == "given by -queue" and design.complete.path.name == "complete.sql"


@pytest.mark.unit
def test_delmsg_picks_the_deleting_form_or_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"has only complete\.sql"):
        load_design(str(make(tmp_path)), delmsg=True)
    (tmp_path / "complete_delete.sql").write_text("delete from t where id = $1")
    design = load_design(str(tmp_path), delmsg=True)
    assert design.deletes and design.complete.path.name == "complete_delete.sql"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ('transaction = "sometimes"\n', "use one of single, split"),
        ("ordered = 1\n", "ordered must be true or false"),
        ('table = "jobs"\n', "only the built-in designs name a table"),
        ('extends = "nowhere"\n', "unknown queue design 'nowhere'"),
    ],
)
def test_a_queue_toml_that_says_something_unknown_is_refused(tmp_path: Path, toml: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        load_design(str(make(tmp_path, toml)))


@pytest.mark.unit
def test_the_built_in_strategies_are_designs_on_the_seed_table() -> None:
    indexed = load_design("indexed")
    assert indexed.seed_table and indexed.extra_schema is not None and indexed.has_split_form
    assert "limit $2" in indexed.claim.text  # batches
    affinity = load_design("affinity")  # extends indexed: its schema and split form come from there
    assert affinity.extra_schema == indexed.extra_schema and "$3" in affinity.claim.text
    assert not load_design("fifo").ordered


@pytest.mark.unit
@pytest.mark.parametrize(
    ("claim", "said"),
    [
        (
            "select id from t -- for update skip locked (a comment)",
            "no row lock (no FOR UPDATE, no advisory lock)",
        ),
        ("select id from t for update skip locked", "FOR UPDATE, SKIP LOCKED"),
        ("select id from t FOR NO KEY UPDATE", "FOR UPDATE"),
        ("select id from t where pg_try_advisory_xact_lock(1, id)", "an advisory lock"),
    ],
)
def test_a_claims_locks_are_read_from_its_text_not_its_comments(claim: str, said: str) -> None:
    assert ClaimLocks.read(claim).said() == said


@pytest.mark.unit
def test_the_workers_claim_is_the_file_as_written() -> None:
    """No file is wrapped, nested or rewritten: the claim the workers prepare is claim.sql's text,
    its batch still the argument $2; as a function it returns the claim's own columns."""
    from dataclasses import replace

    from pgmq_sim.db.statements import CLAIM, create_function, prepare, worker_statements
    from pgmq_sim.db.values import SessionPlan

    design = load_design("indexed")
    plan = SessionPlan(
        design.claim.text,
        False,
        True,
        complete_sql=design.complete.text,
        batch=10,
        claim_returns="msg_id integer",
    )
    claim = next(s for s in worker_statements(plan) if s.name == CLAIM)
    assert claim.text == design.claim.text and "limit $2" in claim.text
    assert prepare(claim) == f"prepare {CLAIM}(text, integer, bigint, text, float8) as {design.claim.text}"
    drop, create, _ = create_function(claim)  # an earlier run's function of other columns dropped first
    assert drop.startswith("drop function if exists pgmq_sim_claim(")
    assert "returns table (msg_id integer) language sql" in create
    assert "with claimed as" not in create_function(claim)[0]
    # the tool's own built-in claims have their batch written in (a plan the plan cache keeps)
    own = next(s for s in worker_statements(replace(plan, builtin_claim=True)) if s.name == CLAIM)
    assert "$2" not in own.text and "limit 10  -- the batch" in own.text


@pytest.mark.unit
def test_a_folder_missing_its_enqueue_is_refused_not_taken_for_a_strategy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make(tmp_path / "mine")
    (folder / "enqueue.sql").unlink()
    with pytest.raises(UsageError, match=r"has no enqueue\.sql"):
        load_design(str(folder))
    monkeypatch.chdir(tmp_path)  # as before designs, ./strategies/NAME with only a claim is a strategy
    (tmp_path / "strategies" / "old").mkdir(parents=True)
    (tmp_path / "strategies" / "old" / "claim.sql").write_text("select 1")
    assert load_design("old").seed_table
