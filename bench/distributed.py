"""Runners and placement: client CPU per message and msg/s of the single-process runner, of Locust
worker processes (`--processes 1` and `2`: each a gevent process supervising a child that runs its
workers on an event loop) and of pgbench, with client and server sharing the cores and pinned
apart.

One embedded server (pgmq_sim.embedded.LocalPostgres) for every run. Per round, interleaved (order
rotating), every side in both placements:

* shared: client and server on all cores (the embedded default: the tool runs beside its server);
* pinned: `taskset` puts the server on core 1 and the client on core 0 (a client with a core of its
  own, as on a machine of its own).

Sides, all at zero work with C clients/workers, claim `indexed`, -orders 100, audit and log on:

* loop:       pgmq-sim -fill-db N -workers C -work-ms 0 -orders 100 -claim indexed
* processes-pK: the same with --processes K (K Locust worker processes and their children, the
              master apart)
* pgbench:    pgbench -n -M prepared -c C -j 2 -t N/C with bench/_pgbench.py's audited script (BEGIN;
              the wrapped claim, \\gset; the audited completion; COMMIT) on a table prefilled by SQL.

Figures: `workers` = the tool's CPU over its worker phase per message, every process of the run (its
JSON's client.cpu_us_per_msg); `process` = user+system CPU of the whole run (wait4 of the tool, its
worker processes included: start-up, prefill, audit, report) per message; pgbench: its own CPU per
message. Ratio = msg/s over pgbench msg/s in the same placement. Medians of --repeat rounds.

    python bench/distributed.py                       # about 6 minutes on 2 cores
    python bench/distributed.py --messages 1000 --repeat 1 --placements shared   # quick form
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import time

import _common as c
import _pgbench as pgb

TARGET = 0.9
PLACEMENTS = ("shared", "pinned")


def pin_server(server: c.Server, cores: str) -> None:
    if server.pg is None:
        return
    for pid in server.pg.server_pids():
        subprocess.run(["taskset", "-a", "-p", "-c", cores, str(pid)], capture_output=True, check=False)


def client_prefix(placement: str) -> list[str]:
    return ["taskset", "-c", "0"] if placement == "pinned" else []


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20000, help="messages per run (default 20000)")
    parser.add_argument("--clients", type=int, default=12, help="workers / pgbench clients (default 12)")
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--placements", default=",".join(PLACEMENTS), help="shared,pinned (default both)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    placements = [p for p in c.comma_list(args.placements) if p in PLACEMENTS]
    strategy = c.load_design("indexed")
    script = pgb.pgbench_script(strategy, audited=True)
    base = ["-fill-db", str(args.messages), "-workers", str(args.clients), "-work-ms", "0"]
    base += ["-orders", str(args.orders), "-claim", "indexed"]
    sides = {
        "loop": base,
        "processes-p1": [*base, "--processes", "1"],
        "processes-p2": [*base, "--processes", "2"],
    }
    per_client = math.ceil(args.messages / args.clients)
    print("tool: " + c.cli_command_text(base) + "  [--processes 1|2]")
    print(f"pgbench: pgbench -n -M prepared -c {args.clients} -j 2 -t {per_client} (audited script)")
    with c.server_from_args(args.dsn) as server:
        bench_dsn = pgb.bench_database(server.dsn)
        margin = max(2000, args.messages // 10)

        def measure(cell: str, _round: int) -> dict[str, float]:
            side, placement = cell.rsplit("/", 1)
            pin_server(server, "1" if placement == "pinned" else "0-1")
            time.sleep(0.2)
            prefix = client_prefix(placement)
            if side == "pgbench":
                pgb.prepare_queue(
                    bench_dsn, strategy, args.messages + margin, args.orders, analyze=True, journal=True
                )
                res = pgb.run_pgbench(server, bench_dsn, script, args.clients, per_client, prefix=prefix)
                per_msg = res.cpu_s * 1e6 / max(1, res.processed)
                return {"msg_s": res.msg_per_s, "workers_us": per_msg, "process_us": per_msg}
            data = c.run_cli(sides[side], server.dsn, prefix=prefix)
            processed = max(1, int(data["processed"]))
            return {
                "msg_s": float(data["throughput_per_s"]),
                "workers_us": float(data["client"]["cpu_us_per_msg"]),
                "process_us": data["_bench"]["cpu_s"] * 1e6 / processed,
            }

        cells = [f"{side}/{placement}" for placement in placements for side in [*sides, "pgbench"]]
        results = c.interleaved(cells, args.repeat, measure)
        pin_server(server, "0-1")

    def med(cell: str, key: str) -> float:
        return c.median([r[key] for r in results[cell]])

    rows = []
    for side in [*sides, "pgbench"]:
        row = [side]
        for placement in placements:
            cell = f"{side}/{placement}"
            ratio = med(cell, "msg_s") / med(f"pgbench/{placement}", "msg_s")
            row += [
                c.fmt(med(cell, "workers_us"), 0),
                c.fmt(med(cell, "process_us"), 0),
                c.fmt(med(cell, "msg_s")),
                c.fmt(ratio, 3) + ("" if side == "pgbench" else " " + c.verdict(ratio, TARGET)),
            ]
        rows.append(row)
    headers = ["client"]
    for placement in placements:
        headers += [
            f"{placement}: us/msg workers",
            "us/msg process",
            "msg/s",
            f"x pgbench (>={TARGET})",
        ]
    c.print_table(
        headers,
        rows,
        f"medians of {args.repeat} interleaved rounds; {args.messages} messages, {args.clients} clients,"
        f" claim indexed, -orders {args.orders}, work 0, audit on; {os.cpu_count()} cores",
    )
    print("pinned = server on core 1, client on core 0 (a client on its own machine); shared = all cores.")


if __name__ == "__main__":
    main()
