"""Start-up: time from launching `pgmq-sim -fill-db 100 -workers 3` (embedded server, no -dsn) to its
first claim.

Target: under 3 s to the first claim.

How: the script runs `python -m pgmq_sim ARGS -logfile FILE -json FILE` from an empty directory
with no -dsn (PGMQ_SIM_DSN removed from the environment), so the tool starts and deletes its own
embedded PostgreSQL, and notes the wall clock (UTC) just before the launch. After the run it reads
the log (one parser, _common.read_run_log): lifecycle lines carry ISO timestamps, and every
`handled` line has claimed=TIME, the server's clock_timestamp() right after the claim locked the row
(same machine, same clock). First claim = the earliest claimed= in the log (the first `handled` line
is the first *completed* message, not necessarily the first claimed). The breakdown uses the
lifecycle lines: `run start` (written once the server is up), `schema ready`, `prefilled`,
`starting N workers`. For reference it also times `python -m pgmq_sim -version` (interpreter and
imports only). Runs are sequential; medians of --repeat.

    python bench/startup.py                  # about 30 s
    python bench/startup.py --repeat 10
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

TARGET_S = 3.0
EVENTS = {  # the lifecycle lines of the run log, by the start of their text
    "server up (run start)": r"run start",
    "schema ready": r"schema ready",
    "prefilled": r"prefilled",
    "workers starting": r"starting \d+ workers",
}


def clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PGMQ_SIM_DSN", None)
    return env


def one_start(args: list[str]) -> dict[str, float]:
    """Seconds from launch to each lifecycle event, the first claim and the process exit."""
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-start-") as tmp:
        log = Path(tmp) / "run.log"
        data = c.run_cli(args, None, keep_log=log, cwd=tmp, env=clean_env())
        lines = c.read_run_log(log)
    launched = data["_bench"]["launched_utc"]
    out: dict[str, float] = {}
    for name, pattern in EVENTS.items():
        at = lines.first_event(pattern)
        out[name] = (at - launched).total_seconds() if at else float("nan")
    claims = [(h.claimed - launched).total_seconds() for h in lines.handled]
    out["first claim"] = min(claims) if claims else float("nan")
    out["process exit"] = data["_bench"]["wall_s"]
    return out


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="launches, median reported (default 5)")
    parser.add_argument("--fill-db", type=int, default=100, help="messages (default 100)")
    parser.add_argument("--workers", type=int, default=3, help="workers (default 3)")
    return parser


def main() -> None:
    args = arguments().parse_args()

    run_args = ["-fill-db", str(args.fill_db), "-workers", str(args.workers)]
    print(
        f"start-up: python -m pgmq_sim {' '.join(run_args)} -logfile FILE -json FILE -progress off (no -dsn)"
    )
    imports = []
    runs = []
    for r in range(args.repeat):
        began = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pgmq_sim", "-version"], capture_output=True, env=clean_env(), check=True
        )
        imports.append(time.monotonic() - began)
        run = one_start(run_args)
        runs.append(run)
        print(
            f"  run {r + 1}/{args.repeat}: first claim {run['first claim']:.3f} s,"
            f" exit {run['process exit']:.3f} s; -version {imports[-1]:.3f} s",
            flush=True,
        )

    steps = [*EVENTS, "first claim", "process exit"]
    rows = [["python -m pgmq_sim -version (imports only)", c.fmt(c.median(imports), 3), "", ""]]
    for step in steps:
        values = [run[step] for run in runs]
        rows.append(
            [f"launch -> {step}", c.fmt(c.median(values), 3), c.fmt(min(values), 3), c.fmt(max(values), 3)]
        )
    first = c.median([run["first claim"] for run in runs])
    c.print_table(
        ["step", "median s", "min s", "max s"],
        rows,
        f"{args.repeat} launches with the embedded server (initdb + start each time)",
    )
    print(
        f"first claim: {first:.3f} s; target < {TARGET_S:g} s:"
        f" {c.verdict(first, TARGET_S, higher_is_better=False)}"
    )


if __name__ == "__main__":
    main()
