"""The enqueue side (issue 49): what a notify trigger costs concurrent enqueues, and what the producer's
sessions cost the client.

notify   The tool's `-wakeup notify` (its trigger notifies every insert) against `-wakeup poll` (no
         trigger), with -producers 16 at full enqueue speed (a rate far above what they carry, for
         --duration s): enqueues committed per second, the enqueue p99, the enqueue verdict and the
         client's busiest core. Beside it pgbench on the same server, 16 clients: a single-row insert
         against the same insert with pg_notify in its transaction.
cost     The client's CPU per enqueue at a steady --rate with -producers 16 against one producer,
         rounds interleaved, medians (target: at most 1.2x).

    python bench/enqueue.py notify                  # about 2 minutes
    python bench/enqueue.py cost --rate 800 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile

import _common as c
import _pgbench as pgb
import psycopg

CLIENTS = 16
COST_TARGET = 1.2
INSERT = "insert into enq (queue_type, order_id, time_added) values ('type1', :oid, clock_timestamp());\n"
NOTIFY = "select pg_notify('pgmq_sim_bench', 'type1:1');\n"


def pgbench_tps(server: c.Server, dsn: str, script: str, seconds: float) -> tuple[float, float]:
    """pgbench -n -c 16 -j 2 -T S -M prepared: its tps, and its CPU per transaction in us."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgmq-bench-", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        cmd = [server.tool("pgbench"), "-n", "-f", path, "-c", str(CLIENTS), "-j", "2"]
        cmd += ["-T", f"{seconds:g}", "-M", "prepared", dsn]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        text = proc.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        os.unlink(path)
    found = re.search(r"tps = ([\d.]+) \(without initial connection time\)", text)
    done = re.search(r"number of transactions actually processed: (\d+)", text)
    if os.waitstatus_to_exitcode(status) != 0 or not found or not done:
        raise RuntimeError("pgbench: " + " | ".join(text.strip().splitlines()[-5:]))
    cpu_us = (usage.ru_utime + usage.ru_stime) / max(1, int(done.group(1))) * 1e6
    return float(found.group(1)), cpu_us


def notify(args: argparse.Namespace) -> None:
    base = [
        "-duration", f"{args.duration:g}", "-rate", "20000", "-producers", str(CLIENTS), "-workers", "3",
        "-work-ms", "0", "-claim", "indexed", "-orders", "1000",
    ]  # fmt: skip
    cells = {
        "with the trigger (notify)": [*base, "-wakeup", "notify"],
        "without (poll)": [*base, "-wakeup", "poll"],
    }
    for name, cli in cells.items():
        print(f"{name}: {c.cli_command_text(cli)}")
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(list(cells), args.repeat, lambda cell, _r: c.run_cli(cells[cell], server.dsn))
        bench = pgb.bench_database(server.dsn)
        with psycopg.connect(bench, autocommit=True) as conn:
            conn.execute("drop table if exists enq")
            conn.execute(
                "create table enq (id bigserial primary key, queue_type text, order_id int,"
                " time_added timestamptz)"
            )
        oid = "\\set oid random(1, 1000)\n"
        plain = pgbench_tps(server, bench, oid + INSERT, args.duration)
        notified = pgbench_tps(server, bench, oid + "begin;\n" + INSERT + NOTIFY + "commit;\n", args.duration)
    rows, rates = [], {}
    for cell, found in runs.items():
        rate = rates[cell] = c.median([r["producer"]["written"] / r["elapsed_s"] for r in found])
        enqueue = found[-1]["producer"]["enqueue"]
        cause = found[-1].get("enqueue_cause") or {}
        busiest = found[-1]["client"].get("core_share_max")
        rows.append(
            [cell, c.fmt(rate, 0), c.fmt(enqueue["latency_ms"]["p99"], 1),
             c.fmt(enqueue["round_trip_ms"]["p50"], 2), c.fmt(None if busiest is None else busiest * 100, 0),
             str(cause.get("resource", "-"))]
        )  # fmt: skip
    c.print_table(
        ["tool, 16 producers", "enqueues/s", "enqueue p99 ms", "round trip p50 ms", "client core %", "cause"],
        rows,
        f"medians of {args.repeat}; audits {c.audit_verdicts(r for v in runs.values() for r in v)}",
    )
    for cell, found in runs.items():
        cause = found[-1].get("enqueue_cause") or {}
        print(f"{cell}: {cause.get('evidence', '-')}")
    tool_ratio = (
        rates["with the trigger (notify)"] / rates["without (poll)"] if rates["without (poll)"] else None
    )
    c.print_table(
        ["pgbench, 16 clients", "tps", "CPU us per transaction"],
        [["insert", c.fmt(plain[0], 0), c.fmt(plain[1], 1)], ["insert + pg_notify", c.fmt(notified[0], 0),
         c.fmt(notified[1], 1)]],
    )  # fmt: skip
    print(
        f"with notify / without: the tool {c.fmt(tool_ratio, 2)}, pgbench {c.fmt(notified[0] / plain[0], 2)}"
    )


def cost(args: argparse.Namespace) -> None:
    base = [
        "-duration", f"{args.duration:g}", "-rate", f"{args.rate:g}", "-workers", "12", "-work-ms", "1-10",
        "-orders", "100", "-claim", "indexed", "-wakeup", "notify",
    ]  # fmt: skip
    cells = {"1 producer": base, f"{CLIENTS} producers": [*base, "-producers", str(CLIENTS)]}
    for name, cli in cells.items():
        print(f"{name}: {c.cli_command_text(cli)}")
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(list(cells), args.repeat, lambda cell, _r: c.run_cli(cells[cell], server.dsn))
    medians: dict[str, float] = {}
    rows = []
    for cell, found in runs.items():
        cpu = medians[cell] = c.median([r["client"]["cpu_us_per_msg"] for r in found])
        rows.append(
            [cell, ", ".join(c.fmt(r["client"]["cpu_us_per_msg"], 0) for r in found), c.fmt(cpu, 0),
             c.fmt(c.median([r["producer"]["enqueue"]["latency_ms"]["p99"] for r in found]), 2),
             c.fmt(c.median([r["throughput_per_s"] for r in found]), 0)]
        )  # fmt: skip
    c.print_table(
        ["cell", "client us/msg (rounds)", "median", "enqueue p99 ms", "msg/s"],
        rows,
        f"medians of {args.repeat}; audits {c.audit_verdicts(r for v in runs.values() for r in v)}",
    )
    ratio = medians[f"{CLIENTS} producers"] / medians["1 producer"] if medians["1 producer"] else None
    said = c.verdict(ratio, COST_TARGET, False)
    print(f"{CLIENTS} producers / 1: {c.fmt(ratio, 2)} (at most {COST_TARGET}): {said}")


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("notify", "cost"))
    parser.add_argument("--duration", type=float, default=10, help="seconds per run (default 10)")
    parser.add_argument("--rate", type=float, default=800, help="cost: msg/s (default 800)")
    c.common_args(parser, repeat=2)
    return parser


def main() -> None:
    args = arguments().parse_args()
    notify(args) if args.mode == "notify" else cost(args)


if __name__ == "__main__":
    main()
