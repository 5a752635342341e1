"""Wake-up latency: median end-to-end latency at -rate 100 with LISTEN/NOTIFY against 1 s polling.

Target: with -wakeup notify the median end-to-end latency (time_added to commit,
latency_ms.e2e.p50) is within a few ms of the work time; with -wakeup poll (-poll-interval 1) it is
around 0.5 s.

    pgmq-sim -fill-db N -rate 100 -workers 12 -orders 2 -work-ms 1-10 -wakeup notify|poll -poll-interval 1

The producer inserts at 100/s while the workers run; 12 workers on 6 groups can handle ~1,000/s at a
5.5 ms mean work time, so they are idle most of the time and the latency is the wake-up. Rounds
alternate notify and poll on one server. "Few ms" is checked as p50 - mean work <= --few-ms (5).

Note the poll figure depends on how the idle workers' polls are phased: the workers start together
and stay roughly in phase (they all find the queue empty, sleep the interval, wake together), so a
message waits about half the interval; with polls spread out it would wait less.

The "empty" column counts empty claims: with notify every insert wakes every idle worker of its type,
and all but one find nothing.

    python bench/wakeup_latency.py                       # about 1 minute
    python bench/wakeup_latency.py --fill-db 3000 --repeat 5 --workers 3
"""

from __future__ import annotations

import argparse

import _common as c


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=1000, help="messages per run (default 1000)")
    parser.add_argument("--rate", type=float, default=100, help="insert rate per s (default 100)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--orders", type=int, default=2, help="order_ids per type (default 2)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="seconds (default 1)")
    parser.add_argument("--claim", default="seed", help="claim strategy (default seed, the tool's default)")
    parser.add_argument("--few-ms", type=float, default=5.0, help="notify's allowed p50 - work (default 5)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()

    def cli_args(wakeup: str) -> list[str]:
        return [
            "-fill-db", str(args.fill_db), "-rate", f"{args.rate:g}", "-workers", str(args.workers),
            "-orders", str(args.orders), "-work-ms", args.work_ms, "-claim", args.claim,
            "-wakeup", wakeup, "-poll-interval", f"{args.poll_interval:g}",
        ]  # fmt: skip

    print("wake-up latency: " + c.cli_command_text(cli_args("<notify|poll>")))
    wakeups = ["notify", "poll"]
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(wakeups, args.repeat, lambda w, _r: c.run_cli(cli_args(w), server.dsn))

    rows = []
    for wakeup in wakeups:
        r = runs[wakeup]
        p50 = c.median_at(r, "latency_ms", "e2e", "p50")
        work = c.median_at(r, "work_mean_ms")
        over = c.median([x["latency_ms"]["e2e"]["p50"] - x["work_mean_ms"] for x in r])
        if wakeup == "notify":
            target, check = (
                f"p50-work <= {args.few_ms:g}",
                c.verdict(over, args.few_ms, higher_is_better=False),
            )
        else:
            half = args.poll_interval * 500
            target, check = f"~{half:.0f} ms", f"{p50 / half:.2f}x of {half:.0f}"
        rows.append(
            [
                wakeup,
                c.fmt(p50, 2),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p95"), 2),
                c.fmt(c.median_at(r, "latency_ms", "e2e", "p99"), 2),
                c.fmt(work, 2),
                c.fmt(over, 2),
                c.fmt(c.median_at(r, "throughput_per_s")),
                c.fmt(c.median_at(r, "empty_claims"), 0),
                target,
                check,
                ", ".join(c.fmt(x["latency_ms"]["e2e"]["p50"], 2) for x in r),
            ]
        )
    c.print_table(
        ["wake-up", "e2e p50 ms", "p95 ms", "p99 ms", "work ms", "p50-work", "msg/s", "empty", "target",
         "result", "all runs p50"],
        rows,
        f"medians of {args.repeat} interleaved rounds; -rate {args.rate:g} -fill-db {args.fill_db}"
        f" -workers {args.workers} -orders {args.orders} -claim {args.claim}"
        f" -poll-interval {args.poll_interval:g}",
    )  # fmt: skip
    notify = c.median_at(runs["notify"], "latency_ms", "e2e", "p50")
    poll = c.median_at(runs["poll"], "latency_ms", "e2e", "p50")
    print(f"poll p50 / notify p50: {c.fmt(poll / notify if notify else None, 1)}x")


if __name__ == "__main__":
    main()
