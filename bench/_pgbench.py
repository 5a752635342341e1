"""A queue built by SQL in the bench's own database, the tool's statements run by hand, and pgbench."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import _common as c
import psycopg
from psycopg.conninfo import make_conninfo

from pgmq_sim.designs.design import QueueDesign, load_design
from pgmq_sim.sqlfiles import statement, user_file

BENCH_DATABASE = "pgmq_bench"  # hand-built queues live here: the tool's runs refuse tables it did not make


def seed_completion() -> str:
    """The seed design's completion (mark the message processed), as the tool runs it."""
    return load_design("seed").complete.text


def claim_params(text: str, queue_type: str = "type1") -> tuple[object, ...]:
    """The arguments a claim's text uses, in order: its type, a batch of one, no group preferred."""
    used = max((int(n) for n in re.findall(r"\$(\d)", text)), default=1)
    return (queue_type, 1, None)[:used]


# --- a queue built by SQL (a standing backlog, or pgbench's side) ------------------------------


def bench_database(dsn: str, name: str = BENCH_DATABASE) -> str:
    """A database of the bench's own on the same server (created once), for queues built by SQL."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone() is None:
            conn.execute(f'create database "{name}"')
    return make_conninfo(dsn, dbname=name)


def strip_sql(text: str) -> str:
    """One statement without -- comments or the trailing semicolon (pgbench reads it as a command)."""
    lines = [line.split("--", 1)[0].rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line.strip()).strip().rstrip(";").strip()


def prepare_queue(
    dsn: str,
    strategy: QueueDesign,
    messages: int,
    orders: int,
    analyze: bool = True,
    vacuum: bool = False,
    autovacuum: bool = True,
    seed: float = 0.42,
    journal: bool = False,
) -> None:
    """Recreate the tool's table (the schema file the CLI would use + the strategy's schema) and
    prefill it by SQL the way the tool's producer does: msg_id 1..N, distinct increasing time_added,
    random type and order_id, status 'N'; then ANALYZE it as the tool does after its prefill
    (analyze), or VACUUM ANALYZE it (vacuum). autovacuum=False turns autovacuum off for the table, so
    no background pass changes its plan or visibility map during a measurement. journal: also
    (re)create the journal the audited completion writes.

    Use a database of the bench's own (bench_database): a run of the tool refuses to replace a
    table it did not create."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(user_file("schema.sql", None, "-schema").text)
        if strategy.extra_schema is not None:
            conn.execute(strategy.extra_schema.text)
        if journal:  # the audited completion's journal, empty
            conn.execute(statement("journal"))
        conn.execute("select setseed(%s)", (seed,))
        conn.execute(
            """
            insert into msg_queue (msg_id, queue_type, status, order_id, time_added)
            select g, 'type' || (1 + floor(random() * 3))::int, 'N', 1 + floor(random() * %(k)s)::int,
                   now() - interval '1 hour' + g * interval '1 microsecond'
            from generate_series(1, %(n)s) g
            """,
            {"n": messages, "k": orders},
        )
        if not autovacuum:
            conn.execute("alter table msg_queue set (autovacuum_enabled = false)")
        if vacuum:
            conn.execute("vacuum (analyze) msg_queue")
        elif analyze:
            conn.execute("analyze msg_queue")


def processed_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from msg_queue where time_processed is not null").fetchone()
    return int(row[0]) if row else 0


# --- pgbench ----------------------------------------------------------------------------------


def pgbench_script(strategy: QueueDesign, audited: bool = False) -> str:
    """BEGIN; claim (type chosen at random, claimed row captured with \\gset); complete; COMMIT.

    The claim is wrapped the way the tool wraps it (the claim as a CTE, then a select from it) and
    the completion is the tool's complete_mark statement (audited: after the tool's journal_entry
    statement, which writes the journal row; pgbench cannot quote a variable, so the journal's
    claimed_at is the journal's clock); the select aggregates so an empty claim yields msg_id 0 instead of
    aborting the client, and the completion then touches no row. Throughput is counted from the
    table, so empties do not count.
    """
    claim = (
        strip_sql(strategy.claim.text)
        .replace("$1", "('type' || :t)")
        .replace("$2", "1")
        .replace("$3", "null")
    )
    complete = strip_sql(seed_completion()).replace("$1", ":claimed_id")
    if audited:
        journal = strip_sql(statement("journal_entry"))
        for param, value in (
            ("$1", ":claimed_id"),
            ("$2", "('type' || :t)"),
            ("$3", ":claimed_order"),
            ("$4", "'pgbench'"),
            ("$5", "clock_timestamp()"),
            ("$6", "1"),
            ("$7", "null"),  # how long the worker was free before the claim: pgbench does not say
            ("$8", "null"),  # how long the claim statement ran: pgbench does not say either
        ):
            journal = journal.replace(param, value)
        complete = f"{journal};\n{complete}"
    return (
        "\\set t random(1, 3)\n"
        "BEGIN;\n"
        f"with claimed as (\n{claim}\n)\n"
        "select coalesce(max(claimed.msg_id), 0) as claimed_id,"
        " coalesce(max(claimed.order_id), 0) as claimed_order, max(clock_timestamp()) as claimed_at"
        " from claimed\n"
        "\\gset\n"
        f"{complete};\n"
        "COMMIT;\n"
    )


@dataclass(frozen=True)
class PgbenchResult:
    transactions: int
    tps: float
    elapsed_s: float
    processed: int  # messages completed, counted in the table
    cpu_s: float  # pgbench's own user + system CPU

    @property
    def msg_per_s(self) -> float:
        return self.processed / self.elapsed_s if self.elapsed_s > 0 else 0.0


def run_pgbench(
    server: c.Server,
    dsn: str,
    script: str,
    clients: int,
    transactions_per_client: int,
    protocol: str = "prepared",
    threads: int = 2,
    prefix: Sequence[str] = (),
) -> PgbenchResult:
    """pgbench -n -f SCRIPT -c C -j J -t T -M PROTOCOL on dsn; messages processed counted from the table."""
    before = processed_count(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgmq-bench-", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        cmd = [*prefix, server.tool("pgbench"), "-n", "-f", path, "-c", str(clients)]
        cmd += ["-j", str(min(threads, clients))]
        cmd += ["-t", str(transactions_per_client), "-M", protocol, dsn]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        text = proc.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench exited {proc.returncode}: " + " | ".join(text.strip().splitlines()[-6:]))
    txn = re.search(r"number of transactions actually processed: (\d+)", text)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", text)
    if not txn or not tps:
        raise RuntimeError("cannot read pgbench output: " + " | ".join(text.strip().splitlines()[-6:]))
    transactions, rate = int(txn.group(1)), float(tps.group(1))
    cpu_s = usage.ru_utime + usage.ru_stime
    return PgbenchResult(transactions, rate, transactions / rate, processed_count(dsn) - before, cpu_s)
