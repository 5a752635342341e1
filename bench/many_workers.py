"""Thousands of consumers from one process: client CPU per message and memory at 12, 500 and 2,000
workers through PgBouncer (transaction pooling, pool 20), at a steady rate.

    pgmq-sim -duration D -rate R -workers N -work-ms 1-10 -orders 100 -claim indexed -wakeup notify
             -dsn <PgBouncer> -listen-dsn <server>

Each cell runs the CLI through a real PgBouncer (Debian's, started by tests/pooler.py's helper) in
front of a TCP server of the script's own (or --dsn, which needs a TCP host and a password). The
notification listener connects to the server directly (LISTEN needs a session). Per cell: msg/s,
client CPU per message (the JSON's `client.cpu_us_per_msg`: the run once every worker had its
session), the whole process's CPU per message from its start to its exit (wait4: start-up,
install, logins, audit and report included), the workers' logins apart (the JSON's
`client.logins`: a SCRAM login costs the client about 2 ms of CPU, which N workers pay once), the
tool's peak RSS (ru_maxrss from wait4), e2e p50/p99, audit. Rounds are interleaved; medians of
--repeat rounds.

Targets (issue 33): 500 workers at most 1.2x the client CPU per message of 12 and at most 100 MB
peak RSS; 2,000 at most 2x and 250 MB.

    python bench/many_workers.py                       # about 5 minutes
    python bench/many_workers.py --workers 12,200,500 --rate 800 --duration 30
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c

TARGETS = {500: (1.2, 100.0), 2000: (2.0, 250.0)}  # workers: (CPU per message x the fewest, peak RSS MB)


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workers", default="12,500,2000", help="worker counts, comma list (default 12,500,2000)"
    )
    parser.add_argument("--rate", type=float, default=400, help="msg/s (default 400)")
    parser.add_argument("--duration", type=float, default=20, help="seconds per run (default 20)")
    parser.add_argument("--pool", type=int, default=20, help="PgBouncer pool size (default 20)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    counts = [int(w) for w in c.comma_list(args.workers)]

    def cli_args(workers: int | str, bouncer: str, direct: str) -> list[str]:
        return [
            "-duration", f"{args.duration:g}", "-rate", f"{args.rate:g}", "-workers", str(workers),
            "-work-ms", "1-10", "-orders", "100", "-claim", "indexed", "-wakeup", "notify",
            "-dsn", bouncer, "-listen-dsn", direct,
        ]  # fmt: skip

    print("many workers: " + c.cli_command_text(cli_args("N", "PGBOUNCER", "SERVER")))
    with c.tcp_server(args.dsn) as (dsn, label, _pg):
        print(f"server: {label}; PgBouncer transaction pooling, pool {args.pool}", flush=True)
        with c.pgbouncer_for(
            dsn, "transaction", pool_size=args.pool, extra={"max_client_conn": str(max(counts) + 100)}
        ) as bouncer:

            def measure(cell: str, _round: int) -> dict[str, Any]:
                # the CLI's own -dsn is added by run_cli when given; here both DSNs are in the args
                return c.run_cli(cli_args(int(cell), bouncer.dsn, dsn), None)

            runs = c.interleaved([str(n) for n in counts], args.repeat, measure, label="workers=")

    def logins(run: dict[str, Any], key: str) -> float | None:
        return (run["client"].get("logins") or {}).get(key)

    rows, cpu, whole = [], {}, {}
    for n in counts:
        r = runs[str(n)]
        cpu[n] = c.median_at(r, "client", "cpu_us_per_msg")
        whole[n] = c.median([x["_bench"]["cpu_s"] * 1e6 / max(1, x["processed"]) for x in r])
        rows.append(
            [
                str(n),
                c.fmt(c.median_at(r, "throughput_per_s")),
                c.fmt(cpu[n], 0),
                c.fmt(whole[n], 0),
                c.fmt(c.median([v for x in r if (v := logins(x, "cpu_s")) is not None]), 2),
                c.fmt(c.median([v for x in r if (v := logins(x, "cpu_ms_each")) is not None]), 2),
                c.fmt(c.median([v for x in r if (v := logins(x, "seconds")) is not None]), 2),
                c.fmt(c.median([x["_bench"]["max_rss_mb"] for x in r]), 0),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p50"), 1),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p99"), 1),
                c.fmt(c.median([x["empty_claims"] / max(1, x["processed"]) for x in r]), 2),
                c.audit_verdicts(r),
            ]
        )
    c.print_table(
        ["workers", "msg/s", "client us/msg", "process us/msg", "logins CPU s", "ms/login", "logins s",
         "peak RSS MB", "e2e p50", "e2e p99", "empty/msg", "audit"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -rate {args.rate:g}, PgBouncer pool {args.pool};"
        " client = the run once every worker had its session, process = start to exit (wait4)",
    )  # fmt: skip
    small = min(counts)
    for large in sorted(n for n in counts if n != small):
        ratio_target, rss_target = TARGETS.get(large, (None, None))
        ratio = cpu[large] / cpu[small] if cpu[small] else None
        whole_ratio = whole[large] / whole[small] if whole[small] else None
        rss = c.median([x["_bench"]["max_rss_mb"] for x in runs[str(large)]])
        bound = f" (target <= {ratio_target:g}x): " if ratio_target else ": "
        print(
            f"\nclient CPU per message, {large} / {small} workers: {c.fmt(ratio, 2)}x{bound}"
            + (c.verdict(ratio, ratio_target, higher_is_better=False) if ratio_target else "no target")
            + f"; the whole process: {c.fmt(whole_ratio, 2)}x"
        )
        bound = f" (target <= {rss_target:g} MB): " if rss_target else ": "
        print(
            f"peak RSS at {large} workers: {c.fmt(rss, 0)} MB{bound}"
            + (c.verdict(rss, rss_target, higher_is_better=False) if rss_target else "no target")
        )


if __name__ == "__main__":
    main()
