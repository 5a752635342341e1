"""Faults: a -rate run with the tool's backends killed every few seconds and a server restart in the
middle, against the same run without faults.

Requirement: a 100,000-message -rate run rides through backends terminated every few seconds and
a server restart, loses and repeats nothing (audit: 0 missing, 0 duplicates), and the bench prints
the throughput lost against the same run without faults.

    pgmq-sim -fill-db 100000 -rate 1000 -workers 12 -claim indexed -work-ms 0-2 -orders 2
             -dsn DSN -json FILE

runs twice per round on one LocalPostgres (pgmq_sim.embedded), the order alternating by round:

* clean: nothing happens to it;
* faults: once the log says the workers start, the bench terminates every backend of the tool
  (`pg_terminate_backend` for application_name 'pgmq-sim...': workers, producer, listener) every
  --kill-every seconds, and calls LocalPostgres.restart() (pg_ctl restart -m fast) once, at
  --restart-at of the run's schedule (fill-db / rate seconds after the workers start). Faults stop
  when the log says the processing ended, so the audit that follows runs undisturbed.

Figures from each run's JSON: elapsed_s, throughput_per_s, latency_ms.e2e, connections_lost and
reconnects (the workers'), the audit. With -rate the throughput is paced by the rate, so a
faulty run that keeps up shows the same msg/s; what the faults cost shows as:

* behind s: elapsed_s - fill-db / rate, how long after its schedule the run ended;
* max backlog: the largest backlog of the run's timeline (messages arrived, not yet processed);
* drain s: from the restart to the first second after the backlog's peak at which the backlog is
  back to the clean run's largest (the faulty run only);
* catch-up msg/s: messages processed per second over that drain, the capacity the workers show
  while the backlog is there (the rate cannot show it).

    python bench/faults.py                                   # about 4 minutes on 2 cores
    python bench/faults.py --fill-db 10000 --kill-every 2    # about 30 s

--pooler measures the faults of the pooler path instead: an embedded server on TCP behind a real
PgBouncer (Debian's, through the tests' helper; transaction pooling, pool 4, server_login_retry 3),
one run per fault,

    pgmq-sim -duration D -rate R -workers 12 -orders 2 -claim indexed -work-ms 0-2 -poll-interval 0.05
             -dsn POOLER -pooler-admin CONSOLE [-chaos FAULT]

* pause: -chaos pause-pooler@D/3+2s (query_wait_timeout 10: the clients wait);
* pause past query_wait_timeout: the same pause with query_wait_timeout 1 (the clients are refused);
* kill: -chaos kill-pooler@D/3 (KILL of the database's client and server connections);
* reconnect: -chaos reconnect-pooler@D/3 (RECONNECT: server connections closed as released);
* pooler restart: the bench SIGKILLs PgBouncer at D/3 and starts it again a second later;
* server restart: the bench restarts the server behind it (pg_ctl restart -m fast) at D/3, while the
  pooler refuses logins for server_login_retry.

-poll-interval 0.05: the outage is the pause in completions, and workers that sleep a second when
they find nothing pause that long anyway.

Per fault, from the run's JSON `faults` (the injected fault, or the outage the run met): the outage
(from the fault until a message completed again), the recovery (from then until a whole second ran
at 90% of the rate before), connections lost, and the audit.

    python bench/faults.py --pooler                          # about 2 minutes
    python bench/faults.py --pooler --duration 6 --rate 200  # about 1 minute
"""

from __future__ import annotations

import argparse
import contextlib
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as c
import psycopg

TERMINATE = (
    "select count(pg_terminate_backend(pid)) from pg_stat_activity"
    " where application_name like 'pgmq-sim%' and pid <> pg_backend_pid()"
)


