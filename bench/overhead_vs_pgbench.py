"""Tool overhead: pgmq-sim's messages/s against pgbench running the same transaction.

Target: with zero work time the tool reaches at least 0.9 x what pgbench gets with the same
SQL, the same number of clients and the same server.

Both sides, per round and interleaved (order alternates), on one server:

* tool:    pgmq-sim -fill-db N -workers C -work-ms 0 -no-audit -orders K -claim S
           (COPY prefill of N messages, then C worker threads drain them; msg/s from its JSON).
* pgbench: the table recreated (in a database of the bench's own: a run of the tool refuses tables
           it did not create) from schema.sql + the strategy's schema.sql and prefilled by SQL the
           way the tool's producer fills it (msg_id 1..N', distinct increasing time_added, random type
           and order_id 1..K, status 'N'; N' = N plus a margin, since pgbench picks the type at random),
           then `pgbench -n -M prepared -c C -j 2 -t N/C` with this transaction:

               \\set t random(1, 3)
               BEGIN;
               with claimed as (<claim.sql, $1 -> 'type' || :t>)
                 select coalesce(max(msg_id), 0) as claimed_id, max(clock_timestamp()) from claimed \\gset
               update msg_queue set status = 'P', time_processed = clock_timestamp()
                 where msg_id = :claimed_id returning time_added;
               COMMIT;

           i.e. the statements the tool runs (it wraps the claim the same way and its completion is
           complete_mark.sql), one round trip each and prepared (-M prepared). The tool prepares the
           two statements on the server and sends them as "begin; execute claim" and "execute
           complete; commit": two round trips per message.
           An empty claim yields id 0 and a no-op completion instead of aborting the client; pgbench's
           msg/s counts messages completed in the table, divided by pgbench's run time (transactions /
           tps without connection time), so empty claims do not count.

Both sides ANALYZE the table right after the prefill (the tool does since it learned to; the
pgbench side does it in the prefill). --naptime N sets autovacuum_naptime on the embedded server
(default 0: leave the server's 60 s, so autovacuum rarely lands inside a run of a few seconds).

Default claim is `indexed` (the seed's query scans the table, which would dominate both sides);
--claim seed works too. -orders 100 (300 groups) keeps empty claims rare with zero work time.

    python bench/overhead_vs_pgbench.py                      # about 2 minutes on 2 cores
    python bench/overhead_vs_pgbench.py --clients 3,6,12 --messages 50000 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import threading
import time

import _common as c
import psycopg

TARGET = 0.9


def psycopg_loop(dsn: str, strategy: c.ClaimStrategy, clients: int, messages: int) -> float:
    """A bare worker loop with nothing else: C threads, one connection each, types dealt
    round-robin, the tool's wrapped claim and complete_mark.sql issued one by one (BEGIN, claim,
    completion, COMMIT: four round trips, psycopg auto-preparing), msg/s until N are done."""
    claim = strategy.wrapped_claim_sql
    complete = c.statement("complete_mark")
    lock = threading.Lock()
    done = threading.Event()
    count = [0]
    start = threading.Barrier(clients + 1)
    conns = [psycopg.connect(dsn) for _ in range(clients)]

    def work(conn: psycopg.Connection, queue_type: str) -> None:
        cursor = psycopg.RawCursor(conn)
        start.wait()
        while not done.is_set():
            cursor.execute(claim, (queue_type,))
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--messages", type=int, default=10000, help="messages processed per run (default 10000)"
    )
    parser.add_argument(
        "--clients", default="6", help="comma list of client/worker counts, each >= 3 (default 6)"
    )
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--claim", default="indexed", help="claim strategy (default indexed)")
    parser.add_argument("--protocol", default="prepared", choices=["simple", "extended", "prepared"])
    parser.add_argument("--threads", type=int, default=2, help="pgbench -j (default 2)")
    parser.add_argument("--no-psycopg", action="store_true", help="skip the bare psycopg-threads baseline")
    parser.add_argument(
        "--naptime",
        type=int,
        default=0,
        help="autovacuum_naptime in s on the embedded server (default 0: leave it)",
    )
    c.common_args(parser)
    args = parser.parse_args()

    strategy = c.load_strategy(args.claim, None)
    script = c.pgbench_script(strategy)
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
            "-no-audit",
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
        bench_dsn = c.bench_database(server.dsn)  # pgbench's and psycopg's hand-built queue
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
                        "cpu_ms_per_msg": data["_bench"]["cpu_s"] * 1000 / max(1, data["processed"]),
                        "empty": float(data["empty_claims"]),
                    }
                c.prepare_queue(bench_dsn, strategy, args.messages + margin, args.orders, analyze=True)
                if side == "psycopg":
                    return {"msg_s": psycopg_loop(bench_dsn, strategy, clients, args.messages)}
                res = c.run_pgbench(server, bench_dsn, script, clients, per_txn, args.protocol, args.threads)
                return {
                    "msg_s": res.msg_per_s,
                    "tps": res.tps,
                    "empty": float(res.transactions - res.processed),
                    "cpu_ms_per_msg": res.cpu_s * 1000 / max(1, res.processed),
                }

            sides = ["tool", "pgbench"] + ([] if args.no_psycopg else ["psycopg"])
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
        bare = med(sides["psycopg"], "msg_s") if "psycopg" in sides else None
        rows.append(
            [
                str(clients),
                c.fmt(tool),
                c.fmt(bench),
                c.fmt(med(sides["pgbench"], "tps")),
                c.fmt(ratio, 3),
                c.verdict(ratio, TARGET),
                c.fmt(bare),
                c.fmt(tool / bare if bare else None, 3),
                c.fmt(med(sides["tool"], "cpu_ms_per_msg"), 3),
                c.fmt(med(sides["pgbench"], "cpu_ms_per_msg"), 3),
                c.fmt(med(sides["tool"], "empty"), 0) + " / " + c.fmt(med(sides["pgbench"], "empty"), 0),
            ]
        )
    c.print_table(
        [
            "clients",
            "tool msg/s",
            "pgbench msg/s",
            "pgbench tps",
            "tool/pgbench",
            f">={TARGET}",
            "psycopg msg/s",
            "tool/psycopg",
            "tool CPU ms/msg",
            "pgbench CPU ms/msg",
            "empty tool/pgb",
        ],
        rows,
        f"medians of {args.repeat} interleaved rounds; claim {args.claim}, -orders {args.orders},"
        f" {args.messages} messages, work 0, no audit",
    )
    for clients, sides in results.items():
        print(
            f"c={clients} all runs msg/s: "
            + "; ".join(
                f"{side} " + ", ".join(c.fmt(r["msg_s"]) for r in runs) for side, runs in sides.items()
            )
        )
    print(
        "psycopg = the tool's statements one by one (four round trips) in a bare loop of Python threads"
        " (no stats, log or pool): what a plain Python + psycopg client gets.\n"
        "CPU ms/msg = the client process's own user+system CPU per message (pgmq-sim: start-up and prefill"
        " included); on a small machine the client's CPU is taken from the server's."
    )


if __name__ == "__main__":
    main()
