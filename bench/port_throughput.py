"""Port throughput: the seed's workload shape scaled to this machine.

Runs `pgmq-sim -fill-db N -workers 12 -orders 2` with the default work time (1-10 ms) and the audit on,
once per claim strategy per round (default: seed, the Go tool's query, and indexed), rounds
interleaved, one embedded server for all runs. Prints the median messages/s, the ordering bound
(groups / mean work time: each group can finish at most one message per work time) and the share
of the bound reached, plus latency and the audit verdict.

There is no separate target here; the share is printed against the ordering-bound target (0.9) that
bench/ordering_bound.py checks, and indexed is shown as a ratio of seed.

    python bench/port_throughput.py                       # about 2-3 minutes on 2 cores
    python bench/port_throughput.py --fill-db 100000 --repeat 5
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c

TARGET_SHARE = 0.9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=20000, help="messages per run (default 20000)")
    parser.add_argument("--workers", type=int, default=12, help="worker threads (default 12)")
    parser.add_argument("--orders", type=int, default=2, help="order_ids per type; groups = 3x (default 2)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument(
        "--claims", default="seed,indexed", help="comma list of strategies (default seed,indexed)"
    )
    parser.add_argument(
        "--no-audit", action="store_true", help="pass -no-audit (default: audit on, as users run it)"
    )
    c.common_args(parser)
    args = parser.parse_args()

    claims = [x.strip() for x in args.claims.split(",") if x.strip()]

    def cli_args(claim: str) -> list[str]:
        out = ["-fill-db", str(args.fill_db), "-workers", str(args.workers), "-orders", str(args.orders)]
        out += ["-work-ms", args.work_ms, "-claim", claim]
        return out + (["-no-audit"] if args.no_audit else [])

    print("port throughput: " + c.cli_command_text(cli_args("<claim>")))
    with c.server_from_args(args.dsn) as pg:
        runs = c.interleaved(claims, args.repeat, lambda claim, _r: c.run_cli(cli_args(claim), pg.dsn))

    def med(claim: str, *path: str) -> float:
        values: list[float] = []
        for run in runs[claim]:
            value: Any = run
            for key in path:
                value = value[key]
            values.append(float(value))
        return c.median(values)

    rows = []
    for claim in claims:
        verdicts = sorted({(r.get("audit") or {}).get("verdict", "off") for r in runs[claim]})
        share = med(claim, "ordering_bound_share")
        rows.append(
            [
                claim,
                c.fmt(med(claim, "throughput_per_s")),
                c.fmt(med(claim, "ordering_bound_per_s")),
                c.fmt(med(claim, "work_mean_ms"), 2),
                c.fmt(share, 3),
                c.verdict(share, TARGET_SHARE),
                c.fmt(med(claim, "latency_ms", "e2e", "p50")),
                c.fmt(med(claim, "latency_ms", "claim", "p50"), 2),
                c.fmt(med(claim, "latency_ms", "claim", "p95"), 2),
                c.fmt(med(claim, "empty_claims"), 0),
                "/".join(verdicts),
            ]
        )
    c.print_table(
        [
            "claim",
            "msg/s",
            "bound/s",
            "work ms",
            "share",
            f">={TARGET_SHARE}",
            "e2e p50 ms",
            "claim p50 ms",
            "claim p95 ms",
            "empty",
            "audit",
        ],
        rows,
        f"medians of {args.repeat} interleaved rounds; -fill-db {args.fill_db} -workers {args.workers}"
        f" -orders {args.orders} ({3 * args.orders} groups) -work-ms {args.work_ms}",
    )
    print(
        "all runs msg/s: "
        + "; ".join(
            f"{claim} " + ", ".join(c.fmt(r["throughput_per_s"]) for r in runs[claim]) for claim in claims
        )
    )
    if "seed" in claims:
        base = med("seed", "throughput_per_s")
        for claim in claims:
            if claim != "seed":
                print(f"{claim} / seed msg/s: {c.fmt(med(claim, 'throughput_per_s') / base, 2)}x")


if __name__ == "__main__":
    main()
