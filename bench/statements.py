"""Statement forms: a worker's claim + completion sent as SQL text (PREPARE/EXECUTE or SQL functions,
what the tool does), as unnamed extended-protocol statements, as protocol-level prepared statements,
and pipelined; msg/s, client and server CPU per message, each form checked for exactly-once.

A bare loop, not the tool: N threads (default 12, types dealt round-robin), one connection each in
autocommit mode, each running the `indexed` strategy's cycle in one transaction per message: BEGIN;
the claim (pgmq_sim.designs.design.load_design("indexed").claim, as written); the completion
(the seed design's complete.sql); COMMIT, until --messages are done, on a table prefilled by SQL
(bench/_pgbench.py's prepare_queue: --messages + 2000, -orders 100, ANALYZEd) and recreated for every
run. The PREPARE texts, the functions and their calls are the tool's own (pgmq_sim.db.statements:
prepare, create_function, call). The tool's clocks select after the commit is left out of every
form, so all run the same statements.

Forms (round trips per message):

  prepare-sql        1  simple query "execute pgmq_sim_complete(ID); commit; begin; execute
                        pgmq_sim_claim('typeN', 1, null, null, null)": SQL-level PREPARE once per
                        session, then
                        text; the tool's form on a direct connection and in session pooling
  function-sql       1  the same chained text calling SQL functions (select * from pgmq_sim_...(...))
  function-sql-2rt   2  "begin; select * from pgmq_sim_claim(...)" then "select * from
                        pgmq_sim_complete(ID); commit": the tool's form behind a transaction pooler
                        (it does not chain the next claim there: that would keep the server link)
  unnamed            4  begin; claim; complete; commit, one round trip each, the two statements as
                        unnamed extended-protocol statements (Parse/Bind/Execute/Sync each time)
  prepared           4  the same with protocol-level prepared statements (Parse once per session,
                        then Bind/Execute)
  cursor-unnamed     4  as unnamed, through psycopg cursors: execute(..., prepare=False)
  cursor-prepared    4  as prepared, through psycopg cursors: execute(..., prepare=True)
  pipeline-unnamed   1  libpq pipeline mode, one Sync per message: complete, commit, begin, claim
                        (unnamed extended statements, begin/commit as statements too)
  pipeline-prepared  1  the same with protocol-level prepared statements
  pipeline-unnamed-2rt 2  [begin, claim] Sync, [complete, commit] Sync: pipelined without chaining
                        the next claim to the commit, so a transaction pooler can release the link

The SQL-text, unnamed, prepared and pipeline forms run at libpq's level as the tool's
pgmq_sim.db.wire does (psycopg.pq: send, poll the socket, raw results); cursor-* use psycopg's
cursors, i.e. what psycopg's prepare=False/True cost with its Python layer.

Paths (--paths): `direct` (the server's TCP DSN), `transaction` (a real PgBouncer in transaction
pooling in front of it: tests/pooler.py's PgBouncer, loaded by bench/_common.py's pgbouncer_for with
tests/ on sys.path; pool_size 20), `session` (PgBouncer in session pooling). PgBouncer keeps
protocol-level prepared statements across server links only from 1.21 with max_prepared_statements
set; the script sets it (100) when `pgbouncer --version` is 1.21 or newer and says which. The server
is `LocalPostgres(tcp=True)` so PgBouncer can log in; --dsn: a server on TCP with a password.

Figures per form and path, medians of --repeat interleaved rounds (every form once per round, order
rotating): msg/s (messages completed / time from the threads' start to the last thread's stop),
client CPU per message (resource.getrusage of this process: every thread, over the measured loop),
server CPU per message (LocalPostgres.cpu_seconds(): every server process, backends that ended
included, over the loop; '-' with --dsn), PgBouncer's own CPU per message (its process, from /proc),
and a check: every completion's UPDATE found its row, no message was completed twice, the rows
marked processed in the table are exactly the messages the threads completed, and no row is left
claimed but unprocessed. A form that errors (e.g. SQL-level or named prepared statements behind a
transaction pooler that cannot keep them) stops at the first error and is reported as failed. A form
that passes behind a transaction pooler only by coincidence is marked so: psycopg names its
statements _pg3_0, _pg3_1 ... in the order a connection prepares them, every thread here prepares
the same two in the same order, so a name means the same statement on every server link; a
PgBouncer older than 1.21 passes each Bind to whichever link is free, and a Parse of a name a link
already has fails ("already exists") depending on which links had which clients before. A chained
form (the next claim sent with the commit) behind a transaction pooler is always in a transaction, so
it holds its server link for good (correct with pool_size >= threads, but nothing is pooled): marked.

Two shared cores: the threads, the server and PgBouncer share them, and another benchmark may be
running: compare the ratios in one run, not absolute figures.

    python bench/statements.py                               # about 4 minutes on 2 cores
    python bench/statements.py --messages 400 --repeat 1    # quick form, about 10 s
"""

