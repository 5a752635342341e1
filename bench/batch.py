"""A transaction per batch against a transaction per message (seed 002: ~700 msg/s one at a time,
~1,400 per batch, on an 8-core VM).

Each design is drained once with `-batch 1` and once with `-batch N` (default 10), zero work, the
same prefilled workload, in interleaved rounds on one embedded server: msg/s, the server's commits
per message (`server_cost.commits_per_msg`), the client's CPU per message, the audit. The claim
itself is no cheaper per message in a batch; the commit is what a batch saves, so the ratio is
the commit's share of a message's cost.

Target (issue "a queue design is a folder of SQL"): the indexed design at -batch 10 moves at least
2x the messages per second of -batch 1.

    python bench/batch.py                                      # about 2 minutes on 2 cores
    python bench/batch.py --designs indexed,examples/jobs --batch 20 --repeat 5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _common as c

TARGET = 2.0
REPO = Path(__file__).resolve().parents[1]  # the designs are named as from a clone's top


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--designs", default="indexed,examples/jobs", help="designs (default: these two)")
    parser.add_argument("--batch", type=int, default=10, help="the batch against one (default 10)")
    parser.add_argument("--fill-db", type=int, default=20000, help="messages per run (default 20000)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    designs = c.comma_list(args.designs)
    cells = [f"{d} / {b}" for d in designs for b in (1, args.batch)]
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(
            cells, args.repeat, lambda cell, _r: c.run_cli(_flags(cell, args), server.dsn, cwd=str(REPO))
        )

    rows = []
    for design in designs:
        one, many = runs[f"{design} / 1"], runs[f"{design} / {args.batch}"]
        rate_one, rate_many = c.median_at(one, "throughput_per_s"), c.median_at(many, "throughput_per_s")
        ratio = rate_many / rate_one if rate_one else None
        judged = f"{c.fmt(ratio, 2)}x" + (f" {c.verdict(ratio, TARGET)}" if design == "indexed" else "")
        for batch, cell_runs, rate in ((1, one, rate_one), (args.batch, many, rate_many)):
            rows.append(
                [
                    f"{design} -batch {batch}",
                    c.fmt(rate),
                    c.fmt(c.median_at(cell_runs, "server_cost", "commits_per_msg"), 3),
                    c.fmt(c.median_at(cell_runs, "client", "cpu_us_per_msg")),
                    c.audit_verdicts(cell_runs),
                    "" if batch == 1 else judged,
                ]
            )
    c.print_table(
        ["design", "msg/s", "commits/msg", "client us/msg", "audit", f"-batch {args.batch} / -batch 1"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -fill-db {args.fill_db} -workers {args.workers}"
        f" -orders {args.orders} -work-ms 0 (target for indexed: >= {TARGET:g}x)",
    )


def _flags(cell: str, args: argparse.Namespace) -> list[str]:
    design, batch = cell.split(" / ")
    flags = ["-queue", design, "-batch", batch, "-fill-db", str(args.fill_db)]
    return [*flags, "-workers", str(args.workers), "-orders", str(args.orders), "-work-ms", "0"]


if __name__ == "__main__":
    main()
