"""Single against split transactions, without faults and under each fault of the schedule.

One table, one workload (same seed, same server, messages arriving at --rate, so end-to-end
latency is service time plus what a fault adds, not time queued in a prefilled backlog):
msg/s, end-to-end p50/p99, connections lost,
redelivered, lost and duplicated messages (must be 0) and the time to recover after a fault:
from the fault (or a hold's end) to the first second whose throughput is back to 90% of the
seconds before it. Each cell is a real run of the CLI against one embedded server.

--time-scale F multiplies every time of the fault schedule (and of the scenario names): with a
smaller --fill-db the runs are shorter, and the faults still land inside them.

    python bench/scenarios.py                      # the table for the README, about 6 minutes
    python bench/scenarios.py --fill-db 4000       # quicker, about 2 minutes
    python bench/scenarios.py --fill-db 1000 --rate 800 --time-scale 0.2 --only no,restart-server  # quick
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pgmq_sim.embedded.postgres import LocalPostgres

SCENARIOS = {
    "no faults": None,
    "kill-connection every 5 s": "kill-connection*2/5s",
    "kill-worker": "kill-worker*2@4s,kill-worker*2@9s",
    "restart-server": "restart-server@5s",
    "hold-xmin 10 s": "hold-xmin@3s+10s",
}
SECONDS = re.compile(r"(\d+(?:\.\d+)?)(?= ?s\b)")  # "5s" in a fault spec, "5 s" in a name


def scaled(text: str, scale: float) -> str:
    """The text with every time in seconds multiplied by scale ("@4s" -> "@1.2s" at 0.3)."""
    return SECONDS.sub(lambda m: f"{float(m.group(1)) * scale:g}", text) if scale != 1 else text


def run_cell(pg: LocalPostgres, workdir: Path, args: argparse.Namespace, tx: str, chaos: str | None) -> dict:
    out = workdir / f"{tx}-{abs(hash(chaos))}.json"
    command = [
        sys.executable, "-m", "pgmq_sim", "-dsn", pg.dsn, "-progress", "off",
        "-logfile", str(workdir / "run.log"),
        "-fill-db", str(args.fill_db), "-rate", str(args.rate), "-workers", str(args.workers),
        "-orders", str(args.orders),
        "-claim", args.claim, "-work-ms", args.work_ms, "-poll-interval", "0.05", "-tx", tx,
        "-lease", "5", "-seed", str(args.seed), "-json", str(out),
    ]  # fmt: skip
    if chaos:  # the bench's own server: a restart crash-restarts it (the bench is its superuser)
        command += ["-chaos", chaos, "-chaos-allow-restart"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if not out.exists():
        raise SystemExit(f"{tx} {chaos}: no result (exit {done.returncode}): {done.stderr.strip()}")
    return json.loads(out.read_text())


def recovery_s(doc: dict) -> float | None:
    """Median seconds from each fault to throughput back at 90% of the seconds before it."""
    per_second = [s["processed"] for s in doc["timeline"]]
    times = []
    for fault in doc["faults"]:
        if fault["kind"] in ("hold-xmin", "lock-table"):
            continue  # measured from its end
        at = int(fault["at_s"])
        before = per_second[max(0, at - 3) : at]
        if not before or at >= len(per_second) - 1:
            continue
        target = 0.9 * statistics.median(before)
        back = next((s for s in range(at, len(per_second) - 1) if per_second[s] >= target), None)
        if back is not None:
            times.append(max(0.0, back + 1 - fault["at_s"]))
    return statistics.median(times) if times else None


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=12_000)
    parser.add_argument("--rate", type=float, default=400.0, help="messages/s arriving (0: prefill)")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--orders", type=int, default=8)
    parser.add_argument("--claim", default="indexed")
    parser.add_argument("--work-ms", default="1-3")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="multiply the fault schedule's times (default 1)"
    )
    parser.add_argument(
        "--only",
        default=None,
        metavar="NAMES",
        help="comma list of the scenarios to run, by the first word of their names (default: every one:"
        f" {', '.join(name.split()[0] for name in SCENARIOS)})",
    )
    return parser


def main() -> None:
    parser = arguments()
    args = parser.parse_args()
    if args.time_scale <= 0:
        parser.error("--time-scale must be above 0")
    chosen = {name.split()[0]: name for name in SCENARIOS}
    only = [word.strip() for word in args.only.split(",")] if args.only else list(chosen)
    if unknown := [word for word in only if word not in chosen]:
        parser.error(f"--only: no scenario {', '.join(unknown)}; the scenarios are {', '.join(chosen)}")
    scenarios = {
        scaled(name, args.time_scale): scaled(chaos, args.time_scale) if chaos else None
        for name, chaos in SCENARIOS.items()
        if name.split()[0] in only
    }
    rows = []
    with LocalPostgres() as pg, tempfile.TemporaryDirectory() as tmp:
        print(f"server: {pg.label}; {args.fill_db} messages at {args.rate:g}/s, {args.workers} workers,"
              f" -claim {args.claim}, -work-ms {args.work_ms}, -orders {args.orders}, seed {args.seed},"
              f" faults: {'; '.join(chaos for chaos in scenarios.values() if chaos)}",
              flush=True)  # fmt: skip
        for name, chaos in scenarios.items():
            for tx in ("single", "split"):
                doc = run_cell(pg, Path(tmp), args, tx, chaos)
                audit = doc["audit"] or {}
                rows.append(
                    (
                        name,
                        tx,
                        doc["throughput_per_s"],
                        doc["latency_ms"]["e2e"]["p50"],
                        doc["latency_ms"]["e2e"]["p99"],
                        doc["connections_lost"],
                        audit.get("redelivered", 0),
                        audit.get("missing"),
                        audit.get("duplicates"),
                        recovery_s(doc),
                        doc["outcome"],
                    )
                )
                print(
                    f"  done: {name} / {tx}: {doc['outcome']}, {doc['throughput_per_s']:.0f} msg/s",
                    flush=True,
                )
    header = ("scenario", "tx", "msg/s", "e2e p50 ms", "e2e p99 ms", "conn. lost", "redelivered", "lost",
              "dup.", "recover s", "outcome")  # fmt: skip
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, tx, rate, p50, p99, lost_conn, redelivered, lost, dup, recover, outcome in rows:
        cells = [
            name, tx, f"{rate:.0f}", f"{p50:.0f}", f"{p99:.0f}", str(lost_conn), str(redelivered), str(lost),
            str(dup), "-" if recover is None else f"{recover:.1f}", outcome,
        ]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    base = {tx: r[2] for r in rows for tx in ("single", "split") if r[0] == "no faults" and r[1] == tx}
    print(f"\nsplit / single without faults: {base['split'] / base['single']:.2f}")


if __name__ == "__main__":
    main()
