"""A command line checked before anything runs: the flags read into settings, each -compare cell's
design loaded, every refusal that needs no server and no port made here, with one line each."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

import click

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.diff_command import load_run
from pgmq_sim.designs.design import STRATEGIES, find_design, known_designs, load_design
from pgmq_sim.distributed.options import DistributedOptions, checked_fleet, distributed_mode  # no Locust
from pgmq_sim.dsn import check_dsn
from pgmq_sim.engine.state import RunInput
from pgmq_sim.errors import UsageError
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.skew import KeySkew
from pgmq_sim.model.sweep import AUTO_WORKERS, SweepSpec, parse_duration, parse_slo
from pgmq_sim.render.files import STDOUT, check_output_path
from pgmq_sim.render.plot import check_plot_support
from pgmq_sim.render.report import check_report_path
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import Payload, Settings, WorkTime, parse_listen_address, runs_by_time
from pgmq_sim.verdicts.checks import parse_checks, refuse_unproduced, refuse_unwatchable
from pgmq_sim.verdicts.diff import setting_differences

DEFAULT_FILL_DB = 1000
DEFAULT_WORKERS = 5


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
    if settings.report_path:
        check_report_path(settings.report_path)
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
