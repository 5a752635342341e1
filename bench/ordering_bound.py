"""Ordering bound: ordered throughput at 12 workers as a share of the ordering bound.

Target (DESIGN.md): at 12 workers the ordered strategies reach at least 0.9 of the ordering bound,
groups / mean work time (a group finishes at most one message per work time, since message k+1 of a
group starts only after message k committed). The share is the tool's own `ordering_bound_share`
(throughput / bound, with the mean work time the run actually drew).

    pgmq-sim -fill-db N -workers 12 -orders 2 -work-ms 1-10 -claim seed|indexed|advisory

One server; rounds interleave the strategies (order rotates each round); medians of --repeat.
The audit stays on (as users run it) unless --no-audit.

    python bench/ordering_bound.py                            # about 1-2 minutes
    python bench/ordering_bound.py --fill-db 20000 --orders 10 --repeat 5
"""

from __future__ import annotations

import argparse
import tempfile
from itertools import pairwise
from pathlib import Path
from typing import Any

import _common as c

TARGET = 0.9


def group_cycle(log: Path) -> dict[str, float]:
    """From the run log: per message, claim-to-commit time ("held", work + completion + commit) and
    the hand-off gap in its group (commit of message k to the claim of k+1, which includes the claim
    query); and the groups' sizes. Mean work / (held + gap) is the share one busy group can reach;
    mean / largest group size is what uneven groups leave (the run ends when the largest drains)."""
    groups: dict[tuple[str, int], list[c.Handled]] = {}
    for h in c.read_handled(log):
        groups.setdefault((h.queue_type, h.order_id), []).append(h)
    held: list[float] = []
    gaps: list[float] = []
    for messages in groups.values():
        messages.sort(key=lambda h: h.msg_id)
        held += [(h.done - h.claimed).total_seconds() * 1000 for h in messages]
        gaps += [(b.claimed - a.done).total_seconds() * 1000 for a, b in pairwise(messages)]
    sizes = [len(m) for m in groups.values()]
    return {
        "held_ms": sum(held) / len(held) if held else float("nan"),
        "gap_ms": sum(gaps) / len(gaps) if gaps else float("nan"),
        "balance": (sum(sizes) / len(sizes)) / max(sizes) if sizes else float("nan"),
    }


def run_with_log(args: list[str], dsn: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-log-") as tmp:
        log = Path(tmp) / "run.log"
        data = c.run_cli(args, dsn, keep_log=log)
        data["_cycle"] = group_cycle(log)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=5000, help="messages per run (default 5000)")
    parser.add_argument("--workers", type=int, default=12, help="worker threads (default 12)")
    parser.add_argument("--orders", type=int, default=2, help="order_ids per type; groups = 3x (default 2)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument(
        "--claims", default="seed,indexed,advisory", help="strategies (default seed,indexed,advisory)"
    )
    parser.add_argument("--no-audit", action="store_true", help="pass -no-audit")
    c.common_args(parser)
    args = parser.parse_args()

    claims = [x.strip() for x in args.claims.split(",") if x.strip()]

    def cli_args(claim: str) -> list[str]:
        out = ["-fill-db", str(args.fill_db), "-workers", str(args.workers), "-orders", str(args.orders)]
        out += ["-work-ms", args.work_ms, "-claim", claim]
        return out + (["-no-audit"] if args.no_audit else [])

    print("ordering bound: " + c.cli_command_text(cli_args("<claim>")))
    with c.server_from_args(args.dsn) as pg:
        runs = c.interleaved(claims, args.repeat, lambda claim, _r: run_with_log(cli_args(claim), pg.dsn))

    def med(claim: str, *path: str) -> float:
        values = []
        for run in runs[claim]:
            value: Any = run
            for key in path:
                value = value[key]
            values.append(float(value))
        return c.median(values)

    rows = []
    for claim in claims:
        share = med(claim, "ordering_bound_share")
        busy = c.median([c.median([w["busy_share"] for w in r["workers"]]) for r in runs[claim]])
        held = c.median([r["_cycle"]["held_ms"] for r in runs[claim]])
        gap = c.median([r["_cycle"]["gap_ms"] for r in runs[claim]])
        work = med(claim, "work_mean_ms")
        rows.append(
            [
                claim,
                c.fmt(med(claim, "throughput_per_s")),
                c.fmt(med(claim, "ordering_bound_per_s")),
                c.fmt(med(claim, "work_mean_ms"), 2),
                c.fmt(share, 3),
                c.verdict(share, TARGET),
                c.fmt(med(claim, "latency_ms", "claim", "p50"), 2),
                c.fmt(med(claim, "latency_ms", "claim", "p95"), 2),
                c.fmt(busy, 2),
                c.fmt(held, 2),
                c.fmt(gap, 2),
                c.fmt(work / (held + gap), 3),
                c.fmt(c.median([r["_cycle"]["balance"] for r in runs[claim]]), 3),
                c.fmt(med(claim, "empty_claims"), 0),
                "/".join(sorted({(r.get("audit") or {}).get("verdict", "off") for r in runs[claim]})),
                ", ".join(c.fmt(r["ordering_bound_share"], 3) for r in runs[claim]),
            ]
        )
    c.print_table(
        ["claim", "msg/s", "bound/s", "work ms", "share", f">={TARGET}", "claim p50 ms", "claim p95 ms",
         "busy (med)", "held ms", "gap ms", "work/cycle", "balance", "empty", "audit", "all runs share"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -fill-db {args.fill_db} -workers {args.workers}"
        f" -orders {args.orders} ({3 * args.orders} groups) -work-ms {args.work_ms}",
    )  # fmt: skip
    print(
        "held = claim to commit (work + completion + commit); gap = commit of a group's message to the claim"
        " of its next one (includes the claim query); both means from the run log.\n"
        "work/cycle = work / (held + gap), the share a continuously busy group can reach; balance = mean /"
        " largest group size, the share left when groups are uneven (the run ends when the largest drains).\n"
        "share ~ work/cycle x balance."
    )


if __name__ == "__main__":
    main()