def workers_started(running: c.Running, timeout_s: float = 120) -> float | None:
    """Monotonic time at which the run log says `starting N workers`, or None if the run ended first."""
    deadline = time.monotonic() + timeout_s
    while not running.done.is_set() and time.monotonic() < deadline:
        if running.log.exists():
            lines = c.read_run_log(running.log)
            at = lines.first_event(r"starting \d+ workers")
            if at is not None:
                return running.launched + (at - running.launched_utc).total_seconds()
        running.done.wait(0.05)
    return None


class LogTail:
    """Reads the run log incrementally: has the run ended its processing (the outcome line)?"""

    ENDED = re.compile(r"\S+ (completed|interrupted|stalled|failed|server-\S+): \d+ processed in ")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.ended = False

    def check(self) -> bool:
        with contextlib.suppress(OSError), self.path.open("rb") as log:
            log.seek(self.offset)
            chunk = log.read()
            cut = chunk.rfind(b"\n") + 1
            self.offset += cut
            if self.ENDED.search(chunk[:cut].decode(errors="replace")):
                self.ended = True
        return self.ended


def terminate_backends(dsn: str) -> int:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(TERMINATE).fetchone()
            return int(row[0]) if row else 0
    except psycopg.OperationalError:
        return 0  # the server is restarting; the next round kills again


def injector(
    server: c.Server, kill_every_s: float, restart_after_s: float
) -> Callable[[c.Running], dict[str, Any]]:
    """A while_running callback: kill rounds and one restart, returns what it did and when."""
    assert server.pg is not None

    def inject(running: c.Running) -> dict[str, Any]:
        start = workers_started(running)
        done: dict[str, Any] = {"kills": 0, "terminated": 0, "restart_at_s": None, "restart_took_s": None}
        if start is None:
            return done
        next_kill = start + kill_every_s
        restart_at = start + restart_after_s
        tail = LogTail(running.log)
        # faults while messages flow; the audit and the summary after them are left alone
        while not running.done.is_set() and not tail.check():
            now = time.monotonic()
            if done["restart_at_s"] is None and now >= restart_at:
                done["restart_at_s"] = now - start
                server.pg.restart()
                done["restart_took_s"] = time.monotonic() - now
                next_kill = time.monotonic() + kill_every_s
            elif now >= next_kill:
                done["terminated"] += terminate_backends(server.dsn)
                done["kills"] += 1
                next_kill += kill_every_s
            wait = (
                min(next_kill, restart_at if done["restart_at_s"] is None else next_kill) - time.monotonic()
            )
            running.done.wait(max(0.01, wait))
        return done

    return inject


def pacing(data: dict[str, Any], schedule_s: float) -> dict[str, Any]:
    timeline = data["timeline"]
    backlog = [s["backlog"] for s in timeline]
    return {
        "behind_s": float(data["elapsed_s"]) - schedule_s,
        "max_backlog": max(backlog, default=0),
    }


def drain(
    data: dict[str, Any], restart_at_s: float | None, baseline: float
) -> tuple[float | None, float | None]:
    """(seconds from the restart until the backlog is back to baseline after its peak, msg/s then)."""
    if restart_at_s is None:
        return None, None
    timeline = data["timeline"]
    first = int(restart_at_s)
    after = timeline[first:]
    if not after:
        return None, None
    peak = first + max(range(len(after)), key=lambda i: after[i]["backlog"])
    for s in timeline[peak:]:
        if s["backlog"] <= baseline:
            seconds = s["second"] - restart_at_s
            window = timeline[peak : s["second"] + 1]
            rate = sum(x["processed"] for x in window) / len(window) if window else None
            return seconds, rate
    return None, None


POOLER_FAULTS = {  # name: (the pooler's settings, -chaos with AT in it, what the bench does at AT)
    "pause": ({"query_wait_timeout": "10"}, "pause-pooler@{at}s+2s", None),
    "pause past query_wait_timeout": ({"query_wait_timeout": "1"}, "pause-pooler@{at}s+2s", None),
    "kill": ({}, "kill-pooler@{at}s", None),
    "reconnect": ({}, "reconnect-pooler@{at}s", None),
    "pooler restart": ({}, None, "pooler"),
    "server restart": ({}, None, "server"),
}


