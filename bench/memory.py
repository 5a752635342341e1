"""Memory: the tool's resident set from 100,000 to 1,000,000 messages, with and without the audit.

Requirement: RSS stays flat within a few MB from 100k to 1M messages (the tool keeps histograms and
counters, never a per-message list).

    pgmq-sim -fill-db N -workers 6 -work-ms 0 -claim indexed [-no-audit] -dsn DSN -json FILE

for each N of --sizes, with the audit and with -no-audit, on one embedded server. Per run:

* peak RSS: ru_maxrss of the tool's process, from os.wait4 (the server runs in other processes and
  is not counted: the tool gets -dsn);
* end RSS: the last VmRSS read from /proc/PID/status before the process exited (sampled every
  --sample-s, 0.5 s), i.e. after the audit and the summary;
* RSS at 10% and 90% of the run's wall time, to show the curve flat while messages flow;
* msg/s from the run's JSON (throughput_per_s).

The last rows give the difference largest size - smallest size, per audit mode. 1,000,000 messages
at ~3,000 msg/s take about 6 minutes per run, so the default runs once (--repeat 1) and takes
about 15 minutes; `--sizes 10000,100000` is a quick check.

    python bench/memory.py                              # about 15 minutes on 2 cores
    python bench/memory.py --sizes 10000,50000          # about 1 minute
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import _common as c


def sampler(every_s: float) -> Callable[[c.Running], list[tuple[float, float]]]:
    def sample(running: c.Running) -> list[tuple[float, float]]:
        samples: list[tuple[float, float]] = []
        while not running.done.is_set():
            rss = c.vm_rss_mb(running.pid)
            if rss is not None and rss > 0:  # a zombie reports no VmRSS
                samples.append((time.monotonic() - running.launched, rss))
            running.done.wait(every_s)
        return samples

    return sample


def rss_at(samples: list[tuple[float, float]], share: float) -> float | None:
    """The first sample at or after share of the sampled span."""
    if not samples:
        return None
    at = samples[-1][0] * share
    return next(rss for t, rss in samples if t >= at)


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="100000,1000000", help="comma list of -fill-db (default 100000,1000000)"
    )
    parser.add_argument("--workers", type=int, default=6, help="workers (default 6)")
    parser.add_argument("--claim", default="indexed", help="claim strategy (default indexed)")
    parser.add_argument("--sample-s", type=float, default=0.5, help="VmRSS sampling period (default 0.5)")
    c.common_args(parser, repeat=1)
    return parser


def main() -> None:
    args = arguments().parse_args()

    sizes = [int(x) for x in c.comma_list(args.sizes)]
    audits = ["no-audit", "audit"]

    def cli_args(size: int, audit: str) -> list[str]:
        out = ["-fill-db", str(size), "-workers", str(args.workers), "-work-ms", "0", "-claim", args.claim]
        return out + (["-no-audit"] if audit == "no-audit" else [])

    print("memory: " + c.cli_command_text(cli_args(sizes[0], "audit")).replace(f" {sizes[0]} ", " N ", 1)
          + " [-no-audit]")  # fmt: skip
    cells = [f"{size}/{audit}" for size in sizes for audit in audits]

    with c.server_from_args(args.dsn) as server:

        def measure(cell: str, _r: int) -> dict[str, Any]:
            size, audit = cell.split("/")
            data = c.run_cli(cli_args(int(size), audit), server.dsn, while_running=sampler(args.sample_s))
            samples = data["_bench"]["watch"] or []
            return {
                "msg_s": float(data["throughput_per_s"]),
                "elapsed_s": float(data["elapsed_s"]),
                "peak_mb": data["_bench"]["max_rss_mb"],
                "end_mb": samples[-1][1] if samples else float("nan"),
                "at10_mb": rss_at(samples, 0.1) or float("nan"),
                "at90_mb": rss_at(samples, 0.9) or float("nan"),
                "samples": samples,
                "audit": (data.get("audit") or {}).get("verdict", "off"),
            }

        runs = c.interleaved(cells, args.repeat, measure)

    def med(cell: str, key: str) -> float:
        return c.median([r[key] for r in runs[cell]])

    keys = ["msg_s", "elapsed_s", "peak_mb", "end_mb", "at10_mb", "at90_mb"]
    rows = []
    for audit in audits:
        for size in sizes:
            cell = f"{size}/{audit}"
            rows.append(
                [f"{size:,}", audit, c.fmt(med(cell, "msg_s")), c.fmt(med(cell, "elapsed_s")),
                 c.fmt(med(cell, "peak_mb")), c.fmt(med(cell, "end_mb")), c.fmt(med(cell, "at10_mb")),
                 c.fmt(med(cell, "at90_mb")), c.audit_verdicts([{"audit": {"verdict": r["audit"]}}
                                                                for r in runs[cell]])]
            )  # fmt: skip
    if len(sizes) > 1:
        for audit in audits:
            small, big = f"{sizes[0]}/{audit}", f"{sizes[-1]}/{audit}"
            diff = [med(big, k) - med(small, k) for k in keys]
            rows.append([f"{sizes[-1]:,} - {sizes[0]:,}", audit, *(f"{d:+,.1f}" for d in diff), ""])
    c.print_table(
        ["messages", "audit", "msg/s", "elapsed s", "peak RSS MB", "end RSS MB", "RSS@10% MB",
         "RSS@90% MB", "verdict"],
        rows,
        f"{'medians of ' + str(args.repeat) + ' interleaved rounds' if args.repeat > 1 else 'one round'};"
        f" -workers {args.workers} -work-ms 0 -claim {args.claim}; RSS of the tool's process only"
        " (peak: ru_maxrss from wait4; end: last VmRSS sample; @x%: VmRSS at x% of the run's wall time)",
    )  # fmt: skip
    print("\nVmRSS over each run's wall time (MB at 10%, 20%, ..., 100%; last round):")
    for cell in cells:
        samples = runs[cell][-1]["samples"]
        curve = [rss_at(samples, i / 10) for i in range(1, 11)]
        print(f"  {cell:>16}: " + " ".join(c.fmt(v, 0) for v in curve))


if __name__ == "__main__":
    main()
