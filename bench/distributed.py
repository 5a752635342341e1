"""Distributed engine: client CPU per message and msg/s for threads, gevent (Locust worker
processes) and pgbench running the same SQL, with client and server sharing the cores and with
each pinned to a core of its own.

One embedded server (pgmq_sim.embedded.LocalPostgres) for every run. Per round, interleaved (order
rotating), in two placements:

* shared: client and server on all cores;
* pinned: the server's processes on core 1 (`taskset -a -p -c 1` on the postmaster and its
  children, so new backends inherit it), the client under `taskset -c 0`: a client on a machine of
  its own, as the overhead target (>= 0.9 x pgbench) assumes.

Sides, all at zero work with C clients/workers, claim `indexed`, -orders 100, no audit:

* threads:  pgmq-sim -fill-db N -workers C -work-ms 0 -no-audit -orders 100 -claim indexed
* gevent-pK: the same with --processes K (K Locust worker processes, greenlets, master apart)
* pgbench:  pgbench -n -M prepared -c C -j 2 -t N/C with bench/_common.py's script (BEGIN; the
            wrapped claim, \\gset; the completion; COMMIT) on a table prefilled by SQL.

Client CPU is the user+system CPU of the client processes (pgmq-sim: every process of the run,
start-up and prefill included; pgbench: pgbench) divided by messages processed. Ratio = tool msg/s
over pgbench msg/s in the same placement. Medians of --repeat rounds.

    python bench/distributed.py                       # about 5 minutes on 2 cores
    python bench/distributed.py --messages 20000 --clients 6 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as c

from pgmq_sim.embedded import LocalPostgres, find_bindir

TARGET = 0.9
PLACEMENTS = ("shared", "pinned")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pin_server(pg: LocalPostgres, cores: str) -> None:
    for pid in pg.server_pids():
        subprocess.run(["taskset", "-a", "-p", "-c", cores, str(pid)], capture_output=True, check=False)


def client_prefix(placement: str) -> list[str]:
    return ["taskset", "-c", "0"] if placement == "pinned" else []


def run_tool(dsn: str, args: list[str], placement: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-dist-") as tmp:
        out = Path(tmp) / "r.json"
        command = [*client_prefix(placement), sys.executable, "-m", "pgmq_sim", *args]
        command += [
            "-json",
            str(out),
            "-progress",
            "off",
            "-logfile",
            str(Path(tmp) / "run.log"),
            "-dsn",
            dsn,
        ]
        before = children_cpu_s()
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=c.CLI_TIMEOUT_S, check=False, cwd=tmp
        )
        cpu = children_cpu_s() - before
        if proc.returncode != 0 or not out.exists():
            raise c.CliFailed(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")
        data: dict[str, Any] = json.loads(out.read_text())
    processed = max(1, int(data["processed"]))
    return {"msg_s": float(data["throughput_per_s"]), "cpu_us": cpu * 1e6 / processed}


def run_pgbench(
    pg: c.Postgres, script: str, clients: int, per_client: int, placement: str
) -> dict[str, float]:
    before_done = c.processed_count(pg.dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    os.chmod(f.name, 0o644)
    try:
        command = [*client_prefix(placement), pg.tool("pgbench"), "-n", "-f", f.name, "-c", str(clients)]
        command += ["-j", str(min(2, clients)), "-t", str(per_client), "-M", "prepared", pg.dsn]
        before = children_cpu_s()
        proc = subprocess.run(command, capture_output=True, text=True, timeout=c.CLI_TIMEOUT_S, check=False)
        cpu = children_cpu_s() - before
    finally:
        os.unlink(f.name)
    out = proc.stdout + proc.stderr
    txn = re.search(r"number of transactions actually processed: (\d+)", out)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if proc.returncode != 0 or not txn or not tps:
        raise RuntimeError("pgbench failed: " + " | ".join(out.strip().splitlines()[-4:]))
    elapsed = int(txn.group(1)) / float(tps.group(1))
    done = c.processed_count(pg.dsn) - before_done
    return {"msg_s": done / elapsed, "cpu_us": cpu * 1e6 / max(1, done)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10000, help="messages per run (default 10000)")
    parser.add_argument("--clients", type=int, default=6, help="workers / pgbench clients (default 6)")
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, medians reported (default 3)")
    args = parser.parse_args()
    strategy = c.load_strategy("indexed")
    script = c.pgbench_script(strategy)
    base = ["-fill-db", str(args.messages), "-workers", str(args.clients), "-work-ms", "0", "-no-audit"]
    base += ["-orders", str(args.orders), "-claim", "indexed", "-replace-tables"]
    sides = {
        "threads": base,
        "gevent-p1": [*base, "--processes", "1"],
        "gevent-p2": [*base, "--processes", "2"],
    }
    print("tool: " + c.cli_command_text(base) + "  [--processes 1|2]")
    print(
        f"pgbench: pgbench -n -M prepared -c {args.clients} -j 2 -t {math.ceil(args.messages / args.clients)}"
    )
    with LocalPostgres() as server:
        pg = c.Postgres(server.dsn, find_bindir(), "embedded")
        margin = max(2000, args.messages // 10)

        def measure(cell: str, _round: int) -> dict[str, float]:
            side, placement = cell.rsplit("/", 1)
            pin_server(server, "1" if placement == "pinned" else "0-1")
            time.sleep(0.2)
            if side == "pgbench":
                c.prepare_queue(pg.dsn, strategy, args.messages + margin, args.orders, analyze=True)
                per_client = math.ceil(args.messages / args.clients)
                return run_pgbench(pg, script, args.clients, per_client, placement)
            result = run_tool(pg.dsn, sides[side], placement)
            result["net_cpu_us"] = max(0.0, result["cpu_us"] - startup[side] * 1e6 / args.messages)
            return result

        # start-up (imports, server checks, a tiny prefill and drain, processes joining), per side,
        # so CPU per message can also be given net of it
        startup = {}
        for side in sides:
            small = [sides[side][0], "60", *sides[side][2:]]
            startup[side] = c.median(
                [run_tool(pg.dsn, small, "shared")["cpu_us"] * 60 / 1e6 for _ in range(2)]
            )
        print(
            "start-up CPU s: " + ", ".join(f"{side} {cpu:.2f}" for side, cpu in startup.items()), flush=True
        )
        cells = [f"{side}/{placement}" for placement in PLACEMENTS for side in [*sides, "pgbench"]]
        results = c.interleaved(cells, args.repeat, measure)
        pin_server(server, "0-1")

    def med(cell: str, key: str) -> float:
        return c.median([r[key] for r in results[cell]])

    rows = []
    for side in [*sides, "pgbench"]:
        net = "cpu_us" if side == "pgbench" else "net_cpu_us"
        row = [side, c.fmt(med(f"{side}/shared", "cpu_us"), 0), c.fmt(med(f"{side}/shared", net), 0)]
        row.append(c.fmt(med(f"{side}/pinned", net), 0))
        for placement in PLACEMENTS:
            ratio = med(f"{side}/{placement}", "msg_s") / med(f"pgbench/{placement}", "msg_s")
            row += [c.fmt(med(f"{side}/{placement}", "msg_s")), c.fmt(ratio, 3)]
        row.append(c.verdict(ratio, TARGET) if side != "pgbench" else "")
        rows.append(row)
    c.print_table(
        [
            "client",
            "CPU us/msg",
            "net of start-up",
            "net, pinned",
            "msg/s shared",
            "x pgbench",
            "msg/s pinned",
            "x pgbench",
            f"pinned >= {TARGET}",
        ],
        rows,
        f"medians of {args.repeat} interleaved rounds; {args.messages} messages, {args.clients} clients,"
        f" claim indexed, -orders {args.orders}, work 0, no audit; {os.cpu_count()} cores",
    )
    print("pinned = server on core 1, client on core 0 (a client on its own machine); shared = all cores.")
    print(
        "CPU us/msg (shared): every client process of the run, start-up and prefill included (gevent: the"
        " master too); net of start-up: minus the CPU of a -fill-db 60 run of the same command."
    )


if __name__ == "__main__":
    main()
