"""Port throughput: the seed's workload shape scaled to this machine.

Runs `pgmq-sim -fill-db N -workers 12 -orders 2` with the default work time (1-10 ms) and the audit on,
once per claim strategy per round (default: seed, the Go tool's query, and indexed), rounds
interleaved, one embedded server for all runs. Prints the median messages/s, the work-only bound
(`work_bound_per_s`, groups / mean work time: as if claims and completions took no time) and the
share of it reached, plus latency and the audit verdict.

There is no separate target here; the share is printed against the work-only target (0.9) that
bench/ordering_bound.py checks, and indexed is shown as a ratio of seed.

    python bench/port_throughput.py                       # about 2-3 minutes on 2 cores
    python bench/port_throughput.py --fill-db 100000 --repeat 5
"""

from __future__ import annotations

import argparse

import _common as c

TARGET_SHARE = 0.9


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    c.workload_args(
        parser,
        fill_db=20000,
        claims="seed,indexed",
        claims_help="comma list of strategies",
        no_audit_help="pass -no-audit (default: audit on, as users run it)",
    )
    return parser


def main() -> None:
    args = arguments().parse_args()

    claims = c.comma_list(args.claims)
    print("port throughput: " + c.cli_command_text(c.workload_cli_args(args, "<claim>")))
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(
            claims, args.repeat, lambda claim, _r: c.run_cli(c.workload_cli_args(args, claim), server.dsn)
        )

    rows = []
    for claim in claims:
        r = runs[claim]
        share = c.median_at(r, "work_bound_share")
        rows.append(
            [
                claim,
                c.fmt(c.median_at(r, "throughput_per_s")),
                c.fmt(c.median_at(r, "work_bound_per_s")),
                c.fmt(c.median_at(r, "work_mean_ms"), 2),
                c.fmt(share, 3),
                c.verdict(share, TARGET_SHARE),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p50")),
                c.fmt(c.median_at(r, "latency_ms", "claim", "p50"), 2),
                c.fmt(c.median_at(r, "latency_ms", "claim", "p95"), 2),
                c.fmt(c.median_at(r, "empty_claims"), 0),
                c.audit_verdicts(r),
            ]
        )
    c.print_table(
        [
            "claim",
            "msg/s",
            "work-only bound/s",
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
        c.workload_title(args),
    )
    print(
        "all runs msg/s: "
        + "; ".join(
            f"{claim} " + ", ".join(c.fmt(run["throughput_per_s"]) for run in runs[claim]) for claim in claims
        )
    )
    if "seed" in claims:
        base = c.median_at(runs["seed"], "throughput_per_s")
        for claim in claims:
            if claim != "seed":
                ratio = c.median_at(runs[claim], "throughput_per_s") / base
                print(f"{claim} / seed msg/s: {c.fmt(ratio, 2)}x")


if __name__ == "__main__":
    main()