from __future__ import annotations

import argparse
import contextlib
import re
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import _common as c
import _pgbench as pgb
import _statement_forms as sf
import psycopg

from pgmq_sim.embedded.processes import cpu_seconds

FORMS = {  # name: round trips per message
    "prepare-sql": 1,
    "function-sql": 1,
    "function-sql-2rt": 2,
    "unnamed": 4,
    "prepared": 4,
    "cursor-unnamed": 4,
    "cursor-prepared": 4,
    "pipeline-unnamed": 1,
    "pipeline-prepared": 1,
    "pipeline-unnamed-2rt": 2,
}
TOOL_FORM = {"direct": "prepare-sql", "session": "prepare-sql", "transaction": "function-sql-2rt"}
PATHS = ("direct", "transaction", "session")
ORDERS = 100
MARGIN = 2000
MIN_PREPARED_BOUNCER = (1, 21)  # max_prepared_statements
SQL_PREPARED = {"prepare-sql"}  # PREPARE/EXECUTE text: session state no transaction pooler keeps
PROTOCOL_PREPARED = {"prepared", "cursor-prepared", "pipeline-prepared"}  # kept by PgBouncer >= 1.21
CHAINED = {"prepare-sql", "function-sql", "pipeline-unnamed", "pipeline-prepared"}  # always in a transaction


# --- a run of one form and its check -----------------------------------------------------------


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_form(
    dsn: str,
    form: str,
    texts: sf.Texts,
    threads: int,
    messages: int,
    server_cpu: Callable[[], float],
    bouncer_cpu: Callable[[], float],
) -> tuple[dict[str, float], list[sf.Worker], sf.Shared]:
    """threads connections, each running the form's loop until `messages` are completed; the figures
    over the loop (connections and session set-up, e.g. PREPARE, before the start)."""
    shared = sf.Shared(messages)
    body = sf.loop_of(form, texts)
    workers = [
        sf.Worker(psycopg.connect(dsn, autocommit=True), c.QUEUE_TYPES[i % len(c.QUEUE_TYPES)])
        for i in range(threads)
    ]
    start = threading.Barrier(threads + 1)

    def run(w: sf.Worker) -> None:
        try:
            start.wait()
            body(w, shared)
        except BaseException as error:  # stop every thread; reported as the form's failure
            shared.fail(error)

    pool = [threading.Thread(target=run, args=(w,), daemon=True) for w in workers]
    for t in pool:
        t.start()
    cpu0, server0, bouncer0 = cpu_self(), server_cpu(), bouncer_cpu()
    start.wait()
    began = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - began
    cpu1, server1, bouncer1 = cpu_self(), server_cpu(), bouncer_cpu()
    for w in workers:
        w.conn.close()
    completed = sum(len(w.done_ids) for w in workers)
    n = max(1, completed)
    figures = {
        "msg_s": completed / elapsed if elapsed > 0 else 0.0,
        "client_us": (cpu1 - cpu0) * 1e6 / n,
        "server_us": (server1 - server0) * 1e6 / n,
        "bouncer_us": (bouncer1 - bouncer0) * 1e6 / n,
        "completed": float(completed),
    }
    return figures, workers, shared


