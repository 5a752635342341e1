"""Limits: runs whose limit is built in, the verdict each gets, and what the wait sampling costs.

Each case is one pgmq-sim run on one embedded server (--dsn: a server of yours), its JSON's
`limit` (resource and evidence) and its first advice line printed:

* workers:    -fill-db 3000 -workers 6 -work-ms 20 -orders 100 (300 groups; the workers are busy)
* ordering:   -fill-db 4000 -workers 12 -work-ms 5 -orders 1000 -key-skew zipf:2 (a hot key per type)
* claim-plan: -fill-db 50000 -duration 5 -workers 6 -work-ms 1 -orders 2 -claim seed (the seed's
              claim reads the backlog to find a free head)
* none:       -rate 50 -duration 5 -workers 6 -work-ms 40 -orders 100 -wakeup notify (far below
              capacity: the slowest 1% mostly their work)
* polling:    -rate 100 -duration 5 -workers 6 -work-ms 1 -orders 100 -poll-interval 0.2 (idle
              workers asleep: the slowest 1% mostly hidden, for up to a poll)
* pool:       -fill-db 3000 -workers 12 -orders 100 -work-ms 1-3 through PgBouncer (transaction
              pooling, pool 2) with -pooler-admin; skipped with the reason where pgbouncer is missing

every case with -claim indexed -poll-interval 0.02 unless it says otherwise. wal-flush is not built:
a slow fsync cannot be had honestly on this machine (its disk's flush is what it is), and a sleep
in the server would not be a flush.

The sampling's cost: an unpaced drain (-fill-db 20000 -workers 12 -work-ms 0 -orders 100 -claim
indexed) with -wait-sample-hz 0, 20 (the default) and 50, --repeat rounds with the order rotating;
the median throughput of each against none. Target: at most 2% at the default.

    python bench/limits.py                                   # about 3 minutes on 2 cores
    python bench/limits.py --repeat 1                        # about 1 minute
    python bench/limits.py --cases none --drain 1000 --repeat 1   # about 20 s
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c

FAST = ["-claim", "indexed", "-poll-interval", "0.02"]
CASES = {
    "workers": ["-fill-db", "3000", "-workers", "6", "-work-ms", "20", "-orders", "100", *FAST],
    "ordering": [
        "-fill-db", "4000", "-workers", "12", "-work-ms", "5", "-orders", "1000",
        "-key-skew", "zipf:2", *FAST,
    ],
    "claim-plan": [
        "-fill-db", "50000", "-duration", "5", "-workers", "6", "-work-ms", "1", "-orders", "2",
        "-claim", "seed",
    ],
    "none": [
        "-rate", "50", "-duration", "5", "-workers", "6", "-work-ms", "40", "-orders", "100", *FAST,
        "-wakeup", "notify",
    ],
    "polling": [
        "-rate", "100", "-duration", "5", "-workers", "6", "-work-ms", "1", "-orders", "100",
        "-claim", "indexed", "-poll-interval", "0.2",
    ],
}  # fmt: skip
POOL = ["-fill-db", "3000", "-workers", "12", "-orders", "100", "-work-ms", "1-3", *FAST]
DRAIN = ["-workers", "12", "-work-ms", "0", "-orders", "100", "-claim", "indexed"]


def row(case: str, data: dict[str, Any]) -> list[str]:
    limit = data.get("limit") or {}
    profile = limit.get("wait_profile") or {}
    top = ", ".join(f"{name} {share:.0%}" for name, share in list(profile.items())[:3])
    first = next((line for line in data.get("advice", []) if line.startswith("limit ")), "-")
    return [case, limit.get("resource", "?"), c.fmt(data["throughput_per_s"]), top or "-", first[:70]]


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    c.common_args(parser, repeat=3)
    parser.add_argument(
        "--cases", type=c.comma_list, default=[*CASES, "pool"], help="cases to run (default all)"
    )
    parser.add_argument(
        "--drain", type=int, default=20000, help="messages per sampling-cost run (default 20000)"
    )
    return parser


def main() -> None:
    args = arguments().parse_args()
    drain = ["-fill-db", str(args.drain), *DRAIN]
    rows = []
    evidence = []
    with c.server_from_args(args.dsn) as server:
        for case, cli_args in CASES.items():
            if case not in args.cases:
                continue
            print(f"{case}: pgmq-sim " + " ".join(cli_args), flush=True)
            data = c.run_cli(cli_args, server.dsn)
            rows.append(row(case, data))
            evidence.append(f"{case}: {data['limit']['evidence']}")

        def measure(cell: str, _r: int) -> dict[str, Any]:
            return c.run_cli([*drain, "-wait-sample-hz", cell], server.dsn)

        print("sampling cost: pgmq-sim " + " ".join(drain) + " -wait-sample-hz 0|20|50", flush=True)
        cost = c.interleaved(["0", "20", "50"], args.repeat, measure, "-wait-sample-hz ")
    try:
        if "pool" not in args.cases:
            raise RuntimeError("not asked for (--cases)")
        with c.tcp_server(args.dsn) as (dsn, _label, _pg), c.pgbouncer_for(dsn, "transaction", 2) as bouncer:
            print("pool: pgmq-sim " + " ".join(POOL) + " -dsn POOLER -pooler-admin CONSOLE", flush=True)
            data = c.run_cli([*POOL, "-pooler-admin", bouncer.admin_dsn], bouncer.dsn)
            rows.append(row("pool (PgBouncer, pool 2)", data))
            evidence.append(f"pool: {data['limit']['evidence']}")
    except RuntimeError as exc:
        rows.append(["pool", "skipped", "-", "-", str(exc)[:70]])
    c.print_table(["case", "limit", "msg/s", "wait profile (top 3)", "the limit's fix"], rows, "verdicts")
    for line in evidence:
        print(line)
    none = c.median_at(cost["0"], "throughput_per_s")
    cost_rows = []
    for hz in ("0", "20", "50"):
        msgs = c.median_at(cost[hz], "throughput_per_s")
        ticks = [(d.get("waits") or {}).get("ticks", 0) / d["elapsed_s"] for d in cost[hz]]
        cost_rows.append([hz, c.fmt(msgs), c.fmt(msgs / none if none else None, 3), c.fmt(c.median(ticks))])
    c.print_table(
        ["-wait-sample-hz", "msg/s (median)", "x none", "samples/s"],
        cost_rows,
        f"sampling cost: {' '.join(drain)}, {args.repeat} round(s)",
    )
    default = c.median_at(cost["20"], "throughput_per_s")
    print(
        "sampling at 20 Hz costs "
        + (f"{(1 - default / none) * 100:.1f}% of the throughput: " if none else "?: ")
        + c.verdict(default / none if none else None, 0.98)
    )


if __name__ == "__main__":
    main()
