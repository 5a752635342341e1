"""The latency account's collect on long runs: its time and the process's peak memory at 1M and 10M
messages (issue 45, "Long enough to matter": a day at 800/s is 69M messages).

The journal is synthesized straight into the tool's tables with generate_series, in the shape of a
steady run: --rate messages a second over three types, --orders groups per type, 12 workers, each
message waiting 0-4 ms, claimed by a statement of 0.3-0.7 ms and worked 1-10 ms, and six in ten
claims by a worker that had been free 0-10 ms (free_s); --backlog S adds S seconds to every
message's wait, as in a run whose workers ran behind (each message's window then holds the free
spans of S seconds: the backlog x spans shape of issue 50). Then a fresh Python process reads the
account exactly as a run's collect does (db/account.read_account, result/account.LatencyAccount)
and reports:

* seconds: the collect's wall time (the server's sorts and the client's split), and the CPU
  seconds of each side (the client's process; the server's backend, from /proc, where the server
  runs on this host): on a host whose cores are shared, the CPU is the steadier figure;
* rss before / peak / growth (MB): VmRSS after the imports and the connection, ru_maxrss at the
  end, and their difference: what the collect itself held at its peak.

    PYTHONPATH=src python bench/account_collect.py --dsn postgresql://...   # 1M and 10M
    PYTHONPATH=src python bench/account_collect.py --sizes 100000,1000000   # one embedded server
    PYTHONPATH=src python bench/account_collect.py --sizes 100000,300000 --rate 3000 --backlog 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import _common as c
import psycopg

FILL = """
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added,
                         attempt, free_s, claim_s)
select i, 'type' || (1 + i %% 3), (i / 3) %% %(orders)s, 'w' || (1 + i %% 3 + 3 * ((i / 3) %% 4)),
       t0 + make_interval(secs => a + wait + claim), t0 + make_interval(secs => a + wait + claim + work),
       t0 + make_interval(secs => a), 1, free, claim
from (select i, i / %(rate)s::float8 as a, %(backlog)s + random() * 0.004 as wait,
             0.0003 + random() * 0.0004 as claim,
             0.001 + random() * 0.009 as work,
             case when random() < 0.6 then random() * 0.01 end as free,
             timestamptz '2026-01-01 00:00:00+00' as t0
      from generate_series(1, %(n)s) as i) g
"""


def fill(dsn: str, n: int, orders: int, rate: float, backlog: float) -> float:
    """A journal of n messages (the tool's own journal and failure tables, made afresh)."""
    from pgmq_sim.sqlfiles import statement

    began = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement("journal"))
        conn.execute("drop table if exists msg_failures")
        conn.execute(statement("failures_table"))
        conn.execute("select setseed(0.5)")  # the same journal for every tree measured
        conn.execute(FILL, {"n": n, "orders": orders, "rate": rate, "backlog": backlog})
        conn.execute("analyze msg_journal")
    return time.perf_counter() - began


def collect(dsn: str) -> None:
    """In a process of its own: the collect, as a run's, with its time and memory (JSON on stdout)."""
    from pgmq_sim.db.account import read_account
    from pgmq_sim.result.account import LatencyAccount

    conn = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.RawCursor)
    before = vm_rss_mb()
    server = Path(f"/proc/{conn.info.backend_pid}/stat")  # a local server: its backend's CPU
    server_cpu = cpu_s(server) if server.exists() else None
    client_cpu = cpu_now()
    began = time.perf_counter()
    account = read_account(
        conn, True, [], lambda origin, journeys, free: LatencyAccount.of(journeys, free, True, origin)
    )
    seconds = time.perf_counter() - began
    client = cpu_now() - client_cpu
    server_s = cpu_s(server) - server_cpu if server_cpu is not None else None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert account is not None and account.p99 is not None and account.median is not None
    said = {"p99": account.p99.text(), "median": account.median.text()}
    said["placed"] = sum(s for _, s in account.p99.hidden_by_second)  # its hidden time placed in the run
    print(
        json.dumps(
            {"seconds": seconds, "client": client, "server": server_s, "before": before, "peak": peak, **said}
        )
    )


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_s(stat: Path) -> float:
    """A process's user and system CPU seconds, from /proc/PID/stat."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    c.common_args(parser, repeat=1)
    parser.add_argument("--sizes", type=c.comma_list, default=["1000000", "10000000"])
    parser.add_argument("--orders", type=int, default=100, help="groups per type (default 100)")
    parser.add_argument("--rate", type=float, default=800.0, help="messages a second (default 800)")
    parser.add_argument(
        "--backlog", type=float, default=0.0, help="seconds every message waits behind a backlog (default 0)"
    )
    parser.add_argument("--collect", metavar="DSN", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.collect:
        collect(args.collect)
        return
    rows = []
    with c.server_from_args(args.dsn) as server:
        for size in (int(s) for s in args.sizes):
            filled = fill(server.dsn, size, args.orders, args.rate, args.backlog)
            for _ in range(args.repeat):
                out = subprocess.run(
                    [sys.executable, __file__, "--collect", server.dsn],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                got = json.loads(out.stdout)
                rows.append(
                    [
                        f"{size:,}",
                        f"{filled:.0f}",
                        f"{got['seconds']:.1f}",
                        f"{got['client']:.1f}",
                        c.fmt(got["server"]),
                        f"{got['before']:.1f}",
                        f"{got['peak']:.1f}",
                        f"{got['peak'] - got['before']:.1f}",
                        got["p99"],
                        f"{got['placed']:.3f}",
                    ]
                )
                print(" | ".join(rows[-1]), flush=True)
    c.print_table(
        [
            "messages",
            "fill s",
            "collect s",
            "client CPU s",
            "server CPU s",
            "rss before MB",
            "peak MB",
            "growth MB",
            "slowest 1%",
            "its hidden s placed",
        ],
        rows,
        f"the latency account's collect: {args.orders} groups per type at {args.rate:g}/s,"
        f" {args.backlog:g} s of backlog",
    )


if __name__ == "__main__":
    main()