def check(dsn: str, workers: list[sf.Worker], shared: sf.Shared) -> str:
    """'ok' when every message the threads completed is processed exactly once in the table, else
    what is wrong (or the first error)."""
    if shared.errors:
        return "FAILED " + shared.errors[0]
    ids = [i for w in workers for i in w.done_ids]
    problems = []
    if len(ids) != len(set(ids)):
        problems.append(f"{len(ids) - len(set(ids))} completed twice")
    misses = sum(w.misses for w in workers)
    if misses:
        problems.append(f"{misses} completions found no row")
    with psycopg.connect(dsn) as conn:
        processed = {int(r[0]) for r in conn.execute(
            "select msg_id from msg_queue where time_processed is not null"
        )}  # fmt: skip
        row = conn.execute(
            "select count(*) from msg_queue where status <> 'N' and time_processed is null"
        ).fetchone()
        stuck = int(row[0]) if row else 0
    if processed != set(ids):
        problems.append(
            f"table has {len(processed - set(ids))} processed not completed,"
            f" {len(set(ids) - processed)} completed not processed"
        )
    if stuck:
        problems.append(f"{stuck} claimed but not processed")
    return "; ".join(problems) or "ok"


# --- the servers -------------------------------------------------------------------------------


def bouncer_version(binary: str) -> tuple[tuple[int, int], str]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    first = out.splitlines()[0] if out.strip() else binary
    found = re.search(r"(\d+)\.(\d+)", first)
    return ((int(found.group(1)), int(found.group(2))) if found else (0, 0)), first


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000, help="messages per run (default 5000)")
    parser.add_argument("--threads", type=int, default=12, help="threads, one connection each (default 12)")
    parser.add_argument("--forms", default=",".join(FORMS), help="comma list (default all)")
    parser.add_argument(
        "--paths",
        default="direct,transaction",
        help="direct,transaction,session (default direct,transaction)",
    )
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer default_pool_size (default 20)")
    c.common_args(parser, repeat=5)
    return parser


def main() -> None:
    args = arguments().parse_args()
    forms = [f for f in c.comma_list(args.forms) if f in FORMS]
    paths = [p for p in c.comma_list(args.paths) if p in PATHS]
    strategy = c.load_design("indexed")
    texts = sf.texts_of(strategy)
    shown = strategy.claim.text.strip().replace("\n", "\n    ")
    print(f"claim: indexed, as written:\n    {shown}")
    print(f"completion: {pgb.seed_completion().strip().splitlines()[-2]} ...")

    with c.tcp_server(args.dsn) as (dsn, label, pg), contextlib.ExitStack() as stack:
        print(f"server: {label}, one for all runs", flush=True)
        bench_dsn = pgb.bench_database(dsn)
        dsns = {"direct": bench_dsn}
        bouncer_pids: dict[str, int] = {}
        versions: dict[str, tuple[int, int]] = {}
        notes: list[str] = []
        for path in paths:
            if path == "direct":
                continue
            try:
                probe = c.pgbouncer_for(bench_dsn, path)
            except RuntimeError as missing:
                print(f"{path}: skipped ({missing})")
                continue
            version, text = bouncer_version(probe.binary)
            extra = {}
            if version >= MIN_PREPARED_BOUNCER:
                extra["max_prepared_statements"] = "100"
                note = f"{text}: max_prepared_statements = 100"
            else:
                note = f"{text}: older than 1.21, no max_prepared_statements (named statements are not kept)"
            versions[path] = version
            bouncer = stack.enter_context(c.pgbouncer_for(bench_dsn, path, args.pool_size, extra))
            dsns[path] = bouncer.dsn
            bouncer_pids[path] = bouncer.process.pid
            notes.append(f"{path} pooling: {note}, pool_size {args.pool_size}")
            print(notes[-1])
        paths = [p for p in paths if p in dsns]
        keeps_named = {path: v >= MIN_PREPARED_BOUNCER for path, v in versions.items()}
        installed = [False]

        def measure(cell: str, _round: int) -> dict[str, Any]:
            path, form = cell.split("|")
            pgb.prepare_queue(bench_dsn, strategy, args.messages + MARGIN, ORDERS, analyze=True)
            if not installed[0]:  # the functions survive the table's re-creation (SQL bodies)
                with psycopg.connect(bench_dsn, autocommit=True) as conn:
                    for ddl in texts.functions_ddl:
                        conn.execute(ddl)
                installed[0] = True
            pid = bouncer_pids.get(path)
            figures, workers, shared = run_form(
                dsns[path],
                form,
                texts,
                args.threads,
                args.messages,
                (lambda: pg.cpu_seconds()) if pg is not None else (lambda: float("nan")),
                (lambda: cpu_seconds([pid])) if pid else (lambda: float("nan")),
            )
            return {**figures, "check": check(bench_dsn, workers, shared)}

        cells = [f"{path}|{form}" for path in paths for form in forms]
        results = c.interleaved(cells, args.repeat, measure)

    report(results, paths, forms, args, notes, keeps_named)


