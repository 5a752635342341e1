"""Tool overhead: pgmq-sim's messages/s and client CPU against pgbench running the same transaction.

Targets (issues 17 and 33), at zero work on shared cores (client and server on the same 2 cores):
- the tool at least 1.0 x pgbench's msg/s, at 6 and at 12 clients (issue 33: one event loop per
  process drives every worker's connection, as pgbench's one thread does);
- the tool's client CPU at most 0.05 ms per message in the worker phase (its JSON's
  client.cpu_us_per_msg), with the audit and the run log on;
- at most 0.08 ms per message for the whole process (start-up, prefill, audit and report
  included; user + system CPU from wait4), over 30k messages.

Both sides, per round and interleaved (order alternates), on one server:

* tool:    pgmq-sim -fill-db N -workers C -work-ms 0 -orders K -claim S   (audit and log on;
           --no-audit adds -no-audit). COPY prefill of N messages, then C workers (tasks on one
           event loop) drain them.
* pgbench: the table recreated (in a database of the bench's own: a run of the tool refuses tables
           it did not create) from schema.sql + the strategy's schema.sql (+ the journal when
           audited) and prefilled by SQL the way the tool's producer fills it, then
           `pgbench -n -M prepared -c C -j 2 -t N/C` with this transaction:

               \\set t random(1, 3)
               BEGIN;
               with claimed as (<claim.sql, $1 -> 'type' || :t>)
                 select coalesce(max(msg_id), 0) as claimed_id, ... from claimed \\gset
               <journal_entry.sql (not with --no-audit)>; <complete_mark.sql>;
               COMMIT;

           i.e. the statements the tool runs, prepared. The tool sends a message's completion, its
           commit and the next claim in one round trip; pgbench takes one per statement.
           An empty claim yields id 0 and a no-op completion instead of aborting the client; pgbench's
           msg/s counts messages completed in the table, divided by pgbench's run time.

Both sides ANALYZE the table right after the prefill. --naptime N sets autovacuum_naptime on the
embedded server (default 0: leave the server's 60 s).

Default claim is `indexed` (the seed's query scans the table, which would dominate both sides);
-orders 100 (300 groups) keeps empty claims rare with zero work time.

    python bench/overhead_vs_pgbench.py                      # about 5 minutes on 2 cores
    python bench/overhead_vs_pgbench.py --clients 6 --messages 1500 --repeat 1   # quick form
"""

from __future__ import annotations

import argparse
import math
import threading
import time

import _common as c
import _pgbench as pgb
import psycopg

TARGET = 1.0
WORKER_PHASE_MS = 0.05
WHOLE_PROCESS_MS = 0.08


def psycopg_loop(dsn: str, strategy: c.QueueDesign, clients: int, messages: int) -> float:
    """A bare worker loop with nothing else: C threads, one connection each, types dealt
    round-robin, the design's claim as written and complete_mark.sql issued one by one (BEGIN, claim,
    completion, COMMIT: four round trips, psycopg auto-preparing), msg/s until N are done."""
    claim = strategy.claim.text
    complete = pgb.seed_completion()
    lock = threading.Lock()
    done = threading.Event()
    count = [0]
    start = threading.Barrier(clients + 1)
    conns = [psycopg.connect(dsn) for _ in range(clients)]

    def work(conn: psycopg.Connection, queue_type: str) -> None:
        cursor = psycopg.RawCursor(conn)
        start.wait()
        while not done.is_set():
            cursor.execute(claim, pgb.claim_params(claim, queue_type))
            row = cursor.fetchone()
            if row is None:
                conn.rollback()
                time.sleep(0.001)
                continue
            cursor.execute(complete, (row[0],))
            cursor.fetchone()
            conn.commit()
            with lock:
                count[0] += 1
                if count[0] >= messages:
                    done.set()

    threads = [
        threading.Thread(target=work, args=(conn, c.QUEUE_TYPES[i % 3]), daemon=True)
        for i, conn in enumerate(conns)
    ]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    done.wait()
    elapsed = time.perf_counter() - began
    for t in threads:
        t.join()
    for conn in conns:
        conn.close()
    return count[0] / elapsed


