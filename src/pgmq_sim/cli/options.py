"""The run's flags, as the Go tool spells them (-fill-db) and as GNU does (--fill-db), in the order
`pgmq-sim --help` lists them: the Go tool's own first, then the queue design, the workload, faults,
capacity, gating, outputs and the runners."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pgmq_sim.cli.flags import flag

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_DSN_HELP = "default: $PGMQ_SIM_DSN, else an embedded PostgreSQL started for the run"

RUN_FLAGS: tuple[Callable[[F], F], ...] = (
    flag("delmsg", is_flag=True, help="Delete a message once handled (default: mark it processed)."),
    flag("dsn", metavar="URL", default=None, help=f"PostgreSQL to use ({DEFAULT_DSN_HELP})."),
    flag(
        "fill-db",
        type=int,
        default=None,
        metavar="N",
        help="Messages to write and process (default 1000; with -duration and -rate: no count, time alone).",
    ),
    flag(
        "logfile",
        default="msg_queue.log",
        show_default=True,
        metavar="FILE",
        help="Log of handled messages and run events; - for stdout.",
    ),
    flag(
        "rate",
        type=float,
        default=0.0,
        metavar="R",
        help="Insert at R messages/s while workers run instead of prefilling.",
    ),
    flag(
        "schema",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Schema file (default: ./schema.sql, else the packaged seed schema).",
    ),
    flag(
        "workers",
        type=int,
        default=None,
        metavar="N",
        help="Worker threads, dealt over the types (at least one per type; default 5).",
    ),
    flag(
        "next-msg",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Claim query (default: ./next_msg.sql, else the seed's; $1 is the type).",
    ),
    flag(
        "work-ms",
        default="1-10",
        show_default=True,
        metavar="MIN-MAX",
        help="Simulated work per message in ms, uniform.",
    ),
    flag(
        "orders",
        type=int,
        default=2,
        show_default=True,
        metavar="K",
        help="Distinct order_ids (groups per type).",
    ),
    flag(
        "poll-interval",
        type=float,
        default=1.0,
        show_default=True,
        metavar="S",
        help="Idle wait after an empty claim (poll), or fallback wait (notify).",
    ),
    flag(
        "claim",
        default=None,
        metavar="NAME",
        help="Claim strategy (a built-in queue design on the seed's table): seed, indexed, affinity,"
        " advisory, fifo, or ./strategies/NAME/claim.sql (default seed).",
    ),
    flag(
        "queue",
        default=None,
        metavar="DIR|NAME",
        help="The queue design: a folder of SQL (schema, enqueue, claim, complete; see"
        " docs/your-queue.md) or a built-in name (the -claim strategies, and the seeds' other designs).",
    ),
    flag(
        "priority",
        default=None,
        metavar="MIN-MAX",
        help="A uniform integer priority per message (enqueue.sql's $4); a larger number is served first.",
    ),
    flag(
        "delay",
        default=None,
        metavar="SHARE:MIN-MAX",
        help="That share of messages is due MIN to MAX seconds after it is enqueued (enqueue.sql's $5),"
        " e.g. 0.3:1-5.",
    ),
    flag(
        "archive",
        is_flag=True,
        help="Complete by the design's complete_archive.sql: move a finished message to its archive table.",
    ),
    flag(
        "batch",
        type=int,
        default=1,
        show_default=True,
        metavar="N",
        help="Messages one claim may take; the worker works them in order and completes them in one commit.",
    ),
    flag(
        "wakeup",
        default="poll",
        show_default=True,
        metavar="poll|notify",
        help="How idle workers learn of new messages.",
    ),
    flag(
        "compare",
        default=None,
        metavar="CELLS",
        help="Run each STRATEGY[/WAKEUP] (comma list, or 'all') on the same workload; one table.",
    ),
    flag("no-audit", is_flag=True, help="Skip the journal and audit (raw speed runs)."),
    flag(
        "stall-timeout",
        type=float,
        default=30.0,
        show_default=True,
        metavar="S",
        help="Stop with a diagnosis if nothing commits for S seconds while messages remain.",
    ),
    flag(
        "json",
        "json_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Write the whole result as JSON; - for stdout (the summary then goes to stderr).",
    ),
    flag(
        "plot",
        "plot_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE.png",
        help="Draw throughput, backlog and latency over time (needs pgmq-sim[plot]).",
    ),
    flag(
        "report",
        "report_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE.html",
        help="Write one self-contained HTML page of the run: the answer, charts over time, the tables, the"
        " advice and the scenario (needs pgmq-sim[plot]).",
    ),
    click.option(
        "-v",
        "--verbose",
        "verbose",
        is_flag=True,
        help="Print every row of the summary, not the answer alone.",
    ),
    flag(
        "reconnect-timeout",
        type=float,
        default=60.0,
        show_default=True,
        metavar="S",
        help="How long workers, producer and the tool keep reconnecting to a lost server.",
    ),
    flag(
        "replace-tables",
        is_flag=True,
        help="Replace msg_queue/msg_journal/pgmq_sim_run even if pgmq-sim did not create them.",
    ),
    flag(
        "tx",
        default=None,
        metavar="single|split",
        help="single: claim, work and complete in one transaction; split: claim with a lease and commit,"
        " work outside any transaction, complete in a second one (default single; a design's queue.toml).",
    ),
    flag(
        "lease", type=float, default=30.0, show_default=True, metavar="S", help="Split mode: a claim's lease."
    ),
    flag("fail-rate", type=float, default=0.0, metavar="P", help="Fraction of work attempts that fail."),
    flag(
        "max-attempts",
        type=int,
        default=5,
        show_default=True,
        metavar="N",
        help="Attempts before a failing message becomes a dead letter.",
    ),
    flag(
        "backoff-ms",
        type=float,
        default=100.0,
        show_default=True,
        metavar="BASE",
        help="A failed attempt's next try waits BASE x 2^(attempt-1) ms.",
    ),
    flag(
        "chaos",
        default=None,
        metavar="SPEC",
        help="Faults to inject, e.g. kill-connection/5s,kill-worker@3s,restart-server@10s,hold-xmin@5s+20s,"
        "lock-table@10s+3s.",
    ),
    flag(
        "chaos-allow-restart",
        is_flag=True,
        help="Let -chaos restart-server crash-restart a -dsn server (superuser needed).",
    ),
    flag(
        "duration",
        type=float,
        default=None,
        metavar="S",
        help="End the run after S seconds: the producer stops, work in flight finishes (with or without"
        " -fill-db).",
    ),
    flag(
        "pooler",
        default="auto",
        show_default=True,
        metavar="auto|none|session|transaction",
        help="The pooler between the tool and the server; auto detects it.",
    ),
    flag(
        "listen-dsn",
        metavar="URL",
        default=None,
        help="With -wakeup notify behind a transaction pooler: a direct connection for LISTEN.",
    ),
    flag(
        "wait-sample-hz",
        type=float,
        default=20.0,
        show_default=True,
        metavar="N",
        help="pg_stat_activity samples per second for the wait profile and the limit verdict; 0: none.",
    ),
    flag(
        "pooler-admin",
        metavar="URL",
        default=None,
        help="PgBouncer's admin console (database pgbouncer): the pool's waits each second in the report,"
        " and -chaos pause-pooler, kill-pooler, reconnect-pooler.",
    ),
    flag("types", type=int, default=3, show_default=True, metavar="N", help="Message types type1..typeN."),
    flag(
        "key-skew",
        default="uniform",
        show_default=True,
        metavar="uniform|zipf:S",
        help="How order_ids are spread over -orders K: evenly, or Zipf with exponent S (hot keys).",
    ),
    flag(
        "payload-bytes",
        default="0",
        metavar="N|MIN-MAX",
        help="Random (incompressible) payload per message, in a payload column of the schema.",
    ),
    flag(
        "rate-profile",
        default=None,
        metavar="PROFILE",
        help="Arrival rate over time: ramp:A..B/Ts, step:A,B,C/Ts, burst:R*Ds/Ts (over -rate), or a CSV"
        " of second,rate.",
    ),
    flag(
        "speed",
        type=float,
        default=1.0,
        show_default=True,
        metavar="F",
        help="Replay a CSV profile F times faster.",
    ),
    flag(
        "sweep",
        default=None,
        metavar="rate=auto|rate=A..B|rate=A,B,C|rate=A..B*F|workers=A,B,C",
        help="Hold each rate (or worker count) for -step seconds in one run; report each step and the knee."
        " rate=auto and rate=A..B search for the knee: a doubling ladder, bisection to -resolution,"
        " then a hold.",
    ),
    flag("step", "step_s", type=float, default=None, metavar="S", help="A sweep step's length (default 10)."),
    flag(
        "settle",
        "settle_s",
        type=float,
        default=None,
        metavar="S",
        help="After a rate step, wait at most S seconds for its backlog to drain (default: -step).",
    ),
    flag("slo", default=None, metavar="e2e-p99=MS", help="The end-to-end p99 each sweep step must keep."),
    flag(
        "resolution",
        "resolution_pct",
        type=float,
        default=None,
        metavar="PCT",
        help="An adaptive sweep bisects until the failing rate is within PCT% of the passing one"
        " (default 5).",
    ),
    flag(
        "repeat",
        type=int,
        default=None,
        metavar="N",
        help="An adaptive sweep runs each bisection step N times; a rate passes when most runs pass.",
    ),
    flag(
        "sweep-budget",
        "sweep_budget_s",
        default=None,
        metavar="DURATION",
        help="Bound an adaptive sweep's whole search: seconds, or 90s, 15m, 1h.",
    ),
    flag(
        "bystander",
        type=float,
        default=None,
        metavar="RATE",
        help="Beside the queue, a small read-and-update workload on a table of its own at RATE/s:"
        " its latency.",
    ),
    flag(
        "check",
        default=None,
        metavar="EXPR[,EXPR...]",
        help="Thresholds on reported figures, e.g. e2e-p99<250,throughput>=900,lost==0; a breach exits 4.",
    ),
    flag(
        "junit",
        "junit_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Write the checks and the audit as JUnit XML, one test case each.",
    ),
    flag(
        "check-abort",
        is_flag=True,
        help="End the run at the first breach of a -check lost (it can only grow).",
    ),
    flag(
        "baseline",
        "baseline_path",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="Diff the run against a run's JSON of the same settings; worse beyond noise exits 4.",
    ),
    flag("drift", is_flag=True, help="Judge the drift of a run shorter than ten minutes (at least 60 s)."),
    flag(
        "metrics-port",
        default=None,
        metavar="[HOST:]PORT",
        help="Serve live metrics for Prometheus on PORT (0: any free port), on every interface or on HOST"
        " only, for as long as the run lasts.",
    ),
    flag("seed", type=int, default=None, metavar="N", help="Random seed (default: drawn and printed)."),
    flag(
        "progress",
        type=click.Choice(["auto", "bars", "plain", "off"]),
        default="auto",
        show_default=True,
        help="Live bars on a terminal, plain lines otherwise.",
    ),
    flag(
        "processes",
        type=int,
        default=None,
        metavar="N",
        help="Run the -workers in N processes on this host (Locust's runners; -1: one per core).",
    ),
    flag("master", is_flag=True, help="Master of a run across hosts: workers join with --worker."),
    flag("expect-workers", type=int, default=1, show_default=True, metavar="K", help="Workers to await."),
    flag(
        "master-bind-host", default="*", show_default=True, metavar="HOST", help="Interface for the workers."
    ),
    flag(
        "master-bind-port", type=int, default=5557, show_default=True, metavar="P", help="Port for workers."
    ),
    flag("worker", is_flag=True, help="Run queue workers for a master; every setting comes from the master."),
    flag("master-host", default=None, metavar="HOST", help="With --worker: the master to join."),
    flag(
        "master-port", type=int, default=5557, show_default=True, metavar="P", help="With --worker: its port."
    ),
    flag("web", is_flag=True, help="With --processes/--master: Locust's web UI showing the run live."),
    flag("web-port", type=int, default=8089, show_default=True, metavar="P", help="Port of the web UI."),
)


def run_flags(command: F) -> F:
    """Every run flag on the command, in the order above."""
    for option in reversed(RUN_FLAGS):
        command = option(command)
    return command