def unsafe(path: str, form: str, keeps_named: dict[str, bool]) -> str:
    """Why a form that passed its check is still wrong on this path ('' when it is not)."""
    if path != "transaction":
        return ""
    if form in SQL_PREPARED:
        return "unsafe: SQL PREPARE is per server link"
    if form in PROTOCOL_PREPARED and not keeps_named.get(path, False):
        return "correct by luck: PgBouncer < 1.21 lets clients share named statements"
    if form in CHAINED:
        return "holds its server link throughout: pool_size >= threads"
    return ""


def report(
    results: dict[str, list[dict[str, Any]]],
    paths: list[str],
    forms: list[str],
    args: argparse.Namespace,
    notes: list[str],
    keeps_named: dict[str, bool],
) -> None:
    def good(cell: str) -> list[dict[str, Any]]:
        return [r for r in results.get(cell, []) if r["check"] == "ok"]

    def med(cell: str, key: str) -> float:
        return c.median([float(r[key]) for r in good(cell)])

    footnotes: list[str] = []  # failures and caveats, printed under the table

    def mark(text: str) -> str:
        if text not in footnotes:
            footnotes.append(text)
        return f"[{footnotes.index(text) + 1}]"

    rows = []
    for path in paths:
        tool = f"{path}|{TOOL_FORM[path]}"
        for form in forms:
            cell = f"{path}|{form}"
            runs = results[cell]
            failures = [r["check"] for r in runs if r["check"] != "ok"]
            if not failures:
                verdict = "ok"
            else:
                verdict = f"ok {len(runs) - len(failures)}/{len(runs)}, " if len(failures) < len(runs) else ""
                verdict += f"FAILED {len(failures)}/{len(runs)} {mark(failures[0].removeprefix('FAILED '))}"
            why = unsafe(path, form, keeps_named)
            if why and len(failures) < len(runs):
                verdict += f" {mark(why)}"
            ratio = med(cell, "msg_s") / med(tool, "msg_s") if good(cell) and good(tool) else float("nan")
            rows.append(
                [
                    path,
                    form + (" (tool)" if form == TOOL_FORM[path] else ""),
                    str(FORMS[form]),
                    c.fmt(med(cell, "msg_s")),
                    c.fmt(ratio, 3),
                    c.fmt(med(cell, "client_us"), 0),
                    c.fmt(med(cell, "server_us"), 0),
                    c.fmt(med(cell, "bouncer_us"), 0),
                    verdict,
                ]
            )
    c.print_table(
        [
            "path",
            "form",
            "trips/msg",
            "msg/s",
            "x tool's form",
            "client us/msg",
            "server us/msg",
            "bouncer us/msg",
            "exactly once",
        ],
        rows,
        f"medians of {args.repeat} interleaved rounds; {args.threads} threads, {args.messages} messages of"
        f" {args.messages + MARGIN} prefilled, -orders {ORDERS}, claim indexed, complete_mark, no audit",
    )
    for number, text in enumerate(footnotes, 1):
        print(f"[{number}] {text}")
    for note in notes:
        print(note)
    print(
        "x tool's form: msg/s over the form the tool uses on that path (prepare-sql direct and in"
        " session pooling, function-sql-2rt behind a transaction pooler).\nCPU per message over the"
        " measured loop: client = this process (all threads), server = every server process."
        " Figures only from runs whose check passed."
    )
    for cell, runs in results.items():
        print(
            f"{cell.replace('|', ' ')}: "
            + ", ".join(c.fmt(r["msg_s"]) + ("" if r["check"] == "ok" else " (failed)") for r in runs)
        )


if __name__ == "__main__":
    main()