def pooler_faults(args: argparse.Namespace) -> None:
    at = round(args.duration / 3, 1)
    cli_args = [
        "-duration", f"{args.duration:g}", "-rate", f"{args.rate:g}", "-workers", str(args.workers),
        "-claim", args.claim, "-work-ms", args.work_ms, "-orders", str(args.orders), "-poll-interval", "0.05",
    ]  # fmt: skip
    print("pooler faults: pgmq-sim " + " ".join(cli_args) + " -dsn POOLER -pooler-admin CONSOLE [-chaos ...]")
    rows = []
    with c.tcp_server(None) as (dsn, label, pg):
        print(f"server: {label}; PgBouncer in transaction pooling, pool 4, server_login_retry 3")
        for name, (extra, chaos, act) in POOLER_FAULTS.items():
            bouncer = c.pgbouncer_for(dsn, "transaction", 4, {"server_login_retry": "3"} | extra)
            with bouncer:

                def strike(running: c.Running, act: str | None = act, bouncer: Any = bouncer) -> None:
                    start = workers_started(running)
                    if (
                        act is None
                        or start is None
                        or running.done.wait(max(0.0, start + at - time.monotonic()))
                    ):
                        return
                    if act == "pooler":
                        bouncer.crash_and_restart(1.0)
                    else:
                        assert pg is not None
                        pg.restart()
                    running.done.wait()  # what this thread started dies with it (PR_SET_PDEATHSIG)

                more = ["-pooler-admin", bouncer.admin_dsn] + (
                    ["-chaos", chaos.format(at=at)] if chaos else []
                )
                data = c.run_cli(cli_args + more, bouncer.dsn, while_running=strike)
            audit = data.get("audit") or {}
            measured = [f for f in data["faults"] if "outage_s" in f]
            fault = max(measured, key=lambda f: f["outage_s"] or 0, default={})
            rows.append(
                [
                    name,
                    c.fmt(fault.get("outage_s")),
                    c.fmt(fault.get("recovery_s")),
                    c.fmt(fault.get("rate_before"), 0),
                    str(data["connections_lost"]),
                    c.fmt(data["throughput_per_s"]),
                    audit.get("verdict", "off"),
                    str(audit.get("duplicates", "-")),
                    str(audit.get("missing", "-")),
                ]
            )
    c.print_table(
        ["fault", "outage s", "recovery s", "rate before", "conn lost", "msg/s", "audit", "dup", "missing"],
        rows,
        f"pooler path: {args.workers} workers, {args.rate:g}/s for {args.duration:g} s, fault at {at:g} s",
    )
    bad = [row[0] for row in rows if row[6] != "pass" or row[7] != "0" or row[8] != "0"]
    print("lost and duplicated messages: " + ("none (PASS)" if not bad else f"FAIL in {', '.join(bad)}"))
    print(f"connections lost per fault: at most {args.workers} (one per worker) expected")


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fill-db", type=int, default=100000, help="messages per run (default 100000)")
    parser.add_argument("--rate", type=float, help="-rate, messages/s (default 1000; --pooler: 300)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--orders", type=int, default=2, help="order_ids per type (default 2)")
    parser.add_argument("--work-ms", default="0-2", help="simulated work MIN-MAX ms (default 0-2)")
    parser.add_argument("--claim", default="indexed", help="claim strategy (default indexed)")
    parser.add_argument("--kill-every", type=float, default=5, help="seconds between kill rounds (default 5)")
    parser.add_argument(
        "--restart-at", type=float, default=0.5, help="restart at this share of the schedule (default 0.5)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds, median reported (default 1)")
    parser.add_argument("--pooler", action="store_true", help="the pooler path's faults instead (see above)")
    parser.add_argument("--duration", type=float, default=15, help="--pooler: seconds per run (default 15)")
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.pooler:
        args.rate = args.rate or 300.0
        pooler_faults(args)
        return
    args.rate = args.rate or 1000.0

    schedule_s = args.fill_db / args.rate
    cli_args = [
        "-fill-db", str(args.fill_db), "-rate", f"{args.rate:g}", "-workers", str(args.workers),
        "-claim", args.claim, "-work-ms", args.work_ms, "-orders", str(args.orders),
    ]  # fmt: skip
    print("faults: " + c.cli_command_text(cli_args))
    print(
        f"faults run: every {args.kill_every:g} s pg_terminate_backend of all 'pgmq-sim' backends;"
        f" LocalPostgres.restart() at {args.restart_at:g} x {schedule_s:.0f} s schedule"
        f" = {args.restart_at * schedule_s:.0f} s after the workers start"
    )
    cells = ["clean", "faults"]
    with c.server_from_args(None) as server:

        def measure(cell: str, _r: int) -> dict[str, Any]:
            watch = (
                injector(server, args.kill_every, args.restart_at * schedule_s) if cell == "faults" else None
            )
            data = c.run_cli(cli_args, server.dsn, while_running=watch)
            data["_pace"] = pacing(data, schedule_s)
            return data

        runs = c.interleaved(cells, args.repeat, measure)

    baseline = c.median([r["_pace"]["max_backlog"] for r in runs["clean"]])
    rows = []
    for cell in cells:
        for r, data in enumerate(runs[cell]):
            audit = data.get("audit") or {}
            injected = data["_bench"]["watch"] or {}
            drain_s, catch_up = drain(data, injected.get("restart_at_s"), baseline)
            e2e = data["latency_ms"]["e2e"]
            rows.append(
                [
                    f"{cell}" + (f" #{r + 1}" if args.repeat > 1 else ""),
                    c.fmt(data["elapsed_s"]),
                    c.fmt(data["throughput_per_s"]),
                    c.fmt(e2e["p50"]),
                    c.fmt(e2e["p99"]),
                    str(data["connections_lost"]),
                    str(data["reconnects"]),
                    audit.get("verdict", "off"),
                    str(audit.get("duplicates", "-")),
                    str(audit.get("missing", "-")),
                    c.fmt(data["_pace"]["behind_s"]),
                    f"{data['_pace']['max_backlog']:,}",
                    c.fmt(drain_s),
                    c.fmt(catch_up, 0),
                ]
            )
    c.print_table(
        ["run", "elapsed s", "msg/s", "e2e p50 ms", "e2e p99 ms", "conn lost", "reconnects", "audit",
         "dup", "missing", "behind s", "max backlog", "drain s", "catch-up msg/s"],
        rows,
        f"-fill-db {args.fill_db} -rate {args.rate:g} (schedule {schedule_s:.0f} s) -workers {args.workers}"
        f" -orders {args.orders} -work-ms {args.work_ms} -claim {args.claim}",
    )  # fmt: skip
    for data in runs["faults"]:
        injected = data["_bench"]["watch"] or {}
        restart = injected.get("restart_at_s")
        print(
            f"faults injected: {injected.get('kills', 0)} kill rounds,"
            f" {injected.get('terminated', 0)} backends terminated; restart "
            + (
                f"at {restart:.1f} s, pg_ctl took {injected['restart_took_s']:.1f} s"
                if restart
                else "not reached"
            )
        )
    clean = c.median_at(runs["clean"], "throughput_per_s")
    faulty = c.median_at(runs["faults"], "throughput_per_s")
    print(f"throughput faults / clean: {c.fmt(faulty / clean if clean else None, 3)}")
    bad = [
        cell
        for cell in cells
        for data in runs[cell]
        if not data.get("audit") or data["audit"]["duplicates"] or data["audit"]["missing"]
    ]
    print("lost and duplicated messages: " + ("none (PASS)" if not bad else f"FAIL in {', '.join(bad)}"))


if __name__ == "__main__":
    main()
