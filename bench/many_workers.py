"""Hundreds of consumers from one process: client CPU per message and memory at 12 and 500 workers
through PgBouncer (transaction pooling, pool 20), at a steady rate.

    pgmq-sim -duration D -rate R -workers N -work-ms 1-10 -orders 100 -claim indexed -wakeup notify
             -dsn <PgBouncer> -listen-dsn <server>

Each cell runs the CLI through a real PgBouncer (Debian's, started by tests/pooler.py's helper) in
front of a TCP server of the script's own (or --dsn, which needs a TCP host and a password). The
notification listener connects to the server directly (LISTEN needs a session). Per cell: msg/s,
client CPU per message (JSON `client`) and by thread part, the tool's peak RSS (ru_maxrss from
wait4), e2e p50/p99, audit. Rounds are interleaved; medians of --repeat rounds.

Targets: the largest worker count at most 1.2x the client CPU per message of the smallest, and at
most 100 MB peak RSS.

    python bench/many_workers.py                       # about 3 minutes
    python bench/many_workers.py --workers 12,200,500 --rate 800 --duration 30
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c

CPU_RATIO_TARGET = 1.2
RSS_TARGET_MB = 100.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", default="12,500", help="worker counts, comma list (default 12,500)")
    parser.add_argument("--rate", type=float, default=400, help="msg/s (default 400)")
    parser.add_argument("--duration", type=float, default=20, help="seconds per run (default 20)")
    parser.add_argument("--pool", type=int, default=20, help="PgBouncer pool size (default 20)")
    c.common_args(parser)
    args = parser.parse_args()
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
            dsn, "transaction", pool_size=args.pool, extra={"max_client_conn": "2000"}
        ) as bouncer:

            def measure(cell: str, _round: int) -> dict[str, Any]:
                # the CLI's own -dsn is added by run_cli when given; here both DSNs are in the args
                return c.run_cli(cli_args(int(cell), bouncer.dsn, dsn), None)

            runs = c.interleaved([str(n) for n in counts], args.repeat, measure, label="workers=")

    def part(run: dict[str, Any], name: str) -> float | None:
        local = next((p for p in run["client"]["processes"] if p["runner"] == "local"), {})
        return (local.get("cpu_us_per_msg_by_part") or {}).get(name)

    rows, cpu = [], {}
    for n in counts:
        r = runs[str(n)]
        cpu[n] = c.median_at(r, "client", "cpu_us_per_msg")
        rows.append(
            [
                str(n),
                c.fmt(c.median_at(r, "throughput_per_s")),
                c.fmt(cpu[n], 0),
                c.fmt(c.median([v for x in r if (v := part(x, "workers")) is not None]), 0),
                c.fmt(c.median([v for x in r if (v := part(x, "producer")) is not None]), 0),
                c.fmt(c.median([v for x in r if (v := part(x, "listener")) is not None]), 0),
                c.fmt(c.median([x["_bench"]["max_rss_mb"] for x in r]), 0),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p50"), 1),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p99"), 1),
                c.fmt(c.median([x["empty_claims"] / max(1, x["processed"]) for x in r]), 2),
                c.audit_verdicts(r),
            ]
        )
    c.print_table(
        ["workers", "msg/s", "client us/msg", "workers us", "producer us", "listener us", "peak RSS MB",
         "e2e p50", "e2e p99", "empty/msg", "audit"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -rate {args.rate:g}, PgBouncer pool {args.pool}",
    )  # fmt: skip
    small, large = min(counts), max(counts)
    ratio = cpu[large] / cpu[small] if cpu[small] else None
    rss = c.median([x["_bench"]["max_rss_mb"] for x in runs[str(large)]])
    print(
        f"\nclient CPU per message, {large} / {small} workers: {c.fmt(ratio, 2)}x"
        f" (target <= {CPU_RATIO_TARGET:g}x): {c.verdict(ratio, CPU_RATIO_TARGET, higher_is_better=False)}"
    )
    print(
        f"peak RSS at {large} workers: {c.fmt(rss, 0)} MB (target <= {RSS_TARGET_MB:g} MB):"
        f" {c.verdict(rss, RSS_TARGET_MB, higher_is_better=False)}"
    )


if __name__ == "__main__":
    main()
