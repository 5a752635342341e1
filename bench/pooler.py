"""Through a pooler: msg/s and latency direct against through PgBouncer in transaction and in session
pooling, at 12 workers, with the seed's work time (-work-ms 1-10) and with zero work (-work-ms 0).

One embedded server on TCP with a password (`LocalPostgres(tcp=True)`; --dsn: a server of yours,
which must be on TCP with a password in the DSN) and two real PgBouncers in front of it for the whole
script, one per pool mode, both Debian's `pgbouncer` started by the tests' helper (tests/pooler.py's
PgBouncer, loaded by bench/_common.py's pgbouncer_for with tests/ on sys.path; it runs pgbouncer as
an unprivileged user on 127.0.0.1, pool_size 20, scram-sha-256). The direct path is the server's
TCP DSN, so every path is TCP over loopback. Each run's JSON `path` key says which pooling the run
worked in (the tool detects it; --explicit passes -pooler none|transaction|session instead): the
table prints it, and a run that found another mode than its cell's is marked.

Two loads per work time, because one cannot give both figures:

* drain:  pgmq-sim -fill-db 6000 -workers 12 -orders 100 -work-ms W -claim indexed
          A prefilled table drained by a closed loop: msg/s is the path's capacity. Its e2e latency
          (time_added to commit) is mostly the time a message waited in the prefilled backlog (the
          run's length), so it is printed but not compared.
* rate:   pgmq-sim -fill-db 1200 -rate 200 -workers 12 -orders 100 -work-ms W -claim indexed
                   -wakeup notify -listen-dsn DIRECT
          A fixed arrival rate well under every path's capacity (about 1,000 msg/s or more here):
          msg/s is the rate, and e2e p50/p99 is what a message costs through the path: wake-up, claim,
          work, completion. LISTEN goes to a direct connection in every cell (a transaction pooler
          cannot hold a LISTEN), so the wake-up is the same everywhere; `behind` is the run's
          elapsed time less fill/rate (about 0 when the path keeps up).

-claim indexed: the seed's claim scans the table, which would dominate every cell. -orders 100 (300
groups) rather than the seed's 2: with 6 groups and 12 workers half the workers find nothing and
sleep the poll interval, which would measure the poll, not the path. Audit and run log on (the audit
checks exactly-once through each pooler).

Per cell: msg/s, e2e p50/p99 (latency_ms.e2e), claim p50 (latency_ms.claim), the tool's client CPU
per message in its worker phase (client.cpu_us_per_msg), the server's CPU per message over the whole
run (LocalPostgres.cpu_seconds(): every server process, prefill and audit included; '-' with --dsn)
and PgBouncer's own CPU per message over the whole run (its process, from /proc). Ratios against
direct: msg/s (drain) and e2e p50 (rate). Medians of --repeat rounds; in a round every cell runs
once, the three paths of a workload next to each other, the order rotating from round to round.
Two shared cores: the tool, the server and PgBouncer compete for them, and another benchmark may be
running; compare ratios, not absolute figures.

    python bench/pooler.py                                   # about 4 minutes on 2 cores
    python bench/pooler.py --fill-db 600 --rate-fill 100 --rate 400 --works 0 --repeat 1   # quick form
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
from typing import Any

import _common as c

from pgmq_sim.embedded.processes import cpu_seconds

PATHS = ("direct", "transaction", "session")
LOADS = ("drain", "rate")


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=6000, help="messages per drain run (default 6000)")
    parser.add_argument("--rate", type=float, default=200, help="arrival rate of rate runs (default 200/s)")
    parser.add_argument("--rate-fill", type=int, default=1200, help="messages per rate run (default 1200)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    parser.add_argument("--works", default="1-10,0", help="comma list of -work-ms values (default 1-10,0)")
    parser.add_argument("--loads", default=",".join(LOADS), help="drain,rate (default both)")
    parser.add_argument("--pool-size", type=int, default=20, help="PgBouncer default_pool_size (default 20)")
    parser.add_argument(
        "--explicit", action="store_true", help="pass -pooler none|transaction|session (default: detect)"
    )
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    works = c.comma_list(args.works)
    loads = [load for load in c.comma_list(args.loads) if load in LOADS]

    def cli_args(work: str, load: str, path: str, direct: str) -> list[str]:
        out = ["-workers", str(args.workers), "-orders", str(args.orders), "-work-ms", work]
        out += ["-claim", "indexed"]
        if load == "drain":
            out += ["-fill-db", str(args.fill_db)]
        else:
            out += ["-fill-db", str(args.rate_fill), "-rate", f"{args.rate:g}", "-wakeup", "notify"]
            out += ["-listen-dsn", direct]
        if args.explicit:
            out += ["-pooler", "none" if path == "direct" else path]
        return out

    for load in loads:
        shown = c.cli_command_text(cli_args("W", load, "direct", "DIRECT"))
        print(f"{load}: {shown.replace('-pooler none', '-pooler none|transaction|session')}")
    print("  DSN: the server direct, or PgBouncer (transaction | session pooling) in front of it")

    with c.tcp_server(args.dsn) as (direct, label, pg), contextlib.ExitStack() as stack:
        print(f"server: {label}, one for all runs", flush=True)
        dsns, bouncers = {"direct": direct}, {}
        for mode in PATHS[1:]:
            try:
                bouncers[mode] = stack.enter_context(c.pgbouncer_for(direct, mode, args.pool_size))
            except RuntimeError as missing:  # not installed, or --dsn not on TCP with a password
                print(f"{mode} pooling: skipped, {missing}")
                continue
            dsns[mode] = bouncers[mode].dsn
            binary = bouncers[mode].binary
            version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
            first = version.stdout.splitlines()[0] if version.stdout.strip() else binary
            print(f"{mode} pooling: {first}, pool_size {args.pool_size}")
        paths = [path for path in PATHS if path in dsns]

        def measure(cell: str, _round: int) -> dict[str, Any]:
            work, load, path = cell.split("|")
            bouncer = bouncers.get(path)
            pid = bouncer.process.pid if bouncer is not None else None
            before = cpu_seconds([pid]) if pid else 0.0
            server_before = pg.cpu_seconds() if pg is not None else float("nan")
            try:
                data = c.run_cli(cli_args(work, load, path, direct), dsns[path])
            except c.CliFailed as failed:
                return {"failed": str(failed).replace(direct, "DIRECT")}
            processed = max(1, int(data["processed"]))
            server_s = pg.cpu_seconds() - server_before if pg is not None else float("nan")
            lat = data["latency_ms"]
            found = data["path"]
            return {
                "msg_s": float(data["throughput_per_s"]),
                "e2e_p50": float(lat["e2e"]["p50"]),
                "e2e_p99": float(lat["e2e"]["p99"]),
                "claim_p50": float(lat["claim"]["p50"]),
                "client_us": float(data["client"]["cpu_us_per_msg"]),
                "server_us": server_s * 1e6 / processed,
                "bouncer_us": (cpu_seconds([pid]) - before) * 1e6 / processed if pid else float("nan"),
                "behind_s": float(data["elapsed_s"]) - args.rate_fill / args.rate
                if load == "rate"
                else float("nan"),
                "empty": float(data["empty_claims"]),
                "pooler": f"{found['pooler']}{' (detected)' if found['detected'] else ''}",
                "audit": (data.get("audit") or {}).get("verdict", "off"),
            }

        cells = [f"{work}|{load}|{path}" for work in works for load in loads for path in paths]
        results = c.interleaved(cells, args.repeat, measure)

    report(results, works, loads, paths, args)


def report(
    results: dict[str, list[dict[str, Any]]],
    works: list[str],
    loads: list[str],
    paths: list[str],
    args: argparse.Namespace,
) -> None:
    def ok(cell: str) -> list[dict[str, Any]]:
        return [r for r in results[cell] if "failed" not in r]

    def med(cell: str, key: str) -> float:
        return c.median([float(r[key]) for r in ok(cell)])

    rows = []
    for work in works:
        for load in loads:
            base = f"{work}|{load}|direct"
            for path in paths:
                cell = f"{work}|{load}|{path}"
                runs = ok(cell)
                failed = len(results[cell]) - len(runs)
                used = "/".join(sorted({r["pooler"] for r in runs})) or "-"
                if runs and any(
                    not r["pooler"].startswith("none" if path == "direct" else path) for r in runs
                ):
                    used += " (!)"
                msg_ratio = med(cell, "msg_s") / med(base, "msg_s") if ok(base) and runs else float("nan")
                e2e_ratio = med(cell, "e2e_p50") / med(base, "e2e_p50") if ok(base) and runs else float("nan")
                rows.append(
                    [
                        f"-work-ms {work}, {load}",
                        path,
                        used,
                        c.fmt(med(cell, "msg_s")),
                        c.fmt(msg_ratio, 3) if load == "drain" else "-",
                        c.fmt(med(cell, "e2e_p50"), 1),
                        c.fmt(med(cell, "e2e_p99"), 1),
                        c.fmt(e2e_ratio, 3) if load == "rate" else "-",
                        c.fmt(med(cell, "claim_p50"), 2),
                        c.fmt(med(cell, "client_us"), 0),
                        c.fmt(med(cell, "server_us"), 0),
                        c.fmt(med(cell, "bouncer_us"), 0),
                        c.fmt(med(cell, "behind_s"), 2) if load == "rate" else "-",
                        c.fmt(med(cell, "empty"), 0),
                        ("/".join(sorted({r["audit"] for r in runs})) or "-")
                        + (f" ({failed} failed)" if failed else ""),
                    ]
                )
    headers = [
        "workload",
        "path",
        "run's path (JSON)",
        "msg/s",
        "x direct",
        "e2e p50 ms",
        "e2e p99 ms",
        "p50 x direct",
        "claim p50 ms",
        "client us/msg",
        "server us/msg",
        "bouncer us/msg",
        "behind s",
        "empty",
        "audit",
    ]
    c.print_table(
        headers,
        rows,
        f"medians of {args.repeat} interleaved rounds; {args.workers} workers, -orders {args.orders}"
        f" ({3 * args.orders} groups), -claim indexed, audit on; drain: -fill-db {args.fill_db};"
        f" rate: -fill-db {args.rate_fill} -rate {args.rate:g} -wakeup notify (LISTEN direct)",
    )
    print(
        "drain: msg/s is the path's capacity (x direct compares it); its e2e is the wait in the prefilled"
        " backlog.\nrate: msg/s is the arrival rate; e2e p50/p99 is the path's latency (p50 x direct"
        " compares it); behind = elapsed - fill/rate.\n(!) = the run worked in another pooling than its"
        " cell's. server and bouncer us/msg: over the whole run (prefill and audit included)."
    )
    for cell, runs in results.items():
        figures = ", ".join(
            "FAILED" if "failed" in r else f"{c.fmt(r['msg_s'])} msg/s e2e p50 {c.fmt(r['e2e_p50'], 1)}"
            for r in runs
        )
        print(f"{cell.replace('|', ' ')}: {figures}")
    for cell, runs in results.items():
        for r in runs:
            if "failed" in r:
                print(f"{cell.replace('|', ' ')} failed: {r['failed']}")


if __name__ == "__main__":
    main()