def set_naptime(dsn: str, seconds: int) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("show autovacuum_naptime").fetchone()
        before = row[0] if row else "?"
        conn.execute(f"alter system set autovacuum_naptime = {int(seconds)}")
        conn.execute("select pg_reload_conf()")
    return str(before)


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--messages", type=int, default=30000, help="messages processed per run (default 30000)"
    )
    parser.add_argument(
        "--clients", default="6,12", help="comma list of client/worker counts, each >= 3 (default 6,12)"
    )
    parser.add_argument("--no-audit", action="store_true", help="run the tool with -no-audit")
    parser.add_argument("--psycopg", action="store_true", help="add a bare psycopg-threads baseline")
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--claim", default="indexed", help="claim strategy (default indexed)")
    parser.add_argument("--protocol", default="prepared", choices=["simple", "extended", "prepared"])
    parser.add_argument("--threads", type=int, default=2, help="pgbench -j (default 2)")
    parser.add_argument(
        "--naptime",
        type=int,
        default=0,
        help="autovacuum_naptime in s on the embedded server (default 0: leave it)",
    )
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    audited = not args.no_audit

    strategy = c.load_design(args.claim)
    script = pgb.pgbench_script(strategy, audited)
    client_counts = [int(x) for x in args.clients.split(",") if x.strip()]
    margin = max(2000, args.messages // 10)

    def tool_args(clients: int) -> list[str]:
        return [
            "-fill-db",
            str(args.messages),
            "-workers",
            str(clients),
            "-work-ms",
            "0",
            *([] if audited else ["-no-audit"]),
            "-orders",
            str(args.orders),
            "-claim",
            args.claim,
        ]

    print(
        "tool:    "
        + c.cli_command_text(tool_args(client_counts[0])).replace(
            f"-workers {client_counts[0]}", "-workers C"
        )
    )
    print(
        f"pgbench: pgbench -n -M {args.protocol} -c C -j {args.threads} -t {args.messages}/C -f SCRIPT"
        f" on {args.messages + margin} prefilled messages; SCRIPT:"
    )
    print("    " + script.strip().replace("\n", "\n    "))

    with c.server_from_args(args.dsn) as server:
        bench_dsn = pgb.bench_database(server.dsn)  # pgbench's and psycopg's hand-built queue
        if args.dsn is None and args.naptime > 0:
            before = set_naptime(server.dsn, args.naptime)
            print(f"autovacuum_naptime: {before} -> {args.naptime}s")

        results: dict[int, dict[str, list[dict[str, float]]]] = {}
        for clients in client_counts:
            per_txn = math.ceil(args.messages / clients)

            def measure(
                side: str, _r: int, clients: int = clients, per_txn: int = per_txn
            ) -> dict[str, float]:
                if side == "tool":
                    data = c.run_cli(tool_args(clients), server.dsn)
                    return {
                        "msg_s": float(data["throughput_per_s"]),
                        "worker_ms_per_msg": float(data["client"]["cpu_us_per_msg"]) / 1000,
                        "cpu_ms_per_msg": data["_bench"]["cpu_s"] * 1000 / max(1, data["processed"]),
                        "empty": float(data["empty_claims"]),
                    }
                pgb.prepare_queue(
                    bench_dsn, strategy, args.messages + margin, args.orders, analyze=True, journal=audited
                )
                if side == "psycopg":
                    return {"msg_s": psycopg_loop(bench_dsn, strategy, clients, args.messages)}
                res = pgb.run_pgbench(
                    server, bench_dsn, script, clients, per_txn, args.protocol, args.threads
                )
                return {
                    "msg_s": res.msg_per_s,
                    "tps": res.tps,
                    "empty": float(res.transactions - res.processed),
                    "cpu_ms_per_msg": res.cpu_s * 1000 / max(1, res.processed),
                }

            sides = ["tool", "pgbench"] + (["psycopg"] if args.psycopg else [])
            results[clients] = c.interleaved(sides, args.repeat, measure, f"c={clients} ")

    report(results, args)


def report(results: dict[int, dict[str, list[dict[str, float]]]], args: argparse.Namespace) -> None:
    def med(runs: list[dict[str, float]], key: str) -> float:
        return c.median([r[key] for r in runs])

    rows = []
    for clients, sides in results.items():
        tool = med(sides["tool"], "msg_s")
        bench = med(sides["pgbench"], "msg_s")
        ratio = tool / bench if bench else float("nan")
        worker_ms = med(sides["tool"], "worker_ms_per_msg")
        whole_ms = med(sides["tool"], "cpu_ms_per_msg")
        row = [
            str(clients),
            c.fmt(tool),
            c.fmt(bench),
            c.fmt(ratio, 3) + " " + c.verdict(ratio, TARGET),
            c.fmt(worker_ms, 3) + " " + c.verdict(worker_ms, WORKER_PHASE_MS, higher_is_better=False),
            c.fmt(whole_ms, 3) + " " + c.verdict(whole_ms, WHOLE_PROCESS_MS, higher_is_better=False),
            c.fmt(med(sides["pgbench"], "cpu_ms_per_msg"), 3),
            c.fmt(med(sides["tool"], "empty"), 0) + " / " + c.fmt(med(sides["pgbench"], "empty"), 0),
        ]
        if "psycopg" in sides:
            row.append(c.fmt(med(sides["psycopg"], "msg_s")))
        rows.append(row)
    headers = [
        "clients",
        "tool msg/s",
        "pgbench msg/s",
        f"tool/pgbench (>={TARGET})",
        f"tool CPU ms/msg, workers (<={WORKER_PHASE_MS})",
        f"tool CPU ms/msg, process (<={WHOLE_PROCESS_MS})",
        "pgbench CPU ms/msg",
        "empty tool/pgb",
    ]
    if args.psycopg:
        headers.append("psycopg msg/s")
    c.print_table(
        headers,
        rows,
        f"medians of {args.repeat} interleaved rounds; claim {args.claim}, -orders {args.orders},"
        f" {args.messages} messages, work 0, audit {'off' if args.no_audit else 'on'}, log on",
    )
    for clients, sides in results.items():
        print(
            f"c={clients} all runs msg/s: "
            + "; ".join(
                f"{side} " + ", ".join(c.fmt(r["msg_s"]) for r in runs) for side, runs in sides.items()
            )
        )
    print(
        "workers = the tool's CPU while its workers drain the table, once all had their sessions (its"
        " JSON's client.cpu_us_per_msg);"
        " process = the whole process, start-up, prefill, audit and report included (wait4).\n"
        "psycopg = the tool's statements one by one (four round trips) in a bare loop of Python threads."
    )


if __name__ == "__main__":
    main()
