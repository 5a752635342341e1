"""What the live audit saves at the run's end (issue 50, "judged as it runs"): the same run with the
audit's windows closed while it goes (-audit-window W) and with the whole audit at its end
(-audit-window 0), with the windows but the latency account read at the end (what the account kept
as the run goes costs the run), and with the windows and the journal compacted as the run goes
(-compact-journal: what a bounded journal costs), in interleaved rounds on one server.

    pgmq-sim -rate R -fill-db N -workers 6 -work-ms 0 -orders 100 -claim indexed -audit-window W

Per cell, medians of --repeat rounds:

* run s: the run itself (the JSON's elapsed_s);
* after s: from the run's end to the tool's last line (the log's `completed`/`stopped` event to its
  `run end`): the audit, the table's health, the latency account and the report;
* audit s: from the run's end to the audit's verdict (the log's `audit` event): what the windows
  leave to the end;
* account s: from the run's end, what the latency account took (the JSON's `latency_split.seconds`);
* after CPU s: the CPU spent from the run's end to the tool's exit, its processes' together (the
  account's included), sampled from /proc every 0.2 s; "% of run's" sets it against the run's own
  (`client.cpu_s`);
* live CPU s: the CPU of the account's own process, which split the journal as the run went
  (`latency_split.live_cpu_s`: counted in cpu s too, never in the run's `client.cpu_s`);
* windows, through: windows closed while the run went, and the msg_id they reached;
* compacted: the journal rows deleted as the run went (`live_audit.journal_compacted_rows`);
* WAL B/msg: the server's WAL per message over the run (pg_stat_wal, the JSON's `server_cost`):
  the compaction's deletes are in it;
* cpu s, peak MB: the whole process's user + system CPU, its children's included, and peak resident
  memory (wait4: the largest of the process and its children).

With the windows, the latency account is also read a chunk at a time as the run goes, so both the
audit's and the account's parts of the end shrink to what the last window left.

    python bench/live_audit.py                                   # 60,000 at 3,000/s, 3 rounds
    python bench/live_audit.py --fill-db 300000 --rate 3000 --repeat 2 --dsn postgresql://...
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as c

END_EVENTS = r"(completed|stopped|interrupted|stalled|failed)"
COLUMNS = (
    "cell", "run s", "after s", "after CPU s", "% of run's", "audit s", "account s", "live CPU s", "windows",
    "through", "compacted", "WAL B/msg", "cpu s", "peak MB", "audit",
)  # fmt: skip
EVERY_S = 0.2  # the CPU sampled this often, to find it at the run's end


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=60000, help="messages per run (default 60000)")
    parser.add_argument("--rate", type=float, default=3000, help="arrivals per second (default 3000)")
    parser.add_argument(
        "--window", type=float, default=10, help="-audit-window of the live cell (default 10)"
    )
    parser.add_argument(
        "--account-live-from", type=int, default=100_000,
        help="-account-live-from of the live cell (default 100000, the tool's)",
    )  # fmt: skip
    c.common_args(parser)
    return parser


NEVER = 10**12  # -account-live-from: rows no run journals, so the account is read at the end


def measured(
    args: argparse.Namespace, window: float, live_from: int, compact: bool, dsn: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-live-") as tmp:
        log = Path(tmp) / "run.log"
        run = c.run_cli(
            [
                *("-rate", f"{args.rate:g}", "-fill-db", str(args.fill_db), "-workers", "6", "-work-ms", "0"),
                *("-orders", "100", "-claim", "indexed", "-audit-window", f"{window:g}"),
                *("-account-live-from", str(live_from)),
                *(["-compact-journal"] if compact else []),
            ],
            dsn,
            keep_log=log,
            while_running=cpu_watch,
        )
        lines = c.read_run_log(log)
    ended, audited, last = lines.first_event(END_EVENTS), lines.first_event("audit "), lines.events[-1][0]
    bench = run["_bench"]
    at_end = None
    if ended is not None:  # the last sample before the run's end, on the monotonic clock
        end = bench["launched"] + (ended - bench["launched_utc"]).total_seconds()
        at_end = max(((t, cpu) for t, cpu in bench["watch"] if t <= end), default=None)
    after_cpu = bench["cpu_s"] - at_end[1] if at_end is not None else float("nan")
    live, split = run.get("live_audit") or {}, run.get("latency_split") or {}
    run["_live"] = {
        "account_s": split.get("seconds") or float("nan"),
        "live_cpu_s": split.get("live_cpu_s") or 0.0,
        "after_s": (last - ended).total_seconds() if ended else float("nan"),
        "after_cpu_s": after_cpu,
        "after_share": 100 * after_cpu / float(run["client"]["cpu_s"]),
        "audit_s": (audited - ended).total_seconds() if ended and audited else float("nan"),
        "windows": live.get("windows_closed", 0),
        "through": live.get("through_msg_id", 0),
        "compacted": live.get("journal_compacted_rows", 0),
        "wal": (run.get("server_cost") or {}).get("wal_bytes_per_msg") or float("nan"),
    }
    return run


def cpu_watch(running: c.Running) -> list[tuple[float, float]]:
    """(monotonic time, the tool's CPU with its children's) every EVERY_S."""
    samples: list[tuple[float, float]] = []
    while not running.done.is_set():
        cpu = c.cpu_s(running.pid)
        if cpu is not None:
            samples.append((time.monotonic(), cpu))
        running.done.wait(EVERY_S)
    return samples


def main() -> None:
    args = arguments().parse_args()
    cells = {
        f"windows every {args.window:g} s": (args.window, args.account_live_from, False),
        f"windows every {args.window:g} s, journal compacted": (args.window, args.account_live_from, True),
        f"windows every {args.window:g} s, the account at the end": (args.window, NEVER, False),
        "audit at the end": (0.0, NEVER, False),
    }
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(
            list(cells), args.repeat, lambda cell, _r: measured(args, *cells[cell], server.dsn)
        )
    rows = []
    for cell, found in runs.items():

        def at(key: str, found: list[dict[str, Any]] = found) -> float:
            return c.median([r["_live"][key] for r in found])

        rows.append(
            [
                cell,
                c.fmt(c.median([r["elapsed_s"] for r in found])),
                c.fmt(at("after_s")),
                c.fmt(at("after_cpu_s")),
                c.fmt(at("after_share"), 0),
                c.fmt(at("audit_s"), 2),
                c.fmt(at("account_s"), 2),
                c.fmt(at("live_cpu_s")),
                c.fmt(at("windows"), 0),
                c.fmt(at("through"), 0),
                c.fmt(at("compacted"), 0),
                c.fmt(at("wal"), 0),
                c.fmt(c.median([r["_bench"]["cpu_s"] for r in found])),
                c.fmt(c.median([r["_bench"]["max_rss_mb"] for r in found])),
                c.audit_verdicts(found),
            ]
        )
    c.print_table(
        COLUMNS,
        rows,
        f"medians of {args.repeat} interleaved rounds; -rate {args.rate:g} -fill-db {args.fill_db}",
    )


if __name__ == "__main__":
    main()
