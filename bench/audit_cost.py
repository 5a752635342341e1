"""Audit cost: the same run with the journal and audit, and with -no-audit.

The journal adds one INSERT (inside the completing statement) per message, and the audit runs a
few queries over the journal after the run. Two workloads, each measured with and without the
audit in interleaved rounds on one embedded server:

- zero work (-work-ms 0, -claim indexed, -orders 100): where the journal's cost shows most;
- the seed's shape (default 1-10 ms work, -orders 2, -claim indexed), as users run it.

    python bench/audit_cost.py                 # about 2 minutes on 2 cores
    python bench/audit_cost.py --fill-db 50000 --repeat 5
"""

from __future__ import annotations

import argparse

import _common as c

WORKLOADS = {
    "zero work": ["-work-ms", "0", "-orders", "100", "-workers", "6"],
    "seed shape": ["-work-ms", "1-10", "-orders", "2", "-workers", "12"],
}


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=10000, help="messages per run (default 10000)")
    parser.add_argument("--claim", default="indexed", help="claim strategy (default indexed)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()

    cells = [f"{name} / {audit}" for name in WORKLOADS for audit in ("audit", "no-audit")]

    def cli_args(cell: str) -> list[str]:
        name, audit = cell.split(" / ")
        out = ["-fill-db", str(args.fill_db), "-claim", args.claim, *WORKLOADS[name]]
        return out + (["-no-audit"] if audit == "no-audit" else [])

    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(cells, args.repeat, lambda cell, _r: c.run_cli(cli_args(cell), server.dsn))

    rows = []
    for name in WORKLOADS:
        with_audit = c.median([r["throughput_per_s"] for r in runs[f"{name} / audit"]])
        without = c.median([r["throughput_per_s"] for r in runs[f"{name} / no-audit"]])
        rows.append([name, c.fmt(with_audit), c.fmt(without), c.fmt(with_audit / without, 3)])
    c.print_table(
        ["workload", "audit msg/s", "no-audit msg/s", "ratio"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -fill-db {args.fill_db} -claim {args.claim}",
    )


if __name__ == "__main__":
    main()
