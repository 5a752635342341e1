"""A soak (issue 50): one long run at a steady rate, watched from outside while it goes.

    pgmq-sim -duration D -rate R -workers 12 -claim indexed -orders 100 -wakeup notify -work-ms 1-5 -delmsg
             -compact-journal -report FILE.html

What it prints, from the run and from what it sampled every --sample-s:

* the tool's resident set (VmRSS of its process, and of its children: the account's process):
  after the first 5 minutes (or a tenth of a shorter run), its highest after that, at the run's
  end, and its slope per hour over the rest of the run (least squares);
* the journal (`msg_journal`, its table and indexes, read on the server): its peak, and the rows
  compacted as the run went (`-compact-journal`; --whole-journal leaves it out);
* after the run: from the log's `completed` to its `run end` (the audit's last window, the account,
  the report), and the process's CPU beside the run's own (`client.cpu_s`);
* the report's size, the audit, the limit, the windows the live audit closed, and the stretches of
  another limit than the run's most common (`limit_by_window`).

    python bench/soak.py --dsn postgresql://...                       # 2 hours at 800/s
    python bench/soak.py --duration 60 --rate 200                     # a minute, to try it
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as c
import psycopg

FIRST_S = 300.0  # RSS is judged after the first 5 minutes: the histograms and plans warm up


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=7200, help="seconds (default 7200: 2 hours)")
    parser.add_argument("--rate", type=float, default=800, help="arrivals per second (default 800)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--window", type=float, default=10, help="-audit-window (default 10)")
    parser.add_argument(
        "--whole-journal", action="store_true", help="without -compact-journal: the journal keeps every row"
    )
    parser.add_argument("--sample-s", type=float, default=10, help="sampling period (default 10)")
    parser.add_argument("--dsn", default=None, help="a server of yours (default: an embedded one)")
    return parser


Sample = tuple[float, float | None, float | None, int | None]


def children_rss_mb(pid: int) -> float:
    """The resident sets of a process's children, summed (the account's process)."""
    return sum(c.vm_rss_mb(kid) or 0.0 for kid in c.children(pid))


def watcher(dsn: str, every_s: float) -> Callable[[c.Running], list[Sample]]:
    """(seconds since launch, VmRSS MB, its children's MB, journal bytes) every `every_s`."""

    def watch(running: c.Running) -> list[Sample]:
        samples: list[Sample] = []
        with psycopg.connect(dsn, autocommit=True, application_name="soak bench") as conn:
            while not running.done.is_set():
                row = conn.execute("select pg_total_relation_size(to_regclass('msg_journal'))").fetchone()
                rss, kids = c.vm_rss_mb(running.pid), children_rss_mb(running.pid)
                samples.append((time.monotonic() - running.launched, rss, kids, row[0] if row else None))
                running.done.wait(every_s)
        return samples

    return watch


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least squares, MB per hour."""
    if len(points) < 2:
        return None
    n = len(points)
    mx, my = sum(t for t, _ in points) / n, sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    return None if sxx == 0 else sum((t - mx) * (v - my) for t, v in points) / sxx * 3600


def main() -> None:
    args = arguments().parse_args()
    run_args = [
        *("-duration", f"{args.duration:g}", "-rate", f"{args.rate:g}", "-workers", str(args.workers)),
        *("-claim", "indexed", "-orders", "100", "-wakeup", "notify", "-work-ms", "1-5", "-delmsg"),
        *("-audit-window", f"{args.window:g}"),
        *([] if args.whole_journal else ["-compact-journal"]),
    ]
    print("soak: " + c.cli_command_text([*run_args, "-report", "FILE.html"]), flush=True)
    with c.server_from_args(args.dsn) as server, tempfile.TemporaryDirectory(prefix="pgmq-soak-") as tmp:
        log, report = Path(tmp) / "run.log", Path(tmp) / "soak.html"
        run = c.run_cli(
            [*run_args, "-report", str(report)],
            server.dsn,
            keep_log=log,
            while_running=watcher(server.dsn, args.sample_s),
        )
        lines = c.read_run_log(log)
        report_kb = report.stat().st_size / 1024 if report.exists() else float("nan")
    print_soak(args, run, lines, report_kb)


def print_soak(args: argparse.Namespace, run: dict[str, Any], lines: c.RunLogLines, report_kb: float) -> None:
    samples = run["_bench"]["watch"] or []
    rss = [(t, mb) for t, mb, _, _ in samples if mb is not None and mb > 0]
    first = min(FIRST_S, args.duration / 10)
    kids = [mb for t, _, mb, _ in samples if mb is not None and t >= first]
    later = [(t, mb) for t, mb in rss if t >= first]
    journal = [b for _, _, _, b in samples if b is not None]
    ended, last = lines.first_event(r"(completed|stopped|interrupted|stalled|failed)"), lines.events[-1][0]
    after_s = (last - ended).total_seconds() if ended else float("nan")
    cpu_run = float(run["client"]["cpu_s"])
    stretches = run.get("limit_by_window") or []
    live = run.get("live_audit") or {}
    slope = slope_per_hour(later)
    rows = [
        ["messages", f"{run['processed']:,} in {run['elapsed_s']:.0f} s; audit {c.audit_verdicts([run])}"],
        ["RSS MB", f"at {first:.0f} s {c.fmt(later[0][1] if later else None)}, highest after"
         f" {c.fmt(max((mb for _, mb in later), default=None))},"
         f" at the end {c.fmt(rss[-1][1] if rss else None)};"
         f" slope {c.fmt(slope)} MB/h; peak (wait4) {c.fmt(run['_bench']['max_rss_mb'])}"],
        ["children's RSS MB", f"after the first minutes {c.fmt(kids[0] if kids else None)}, highest"
         f" {c.fmt(max(kids, default=None))}, at the end {c.fmt(kids[-1] if kids else None)}"],
        ["journal", f"peak {c.fmt(max(journal, default=0) / 2**20)} MB;"
         f" {live.get('journal_compacted_rows', 0):,} rows compacted as the run went"],
        ["after the run", f"{after_s:.1f} s wall; the process's CPU {run['_bench']['cpu_s']:.1f} s, the run's"
         f" {cpu_run:.1f} s"],
        ["report", f"{report_kb:,.0f} KB"],
        ["live audit", f"{live.get('windows_closed', 0)} windows,"
         f" through msg_id {live.get('through_msg_id', 0):,}"],
        ["limit", f"{run['limit']['resource']}: {run['limit']['evidence'][:160]}"],
        ["limit by window", f"{len(stretches)} stretch(es): "
         + "; ".join(f"{s['resource']} {s['from_s']:.0f}-{s['to_s']:.0f} s" for s in stretches[:12])],
    ]  # fmt: skip
    c.print_table(["figure", "value"], rows, f"soak: {args.duration:g} s at {args.rate:g}/s")


if __name__ == "__main__":
    main()
