"""A run in phases costs what a plain run costs: the client's CPU per message of a pressure-free
phase against a plain run at the same rate for as long (issue 45: within 3%).

    plain:   pgmq-sim -duration D -rate R -workers 12 -work-ms 1-10 -orders 100 -claim indexed -wakeup notify
    phased:  the same with -phase "name=a duration=D/2 rate=R; name=b duration=D/2" instead of -duration

Both are read from the JSON's client.cpu_us_per_msg (the whole process once every worker had its
session: producer, listener, housekeeping, and the phases' edges); the phases' latency accounts
are read after the run and are not in it. Rounds interleaved; medians of --repeat.

    python bench/phase_overhead.py                  # about 4 minutes: 2 cells x 3 rounds x 30 s
    python bench/phase_overhead.py --rate 800 --duration 30 --repeat 5
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c

TARGET_SHARE = 0.03


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=800, help="msg/s (default 800)")
    parser.add_argument("--duration", type=float, default=30, help="seconds per run (default 30)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    base = [
        "-rate", f"{args.rate:g}", "-workers", "12", "-work-ms", "1-10", "-orders", "100",
        "-claim", "indexed", "-wakeup", "notify",
    ]  # fmt: skip
    half = args.duration / 2
    cells = {
        "plain": [*base, "-duration", f"{args.duration:g}"],
        "phased": [*base, "-phase", f"name=a duration={half:g} rate={args.rate:g}; name=b duration={half:g}"],
    }
    for name, cli in cells.items():
        print(f"{name}: {c.cli_command_text(cli)}")
    with c.server_from_args(args.dsn) as server:

        def measure(cell: str, _round: int) -> dict[str, Any]:
            return c.run_cli(cells[cell], server.dsn)

        runs = c.interleaved(list(cells), args.repeat, measure)
    rows, medians = [], {}
    for cell, found in runs.items():
        cpu = medians[cell] = c.median([r["client"]["cpu_us_per_msg"] for r in found])
        rows.append(
            [cell, c.fmt(c.median([r["throughput_per_s"] for r in found]), 0), c.fmt(cpu, 1),
             c.fmt(c.median([r["latency_ms"]["e2e"]["p99"] for r in found]), 1)]
        )  # fmt: skip
    audits = c.audit_verdicts(r for v in runs.values() for r in v)
    c.print_table(
        ["run", "msg/s", "client us/msg", "e2e p99 ms"], rows, f"medians of {args.repeat}; audits {audits}"
    )
    share = medians["phased"] / medians["plain"] - 1 if medians["plain"] else None
    shown = c.fmt(None if share is None else share * 100, 1)
    verdict = c.verdict(None if share is None else abs(share), TARGET_SHARE, False)
    print(
        f"the phases' share of the client's CPU per message: {shown}% (within {TARGET_SHARE:.0%}): {verdict}"
    )


if __name__ == "__main__":
    main()
