"""Command line: the Go tool's flags, Go-style (-fill-db 10) or GNU-style (--fill-db 10)."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import click
import psycopg
from rich.console import Console

from pgmq_sim import __version__
from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.diff_command import load_run, print_diff
from pgmq_sim.cli.flags import flag
from pgmq_sim.designs.design import STRATEGIES, find_design, known_designs, load_design
from pgmq_sim.distributed.options import DistributedOptions, checked_fleet, distributed_mode  # no Locust
from pgmq_sim.dsn import check_dsn, first_line
from pgmq_sim.engine.bounded import Signals
from pgmq_sim.engine.run import CarrierFactory, run_once
from pgmq_sim.engine.state import RunInput
from pgmq_sim.engine.threaded import ThreadCarrier
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.kinds import CHECK_EXIT, TxMode, WakeupMode
from pgmq_sim.model.skew import KeySkew
from pgmq_sim.model.sweep import AUTO_WORKERS, SweepSpec, parse_duration, parse_slo
from pgmq_sim.render.files import STDOUT, check_output_path, result_document, write_json
from pgmq_sim.render.junit import write_junit
from pgmq_sim.render.metrics import MetricsObserver
from pgmq_sim.render.plot import check_plot_support, write_plot
from pgmq_sim.render.progress import TerminalObserver
from pgmq_sim.render.terminal import print_comparison, print_summary
from pgmq_sim.result.observer import RunObserver
from pgmq_sim.result.run import RunResult
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import open_server
from pgmq_sim.settings import Payload, Settings, WorkTime, parse_listen_address, runs_by_time
from pgmq_sim.verdicts.checks import judged, parse_checks, refuse_unproduced, refuse_unwatchable
from pgmq_sim.verdicts.diff import DEFAULT_FAIL_ON, FigureChange, diff_json, setting_differences, worse
from pgmq_sim.verdicts.diff import compare as compare_runs

SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
DEFAULT_FILL_DB = 1000
DEFAULT_WORKERS = 5
REPORT_WIDTH = 120  # when stdout is a file or pipe; a terminal uses its own width
DEFAULT_DSN_HELP = "default: $PGMQ_SIM_DSN, else an embedded PostgreSQL started for the run"


def parse_compare(text: str, tx: TxMode | None = None) -> list[tuple[str, WakeupMode, TxMode | None]]:
    """'all' or a comma list of DESIGN[/WAKEUP][/TX] cells (TX: single or split; none: the design's)."""
    wakeups, modes = [w.value for w in WakeupMode], [t.value for t in TxMode]
    if text.strip() == "all":
        return [(s, w, tx) for s in known_designs() if s in STRATEGIES for w in WakeupMode]
    cells = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, *dimensions = _cell(item)
        find_design(name, "-compare")  # an unknown name or folder is refused before anything runs
        wakeup, mode = WakeupMode.POLL, tx
        for value in dimensions:
            if value in wakeups:
                wakeup = WakeupMode(value)
            elif value in modes:
                mode = TxMode(value)
            else:
                raise UsageError(
                    f"unknown wake-up or -tx '{value}' in -compare; use {', '.join(wakeups + modes)}"
                )
        cells.append((name, wakeup, mode))
    if not cells:
        raise UsageError("-compare needs 'all' or DESIGN[/WAKEUP][/TX],... e.g. seed,indexed/notify/split")
    return cells


def _cell(item: str) -> list[str]:
    """A -compare cell: the design (a name, or a folder such as examples/jobs), then its wake-up
    and transaction mode, the trailing parts that name one."""
    parts = item.split("/")
    dimensions: list[str] = []
    while len(parts) > 1 and parts[-1] in {*WakeupMode, *TxMode}:
        dimensions.insert(0, parts.pop())
    return ["/".join(parts), *dimensions]


def run_input(settings: Settings, tx_given: TxMode | None = None) -> RunInput:
    """The design in the form the cell's settings need, and what to say about it."""
    design = load_design(
        settings.claim,
        schema=settings.schema,
        next_msg=settings.next_msg,
        delmsg=settings.delmsg,
        archive=settings.archive,
    )
    notes: tuple[str, ...] = ()
    if not design.seed_table:
        if tx_given is not None and tx_given != design.transaction:
            raise UsageError(
                f"-tx {tx_given}: the design {design.name} runs its transactions as its queue.toml says"
                f" ({design.transaction}); drop -tx, or change the design"
            )
        settings = dataclasses.replace(settings, tx=design.transaction)
        if settings.fail_rate and design.fail is None:
            raise UsageError(
                f"-fail-rate needs the design's fail.sql, and {design.name} has none; add fail.sql,"
                " or drop -fail-rate"
            )
        if settings.wakeup == WakeupMode.NOTIFY and design.notify is None:
            raise UsageError(
                f"-wakeup notify needs the design's notify.sql (a trigger that notifies 'pgmq_sim' with"
                f" TYPE:COUNT), and {design.name} has none; add it, or use -wakeup poll"
            )
        if settings.payload is not None and "$6" not in design.enqueue.text:
            notes += ("-payload-bytes: the design's enqueue.sql does not use $6, the payload",)
    elif settings.priority is not None or settings.delay is not None:
        given = "-priority" if settings.priority is not None else "-delay"
        raise UsageError(
            f"{given}: the seed's table ({design.name}) has no priority and no due time; use a design"
            " that has them (-queue priority, next-attempt or visibility, or a folder of your own)"
        )
    elif settings.retrying:
        if design.ordered and not design.has_split_form:
            notes = (
                f"claim {design.claim} has no form for leases and retries (claim_split.sql); it runs as it"
                " is, and the audit judges whether it keeps order",
            )
        design = design.for_retries()
    if settings.batch > 1 and design.name == "seed" and design.seed_table and "limit 1" in design.claim.text:
        notes += (
            f"-batch {settings.batch}: the seed's claim takes one message (limit 1); its batches are of one",
        )
    return RunInput(settings, design, notes)


@click.command(context_settings={"help_option_names": ["-h", "-help", "--help"]})
@flag("delmsg", is_flag=True, help="Delete a message once handled (default: mark it processed).")
@flag("dsn", metavar="URL", default=None, help=f"PostgreSQL to use ({DEFAULT_DSN_HELP}).")
@flag(
    "fill-db",
    type=int,
    default=None,
    metavar="N",
    help="Messages to write and process (default 1000; with -duration and -rate: no count, time alone).",
)
@flag(
    "logfile",
    default="msg_queue.log",
    show_default=True,
    metavar="FILE",
    help="Log of handled messages and run events; - for stdout.",
)
@flag(
    "rate",
    type=float,
    default=0.0,
    metavar="R",
    help="Insert at R messages/s while workers run instead of prefilling.",
)
@flag(
    "schema",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Schema file (default: ./schema.sql, else the packaged seed schema).",
)
@flag(
    "workers",
    type=int,
    default=None,
    metavar="N",
    help="Worker threads, dealt over the types (at least one per type; default 5).",
)
@flag(
    "next-msg",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Claim query (default: ./next_msg.sql, else the seed's; $1 is the type).",
)
@flag(
    "work-ms",
    default="1-10",
    show_default=True,
    metavar="MIN-MAX",
    help="Simulated work per message in ms, uniform.",
)
@flag(
    "orders",
    type=int,
    default=2,
    show_default=True,
    metavar="K",
    help="Distinct order_ids (groups per type).",
)
@flag(
    "poll-interval",
    type=float,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Idle wait after an empty claim (poll), or fallback wait (notify).",
)
@flag(
    "claim",
    default=None,
    metavar="NAME",
    help="Claim strategy (a built-in queue design on the seed's table): seed, indexed, affinity, advisory,"
    " fifo, or ./strategies/NAME/claim.sql (default seed).",
)
@flag(
    "queue",
    default=None,
    metavar="DIR|NAME",
    help="The queue design: a folder of SQL (schema, enqueue, claim, complete; see docs/your-own-queue.md)"
    " or a built-in name (the -claim strategies, and the seeds' other designs).",
)
@flag(
    "priority",
    default=None,
    metavar="MIN-MAX",
    help="A uniform integer priority per message (enqueue.sql's $4); a larger number is served first.",
)
@flag(
    "delay",
    default=None,
    metavar="SHARE:MIN-MAX",
    help="That share of messages is due MIN to MAX seconds after it is enqueued (enqueue.sql's $5),"
    " e.g. 0.3:1-5.",
)
@flag(
    "archive",
    is_flag=True,
    help="Complete by the design's complete_archive.sql: move a finished message to its archive table.",
)
@flag(
    "batch",
    type=int,
    default=1,
    show_default=True,
    metavar="N",
    help="Messages one claim may take; the worker works them in order and completes them in one commit.",
)
@flag(
    "wakeup",
    default="poll",
    show_default=True,
    metavar="poll|notify",
    help="How idle workers learn of new messages.",
)
@flag(
    "compare",
    default=None,
    metavar="CELLS",
    help="Run each STRATEGY[/WAKEUP] (comma list, or 'all') on the same workload; one table.",
)
@flag("no-audit", is_flag=True, help="Skip the journal and audit (raw speed runs).")
@flag(
    "stall-timeout",
    type=float,
    default=30.0,
    show_default=True,
    metavar="S",
    help="Stop with a diagnosis if nothing commits for S seconds while messages remain.",
)
@flag(
    "json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the whole result as JSON; - for stdout (the summary then goes to stderr).",
)
@flag(
    "plot",
    "plot_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE.png",
    help="Draw throughput, backlog and latency over time (needs pgmq-sim[plot]).",
)
@flag(
    "reconnect-timeout",
    type=float,
    default=60.0,
    show_default=True,
    metavar="S",
    help="How long workers, producer and the tool keep reconnecting to a lost server.",
)
@flag(
    "replace-tables",
    is_flag=True,
    help="Replace msg_queue/msg_journal/pgmq_sim_run even if pgmq-sim did not create them.",
)
@flag(
    "tx",
    default=None,
    metavar="single|split",
    help="single: claim, work and complete in one transaction; split: claim with a lease and commit,"
    " work outside any transaction, complete in a second one (default single; a design's queue.toml).",
)
@flag("lease", type=float, default=30.0, show_default=True, metavar="S", help="Split mode: a claim's lease.")
@flag("fail-rate", type=float, default=0.0, metavar="P", help="Fraction of work attempts that fail.")
@flag(
    "max-attempts",
    type=int,
    default=5,
    show_default=True,
    metavar="N",
    help="Attempts before a failing message becomes a dead letter.",
)
@flag(
    "backoff-ms",
    type=float,
    default=100.0,
    show_default=True,
    metavar="BASE",
    help="A failed attempt's next try waits BASE x 2^(attempt-1) ms.",
)
@flag(
    "chaos",
    default=None,
    metavar="SPEC",
    help="Faults to inject, e.g. kill-connection/5s,kill-worker@3s,restart-server@10s,hold-xmin@5s+20s,"
    "lock-table@10s+3s.",
)
@flag(
    "chaos-allow-restart",
    is_flag=True,
    help="Let -chaos restart-server crash-restart a -dsn server (superuser needed).",
)
@flag(
    "duration",
    type=float,
    default=None,
    metavar="S",
    help="End the run after S seconds: the producer stops, work in flight finishes (with or without"
    " -fill-db).",
)
@flag(
    "pooler",
    default="auto",
    show_default=True,
    metavar="auto|none|session|transaction",
    help="The pooler between the tool and the server; auto detects it.",
)
@flag(
    "listen-dsn",
    metavar="URL",
    default=None,
    help="With -wakeup notify behind a transaction pooler: a direct connection for LISTEN.",
)
@flag(
    "wait-sample-hz",
    type=float,
    default=20.0,
    show_default=True,
    metavar="N",
    help="pg_stat_activity samples per second for the wait profile and the limit verdict; 0: none.",
)
@flag(
    "pooler-admin",
    metavar="URL",
    default=None,
    help="PgBouncer's admin console (database pgbouncer): the pool's waits each second in the report,"
    " and -chaos pause-pooler, kill-pooler, reconnect-pooler.",
)
@flag("types", type=int, default=3, show_default=True, metavar="N", help="Message types type1..typeN.")
@flag(
    "key-skew",
    default="uniform",
    show_default=True,
    metavar="uniform|zipf:S",
    help="How order_ids are spread over -orders K: evenly, or Zipf with exponent S (hot keys).",
)
@flag(
    "payload-bytes",
    default="0",
    metavar="N|MIN-MAX",
    help="Random (incompressible) payload per message, in a payload column of the schema.",
)
@flag(
    "rate-profile",
    default=None,
    metavar="PROFILE",
    help="Arrival rate over time: ramp:A..B/Ts, step:A,B,C/Ts, burst:R*Ds/Ts (over -rate), or a CSV"
    " of second,rate.",
)
@flag(
    "speed",
    type=float,
    default=1.0,
    show_default=True,
    metavar="F",
    help="Replay a CSV profile F times faster.",
)
@flag(
    "sweep",
    default=None,
    metavar="rate=auto|rate=A..B|rate=A,B,C|rate=A..B*F|workers=A,B,C",
    help="Hold each rate (or worker count) for -step seconds in one run; report each step and the knee."
    " rate=auto and rate=A..B search for the knee: a doubling ladder, bisection to -resolution, then a hold.",
)
@flag("step", "step_s", type=float, default=None, metavar="S", help="A sweep step's length (default 10).")
@flag(
    "settle",
    "settle_s",
    type=float,
    default=None,
    metavar="S",
    help="After a rate step, wait at most S seconds for its backlog to drain (default: -step).",
)
@flag("slo", default=None, metavar="e2e-p99=MS", help="The end-to-end p99 each sweep step must keep.")
@flag(
    "resolution",
    "resolution_pct",
    type=float,
    default=None,
    metavar="PCT",
    help="An adaptive sweep bisects until the failing rate is within PCT% of the passing one (default 5).",
)
@flag(
    "repeat",
    type=int,
    default=None,
    metavar="N",
    help="An adaptive sweep runs each bisection step N times; a rate passes when most runs pass.",
)
@flag(
    "sweep-budget",
    "sweep_budget_s",
    default=None,
    metavar="DURATION",
    help="Bound an adaptive sweep's whole search: seconds, or 90s, 15m, 1h.",
)
@flag(
    "bystander",
    type=float,
    default=None,
    metavar="RATE",
    help="Beside the queue, a small read-and-update workload on a table of its own at RATE/s: its latency.",
)
@flag(
    "check",
    default=None,
    metavar="EXPR[,EXPR...]",
    help="Thresholds on reported figures, e.g. e2e-p99<250,throughput>=900,lost==0; a breach exits 4.",
)
@flag(
    "junit",
    "junit_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the checks and the audit as JUnit XML, one test case each.",
)
@flag(
    "check-abort", is_flag=True, help="End the run at the first breach of a -check lost (it can only grow)."
)
@flag(
    "baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Diff the run against a run's JSON of the same settings; worse beyond noise exits 4.",
)
@flag("drift", is_flag=True, help="Judge the drift of a run shorter than ten minutes (at least 60 s).")
@flag(
    "metrics-port",
    default=None,
    metavar="[HOST:]PORT",
    help="Serve live metrics for Prometheus on PORT (0: any free port), on every interface or on HOST"
    " only, for as long as the run lasts.",
)
@flag("seed", type=int, default=None, metavar="N", help="Random seed (default: drawn and printed).")
@flag(
    "progress",
    type=click.Choice(["auto", "bars", "plain", "off"]),
    default="auto",
    show_default=True,
    help="Live bars on a terminal, plain lines otherwise.",
)
@flag(
    "processes",
    type=int,
    default=None,
    metavar="N",
    help="Run the -workers in N processes on this host (Locust's runners; -1: one per core).",
)
@flag("master", is_flag=True, help="Master of a run across hosts: workers join with --worker.")
@flag("expect-workers", type=int, default=1, show_default=True, metavar="K", help="Workers to await.")
@flag("master-bind-host", default="*", show_default=True, metavar="HOST", help="Interface for the workers.")
@flag("master-bind-port", type=int, default=5557, show_default=True, metavar="P", help="Port for workers.")
@flag("worker", is_flag=True, help="Run queue workers for a master; every setting comes from the master.")
@flag("master-host", default=None, metavar="HOST", help="With --worker: the master to join.")
@flag("master-port", type=int, default=5557, show_default=True, metavar="P", help="With --worker: its port.")
@flag("web", is_flag=True, help="With --processes/--master: Locust's web UI showing the run live.")
@flag("web-port", type=int, default=8089, show_default=True, metavar="P", help="Port of the web UI.")
@click.version_option(__version__, "-version", "--version", prog_name="pgmq-sim")
def command(**options: object) -> None:
    """Simulate load on a PostgreSQL table used as a message queue with ordered
    processing per (queue_type, order_id), then report throughput, latency and an
    exactly-once/order audit. A port of pggo_msg_queue.

    Example: pgmq-sim -fill-db 100000 -workers 12 -rate 100 -delmsg
    """
    sys.exit(execute(options))


def _settings(options: dict[str, Any]) -> Settings:
    """The flags become the settings field by field; three are read into other forms."""
    parsed = {
        "work",
        "audit",
        "seed",
        "key_skew",
        "payload",
        "priority",
        "delay",
        "sweep",
        "slo_p99_ms",
        "sweep_budget_s",
        "checks",
        "metrics_port",
        "metrics_host",
    }
    fields = {f.name for f in dataclasses.fields(Settings)} - parsed
    given = {k: v for k, v in options.items() if k in fields}  # runner flags are not run settings
    if options["queue"] is not None and options["claim"] is not None and options["queue"] != options["claim"]:
        raise UsageError(
            f"-queue {options['queue']} and -claim {options['claim']} both name the queue design; give one"
        )
    given["claim"] = options["queue"] or options["claim"] or "seed"
    given["tx"] = options["tx"] or TxMode.SINGLE
    sweep = SweepSpec.parse(options["sweep"]) if options["sweep"] else None
    timed = runs_by_time(sweep, options["rate_profile"], options["duration"], options["rate"])
    if given["fill_db"] is None and not timed:
        given["fill_db"] = DEFAULT_FILL_DB
    if sweep is not None and sweep.kind == "workers" and options["workers"] is None:
        # the largest step; the others wait at the gate
        given["workers"] = AUTO_WORKERS if sweep.adaptive else int(max(sweep.values))
    if given["workers"] is None:
        given["workers"] = DEFAULT_WORKERS
    metrics_host, metrics_port = (
        parse_listen_address(options["metrics_port"], "-metrics-port")
        if options["metrics_port"] is not None
        else (None, None)
    )
    settings = Settings(
        **given,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        work=WorkTime.parse(options["work_ms"]),
        key_skew=KeySkew.parse(options["key_skew"]),
        payload=Payload.parse(options["payload_bytes"]),
        priority=PriorityRange.parse(options["priority"]) if options["priority"] is not None else None,
        delay=Delay.parse(options["delay"]) if options["delay"] is not None else None,
        sweep=sweep,
        slo_p99_ms=parse_slo(options["slo"]) if options["slo"] else None,
        sweep_budget_s=parse_duration(options["sweep_budget_s"], "-sweep-budget")
        if options["sweep_budget_s"] is not None
        else None,
        checks=parse_checks(options["check"]) if options["check"] is not None else (),
        audit=not options["no_audit"],
        # one seed per invocation: every cell of a comparison runs the same workload
        seed=options["seed"] if options["seed"] is not None else random.SystemRandom().randrange(2**31),
    )
    refuse_unproduced(settings.checks, settings)
    refuse_unwatchable(settings.checks, settings)
    return settings


@contextmanager
def signals_caught() -> Iterator[tuple[Signals, list[int]]]:
    """SIGINT/SIGTERM: the first stops the run cleanly, a second stops waiting for the server;
    the first one's exit code is kept. The previous handlers come back afterwards."""
    signals = Signals()
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if signals.interrupt.is_set():
            signals.hurry.set()
        signals.interrupt.set()

    previous = {signum: signal.signal(signum, on_signal) for signum in SIGNAL_EXIT}
    try:
        yield signals, received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@dataclass(frozen=True)
class RunPlan:
    """A command line checked: every refusal that needs no server and no port has happened."""

    settings: Settings
    inputs: tuple[RunInput, ...]  # one per -compare cell
    baseline: dict[str, Any] | None
    fleet: DistributedOptions | None  # --processes or --master: the worker processes
    log: RunLog  # its path checked; opened only when the run starts


def plan_run(options: dict[str, Any], ctx: click.Context) -> RunPlan | None:
    """The run the flags ask for, or None for --worker (which takes its settings from a master)."""
    mode = distributed_mode(options, ctx)
    if mode == "worker":
        return None
    settings = _settings(options)
    fleet = checked_fleet(options, settings) if mode == "master" else None
    if settings.json_path == STDOUT and settings.logfile == "-":
        raise UsageError("-json - and -logfile - would both write to stdout; send one of them to a file")
    for dsn, flag_name in (
        (settings.dsn, "-dsn"),
        (settings.listen_dsn, "-listen-dsn"),
        (settings.pooler_admin, "-pooler-admin"),
    ):
        if dsn is not None:
            check_dsn(dsn, flag_name)  # before any server is touched
    if settings.json_path:
        check_output_path(settings.json_path, "-json")
    if settings.plot_path:
        check_output_path(settings.plot_path, "-plot")
        check_plot_support(settings.plot_path)
    if settings.junit_path:
        check_output_path(settings.junit_path, "-junit")
    tx_given = TxMode(settings.tx) if options["tx"] is not None else None
    cells = (
        parse_compare(options["compare"], tx_given)
        if options["compare"]
        else [(settings.claim, settings.wakeup, tx_given)]
    )
    baseline = load_baseline(settings, bool(options["compare"]))
    if options["compare"] and settings.next_msg is not None:
        raise UsageError(
            "-compare runs each strategy's own claim, and -next-msg would replace them all;"
            " drop -next-msg, or run it alone with -claim NAME -next-msg FILE"
        )
    inputs = tuple(
        run_input(dataclasses.replace(settings, claim=name, wakeup=wakeup, tx=tx or TxMode.SINGLE), tx)
        for name, wakeup, tx in cells
    )
    for given in inputs:
        given.settings.check_sweep_wakeup()  # a cell's wake-up is its own
    if settings.chaos:
        parse_chaos(settings.chaos)  # a bad spec is a usage error before anything happens
    log = RunLog(settings.logfile)  # checks the path; opens it only when the run starts
    return RunPlan(settings, inputs, baseline, fleet, log)


def execute(options: dict[str, Any]) -> int:
    plan = plan_run(options, click.get_current_context())
    if plan is None:
        from pgmq_sim.distributed.worker import run_worker

        return run_worker(options)
    settings, inputs, log = plan.settings, plan.inputs, plan.log
    carrier: CarrierFactory = ThreadCarrier
    if plan.fleet is not None:
        from pgmq_sim.distributed.master import LocustCarrier

        carrier = partial(LocustCarrier, plan.fleet)
    summary_to_stderr = settings.json_path == STDOUT  # stdout then carries only the JSON
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    console = Console(highlight=False, width=None if wide else REPORT_WIDTH, stderr=summary_to_stderr)
    observer: RunObserver = TerminalObserver(Console(stderr=True, highlight=False), settings.progress)
    metrics = None
    if settings.metrics_port is not None:  # the last check: it opens the port
        metrics = observer = MetricsObserver(settings.metrics_host, settings.metrics_port, observer)
        click.echo(f"pgmq-sim: live metrics at {metrics.url}", err=True)
    results: list[RunResult] = []
    failed: list[dict[str, str]] = []  # comparison cells that ended in an error before running
    with signals_caught() as (signals, received):
        try:
            with open_server(settings.dsn) as server:
                console.print(f"pgmq-sim {__version__}: using {server.label}; seed {settings.seed}")
                log.event(f"run start: server {server.label}; seed {settings.seed}")
                for given in inputs:
                    if signals.interrupt.is_set():
                        break
                    if len(inputs) > 1:
                        observer.say(f"cell {cell_label(given)}")
                    try:
                        results.append(judged(run_once(given, server, observer, log, signals, carrier)))
                    except SimError as exc:
                        if len(inputs) == 1:
                            raise
                        # one broken comparison cell should not cost the others their results
                        cell = {
                            "strategy": given.design.label,
                            "wakeup": given.settings.wakeup,
                            "tx": given.settings.tx,
                        }
                        failed.append(cell | {"error": str(exc)})
                        click.echo(f"pgmq-sim: error: {cell_label(given)}: {exc}", err=True)
                        continue
                    result = results[-1]
                    if len(inputs) == 1:
                        print_summary(console, result)
                    if result.error:  # the summary says it too; stderr gets the one line
                        where = f"{cell_label(given)}: " if len(inputs) > 1 else ""
                        click.echo(f"pgmq-sim: error: {where}{result.error}", err=True)
            code = _report(settings, results, failed, console, len(inputs) > 1, plan.baseline)
            if received:
                code = SIGNAL_EXIT[signal.Signals(received[0])]
            outcome = ", ".join(r.outcome for r in results) or "no run"
            log.event(f"run end: {outcome}; exit {code}")
            return code
        finally:
            log.close()
            if metrics is not None:
                metrics.close()


def load_baseline(settings: Settings, compare: bool) -> dict[str, Any] | None:
    """-baseline FILE: read and matched to this run's settings before anything runs."""
    if settings.baseline_path is None:
        return None
    if compare:
        raise UsageError("-baseline diffs one run; drop -compare, or diff a cell's JSON with pgmq-sim diff")
    base = load_run(settings.baseline_path)
    differences = setting_differences(base, {"settings": settings.as_json(), "server": base.get("server")})
    if differences:
        raise UsageError(
            f"-baseline {settings.baseline_path} ran other settings ({'; '.join(differences)});"
            " run with its settings, or compare the two JSON files with pgmq-sim diff --allow-different"
        )
    return base


def cell_label(given: RunInput) -> str:
    label = f"{given.design.label}/{given.settings.wakeup}"
    return label + ("/split" if given.settings.tx == TxMode.SPLIT else "")


def _report(
    settings: Settings,
    results: list[RunResult],
    failed: list[dict[str, str]],
    console: Console,
    compare: bool,
    baseline: dict[str, Any] | None,
) -> int:
    """Every output that can be written is; a failure of one (a full disk) is named, not fatal."""
    errors: list[str] = []
    if compare:
        print_comparison(console, results)
    worse_than_base: list[FigureChange] = []
    needed = settings.json_path is not None or baseline is not None  # a document costs the advice
    documents = [result_document(r) for r in results] if needed else []
    if baseline is not None and documents:
        changes = compare_runs(baseline, documents[0])
        differences = setting_differences(baseline, documents[0])  # the server, if any
        print_diff(console, changes, differences, f"against -baseline {settings.baseline_path}")
        worse_than_base = worse(changes, DEFAULT_FAIL_ON)
        if worse_than_base:
            names = ", ".join(c.name for c in worse_than_base)
            console.print(f"[red]worse than the baseline beyond noise:[/] {names} (exit 4)")
        documents[0]["baseline"] = {
            "path": str(settings.baseline_path),
            **diff_json(differences, changes, worse_than_base),
        }
    if settings.json_path and (results or failed):
        document = {"runs": documents, "failed": failed} if compare else documents[0]
        try:
            write_json(settings.json_path, document)
        except SimError as exc:
            errors.append(str(exc))
    if settings.plot_path and results:
        try:
            write_plot(settings.plot_path, results)
        except SimError as exc:
            errors.append(str(exc))
    if settings.junit_path and results:
        try:
            write_junit(settings.junit_path, results)
        except SimError as exc:
            errors.append(str(exc))
    for error in errors:
        click.echo(f"pgmq-sim: error: {error}", err=True)
    code = max([r.exit_code for r in results] + [1 if failed or errors else 0])
    return CHECK_EXIT if code == 0 and worse_than_base else code


def main() -> None:
    args = sys.argv[1:]
    try:
        if args[:1] == ["audit"]:
            from pgmq_sim.cli.audit_command import audit_command

            audit_command.main(args[1:], prog_name="pgmq-sim audit", standalone_mode=False)
            return
        if args[:1] == ["diff"]:
            from pgmq_sim.cli.diff_command import diff_command

            diff_command.main(args[1:], prog_name="pgmq-sim diff", standalone_mode=False)
            return
        check_flags(args)
        command.main(args, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        message = exc.format_message().replace("\n", " ")
        click.echo(f"pgmq-sim: error: {message} (see pgmq-sim --help)", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(130)
    except SimError as exc:
        click.echo(f"pgmq-sim: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except psycopg.Error as exc:  # the server went away or refused something before the run
        click.echo(f"pgmq-sim: error: database error: {first_line(exc)}; check the server", err=True)
        sys.exit(1)


def check_flags(args: list[str]) -> None:
    """Name an unknown flag as written (click would name its first letter) and refuse a flag
    given twice (click would silently keep the last)."""
    names = {}
    for param in command.params:
        for opt in param.opts:
            names[opt] = param.name
    names.update({"-h": "help", "-help": "help", "--help": "help", "-version": "v", "--version": "v"})
    seen: dict[str, str] = {}
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-" or _is_number(arg):
            continue
        flag_name = arg.split("=", 1)[0]
        if flag_name not in names:
            raise UsageError(f"unknown flag {flag_name}; see pgmq-sim --help for the flags")
        dest = names[flag_name]
        if dest in seen:
            raise UsageError(f"{flag_name} is given twice ({seen[dest]} and {arg}); give it once")
        seen[dest] = arg


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
