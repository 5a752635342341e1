"""Ordering bound: ordered throughput at 12 workers as a share of the work-only bound.

Target: at 12 workers the ordered strategies reach at least 0.9 of the work-only bound,
groups / mean work time (a group finishes at most one message per work time, since message k+1 of a
group starts only after message k committed; claims and completions taken as free). The share is
the tool's own `work_bound_share` (throughput / bound, with the mean work time the run actually
drew). The tool's ordering bound (`ordering_bound_per_s`) counts each message's claim and
completion in its group's cycle too; the work-only bound is the ceiling the port's target names.

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
    """From the run log (server clock): per message, the time from its claim to its completion
    ("held", work + the completion statement) and the hand-off gap in its group (completion of
    message k to the claim of k+1: the commit, the hand-off and the claim query); and the groups'
    sizes. Mean work / (held + gap) is the share one busy group can reach;
    mean / largest group size is what uneven groups leave (the run ends when the largest drains)."""
    groups: dict[tuple[str, int], list[c.Handled]] = {}
    for h in c.read_run_log(log).handled:
        groups.setdefault((h.queue_type, h.order_id), []).append(h)
    held: list[float] = []
    gaps: list[float] = []
    for messages in groups.values():
        messages.sort(key=lambda h: h.msg_id)
        held += [(h.done - h.claimed).total_seconds() * 1000 for h in messages if h.done is not None]
        gaps += [
            (b.claimed - a.done).total_seconds() * 1000 for a, b in pairwise(messages) if a.done is not None
        ]
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


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    c.workload_args(parser, fill_db=5000, claims="seed,indexed,affinity,advisory")
    return parser


def main() -> None:
    args = arguments().parse_args()

    claims = c.comma_list(args.claims)
    print("ordering bound: " + c.cli_command_text(c.workload_cli_args(args, "<claim>")))
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(
            claims, args.repeat, lambda claim, _r: run_with_log(c.workload_cli_args(args, claim), server.dsn)
        )

    rows = []
    for claim in claims:
        r = runs[claim]
        share = c.median_at(r, "work_bound_share")
        busy = c.median([c.median([w["busy_share"] for w in run["workers"]]) for run in r])
        held = c.median_at(r, "_cycle", "held_ms")
        gap = c.median_at(r, "_cycle", "gap_ms")
        work = c.median_at(r, "work_mean_ms")
        rows.append(
            [
                claim,
                c.fmt(c.median_at(r, "throughput_per_s")),
                c.fmt(c.median_at(r, "work_bound_per_s")),
                c.fmt(work, 2),
                c.fmt(share, 3),
                c.verdict(share, TARGET),
                c.fmt(c.median_at(r, "latency_ms", "claim", "p50"), 2),
                c.fmt(c.median_at(r, "latency_ms", "claim", "p95"), 2),
                c.fmt(busy, 2),
                c.fmt(held, 2),
                c.fmt(gap, 2),
                c.fmt(work / (held + gap), 3),
                c.fmt(c.median_at(r, "_cycle", "balance"), 3),
                c.fmt(c.median_at(r, "empty_claims"), 0),
                c.audit_verdicts(r),
                ", ".join(c.fmt(run["work_bound_share"], 3) for run in r),
            ]
        )
    c.print_table(
        ["claim", "msg/s", "work-only bound/s", "work ms", "share", f">={TARGET}", "claim p50 ms",
         "claim p95 ms", "busy (med)", "held ms", "gap ms", "work/cycle", "balance", "empty", "audit",
         "all runs share"],
        rows,
        c.workload_title(args),
    )  # fmt: skip
    print(
        "held = claim to completion (work + completion statement); gap = completion of a group's message to"
        " the claim of its next one (commit, hand-off, claim query); means of the run log's server times.\n"
        "work/cycle = work / (held + gap), the share a continuously busy group can reach; balance = mean /"
        " largest group size, the share left when groups are uneven (the run ends when the largest drains).\n"
        "share ~ work/cycle x balance."
    )


if __name__ == "__main__":
    main()
