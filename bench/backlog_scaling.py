"""Backlog scaling: claim throughput with a 1,000,000-message backlog against a 10,000-message one.

Target: the index-driven ordered claim (`indexed`) keeps at least 0.8 x its 10k-backlog
throughput at a 1M backlog. The seed's query is measured the same way to show why it matters (it
scans the table, so it collapses).

Method (and why). "Throughput at a backlog of N" means processing messages while about N are
pending. The tool cannot do that: -fill-db N processes all N messages, so a 1M run drains through
every backlog from 1M to 0 (and would take ~10 minutes here, hours for the seed). So this script
measures the claim the tool runs, at a fixed backlog, with pgbench:

1. recreate the table exactly as the tool does (schema.sql + the strategy's schema.sql), in a
   database of the bench's own (a run of the tool refuses tables it did not create);
2. prefill N messages by SQL the way the tool's producer does (msg_id 1..N, distinct increasing
   time_added, random type1..type3 and order_id 1..K, status 'N');
3. VACUUM ANALYZE it and switch autovacuum off for it (a queue that holds a standing backlog has
   statistics, and no autovacuum pass lands in the middle of one cell and not another; --no-analyze
   skips the VACUUM ANALYZE: a table without statistics, as a -rate run's table is until autovacuum
   first comes);
4. time one claim alone (rolled back), then run `pgbench -n -M prepared -c C -j 2 -t M/C` with the
   tool's transaction (BEGIN; claim for a random type, msg_id captured with \\gset; complete_mark;
   COMMIT; the script is shown by bench/overhead_vs_pgbench.py and built by _pgbench.pgbench_script);
5. msg/s = messages completed (counted in the table) / pgbench's run time.

Every backlog processes the same M messages with the same C clients from a fresh table, so the only
difference between the cells is how many other messages are pending: M is at most half the smallest
backlog, so the backlog stays close to N throughout. Work time is 0, so the claim's cost is what is
measured; what the tool adds per message is constant (measured by bench/overhead_vs_pgbench.py).
The seed processes far fewer messages (--seed-messages) because at 1M each claim takes seconds.

    python bench/backlog_scaling.py                              # about 2-3 minutes on 2 cores
    python bench/backlog_scaling.py --claims indexed,advisory,fifo --messages 20000 --repeat 5
    python bench/backlog_scaling.py --no-analyze                 # a table without statistics
"""

from __future__ import annotations

import argparse
import math
import time

import _common as c
import _pgbench as pgb
import psycopg

TARGET = 0.8


def single_claim_ms(dsn: str, strategy: c.QueueDesign, times: int = 3) -> float:
    """Median time of one claim for type1 with nothing else running, each rolled back, after one
    warm-up on the same connection."""
    sql = pgb.strip_sql(strategy.claim.text)
    samples = []
    with psycopg.connect(dsn) as conn:
        cursor = psycopg.RawCursor(conn)
        for _ in range(times + 1):
            began = time.perf_counter()
            cursor.execute(sql, pgb.claim_params(sql))
            cursor.fetchall()
            samples.append((time.perf_counter() - began) * 1000)
            conn.rollback()
    return c.median(samples[1:])


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backlogs", default="10000,1000000", help="comma list (default 10000,1000000)")
    parser.add_argument("--claims", default="indexed,seed", help="strategies (default indexed,seed)")
    parser.add_argument("--clients", type=int, default=6, help="pgbench clients (default 6)")
    parser.add_argument(
        "--messages", type=int, default=4000, help="messages processed per cell (default 4000)"
    )
    parser.add_argument(
        "--seed-messages", type=int, default=12, help="messages per cell for the seed (default 12)"
    )
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--no-analyze", action="store_true", help="no VACUUM ANALYZE after the prefill")
    parser.add_argument("--protocol", default="prepared", choices=["simple", "extended", "prepared"])
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()

    backlogs = sorted(int(x) for x in args.backlogs.split(",") if x.strip())
    claims = c.comma_list(args.claims)
    strategies = {name: c.load_design(name) for name in claims}
    scripts = {name: pgb.pgbench_script(s) for name, s in strategies.items()}

    def messages_for(claim: str) -> int:
        wanted = args.seed_messages if claim == "seed" else args.messages
        return max(args.clients, min(wanted, backlogs[0] // 2))

    cells = [f"{claim}@{backlog}" for claim in claims for backlog in backlogs]
    print(
        f"method: prefill N by SQL{'' if args.no_analyze else ' + VACUUM ANALYZE'}, autovacuum off,"
        f" then pgbench -n -M {args.protocol}"
        f" -c {args.clients} -j 2 -t M/{args.clients} with the tool's claim+complete transaction;"
        f" -orders {args.orders}; M = " + ", ".join(f"{claim} {messages_for(claim)}" for claim in claims)
    )

    with c.server_from_args(args.dsn) as server:
        dsn = pgb.bench_database(server.dsn)  # its own database: the queue is built by SQL

        def measure(cell: str, _r: int) -> dict[str, float]:
            claim, backlog = cell.split("@")
            began = time.monotonic()
            pgb.prepare_queue(
                dsn,
                strategies[claim],
                int(backlog),
                args.orders,
                analyze=False,
                vacuum=not args.no_analyze,
                autovacuum=False,
            )
            prefill_s = time.monotonic() - began
            alone = single_claim_ms(dsn, strategies[claim])
            per_client = math.ceil(messages_for(claim) / args.clients)
            res = pgb.run_pgbench(server, dsn, scripts[claim], args.clients, per_client, args.protocol)
            return {
                "msg_s": res.msg_per_s,
                "claim_ms": alone,
                "processed": res.processed,
                "prefill_s": prefill_s,
            }

        runs = c.interleaved(cells, args.repeat, measure)

    rows = []
    for claim in claims:
        base = c.median([r["msg_s"] for r in runs[f"{claim}@{backlogs[0]}"]])
        for backlog in backlogs:
            cell = runs[f"{claim}@{backlog}"]
            rate = c.median([r["msg_s"] for r in cell])
            ratio = rate / base if base else float("nan")
            is_base = backlog == backlogs[0]
            rows.append(
                [
                    claim,
                    f"{backlog:,}",
                    c.fmt(rate),
                    c.fmt(c.median([r["processed"] for r in cell]), 0),
                    c.fmt(c.median([r["claim_ms"] for r in cell]), 2),
                    "1 (base)" if is_base else c.fmt(ratio, 3),
                    ""
                    if is_base
                    else (c.verdict(ratio, TARGET) if claim != "seed" else "(collapse expected)"),
                    ", ".join(c.fmt(r["msg_s"]) for r in cell),
                ]
            )
    c.print_table(
        [
            "claim",
            "backlog",
            "msg/s",
            "messages",
            "1 claim alone ms",
            "ratio",
            f">={TARGET}",
            "all runs msg/s",
        ],
        rows,
        f"medians of {args.repeat} interleaved rounds; {args.clients} clients, work 0,"
        f" {'not ' if args.no_analyze else ''}vacuumed+analyzed, autovacuum off;"
        f" ratio = msg/s at that backlog / at {backlogs[0]:,}",
    )


if __name__ == "__main__":
    main()
