"""A run's options checked before anything runs: read into settings, each -compare cell's design
loaded, every refusal that needs no server and no port made here, with one line each."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import MISSING, dataclass
from typing import Any

from pgmq_sim.actors.chaos import parse_chaos
from pgmq_sim.cli.cells import parse_compare
from pgmq_sim.cli.diff_command import load_run
from pgmq_sim.cli.options import RUN
from pgmq_sim.cli.scenario import Scenario
from pgmq_sim.designs.design import load_design
from pgmq_sim.distributed.options import DistributedOptions, checked_fleet, distributed_mode  # no Locust
from pgmq_sim.dsn import check_dsn
from pgmq_sim.engine.state import RunInput
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.pressure import EXAMPLE, SUITE_PRESSURES, is_number, parse_phases, suite_phases
from pgmq_sim.model.sweep import AUTO_WORKERS
from pgmq_sim.render.files import STDOUT, check_output_path
from pgmq_sim.render.plot import check_plot_support
from pgmq_sim.render.report import check_report_path
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import DEFAULT_SUITE_PHASE_S, Settings, parse_listen_address, runs_by_time
from pgmq_sim.verdicts.checks import refuse_unproduced, refuse_unwatchable
from pgmq_sim.verdicts.diff import setting_differences

DEFAULT_FILL_DB = 1000
DEFAULT_WORKERS = 5
__all__ = ["RunPlan", "load_baseline", "parse_compare", "plan_run", "run_input"]  # parse_compare: cli/cells
SETTINGS = {f.name: f for f in dataclasses.fields(Settings)}
REQUIRED = {n for n, f in SETTINGS.items() if f.default is MISSING and f.default_factory is MISSING}


def _settings(options: dict[str, Any]) -> Settings:
    """The options become the settings: each its field, read by its definition's parser; a few
    are combined or have defaults that depend on others."""
    given: dict[str, Any] = {}
    for option in RUN:
        field = option.field
        if field not in SETTINGS or (options[option.param] is None and field not in REQUIRED):
            continue
        value = options[option.param]
        given[field] = option.parse(value) if option.parse is not None and value is not None else value
    if options["queue"] is not None and options["claim"] is not None and options["queue"] != options["claim"]:
        raise UsageError(
            f"-queue {options['queue']} and -claim {options['claim']} both name the queue design; give one"
        )
    given["claim"] = options["queue"] or options["claim"] or "seed"
    given["tx"] = options["tx"] or TxMode.SINGLE
    sweep = given.get("sweep")
    phase = options["phase"]
    if options["suite"] is not None:
        if phase is not None and not is_number(phase):
            raise UsageError(
                "-suite pressure makes each cell's phases; give -phase SECONDS (each phase's length)"
            )
        if not options["rate"]:
            raise UsageError("-suite pressure runs each phase at -rate R; give -rate (e.g. -rate 200)")
        given["suite_phase_s"] = float(phase) if phase is not None else DEFAULT_SUITE_PHASE_S
        if given["suite_phase_s"] <= 0:
            raise UsageError(f"-phase {phase}: give each phase's seconds, above 0")
    elif phase is not None:
        if is_number(phase):
            raise UsageError(
                f"-phase {phase} (seconds) goes with -suite pressure; a run in phases gives each: {EXAMPLE}"
            )
        given["phases"] = parse_phases(phase)
    timed = runs_by_time(sweep, options["rate_profile"], options["duration"], options["rate"])
    timed = timed or phase is not None or options["suite"] is not None
    if given["fill_db"] is None and not timed:
        given["fill_db"] = DEFAULT_FILL_DB
    if sweep is not None and sweep.kind == "workers" and options["workers"] is None:
        # the largest step; the others wait at the gate
        given["workers"] = AUTO_WORKERS if sweep.adaptive else int(max(sweep.values))
    if given["workers"] is None:
        given["workers"] = DEFAULT_WORKERS
    if options["metrics_port"] is not None:
        given["metrics_host"], given["metrics_port"] = parse_listen_address(
            options["metrics_port"], "-metrics-port"
        )
    if options["seed"] is None:  # one seed per invocation: every cell of a comparison runs the same workload
        given["seed"] = random.SystemRandom().randrange(2**31)
    settings = Settings(**given, audit=not options["no_audit"])
    refuse_unproduced(settings.checks, settings)
    refuse_unwatchable(settings.checks, settings)
    return settings


def run_input(settings: Settings, tx_given: TxMode | None = None) -> RunInput:
    """The design in the form the cell's settings need, and what to say about it."""
    design = load_design(
        settings.claim,
        schema=settings.schema,
        next_msg=settings.next_msg,
        delmsg=settings.delmsg,
        archive=settings.archive,
        payload=settings.payload is not None,
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
    scenario: Scenario  # the options, and where each came from


def plan_run(scenario: Scenario) -> RunPlan | None:
    """The run the options ask for, or None for --worker (which takes its settings from a master)."""
    options = scenario.options
    mode = distributed_mode(options, scenario.given)
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
    tx_given = TxMode(options["tx"]) if options["tx"] is not None else None
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
    if settings.suite is not None:
        inputs = tuple(suite_cell(given, pressure) for given in inputs for pressure in SUITE_PRESSURES)
    for given in inputs:
        given.settings.check_sweep_wakeup()  # a cell's wake-up is its own
    if settings.chaos:
        parse_chaos(settings.chaos)  # a bad spec is a usage error before anything happens
    log = RunLog(settings.logfile)  # checks the path; opens it only when the run starts
    return RunPlan(settings, inputs, baseline, fleet, log, scenario)


def suite_cell(given: RunInput, pressure: str) -> RunInput:
    """A -suite pressure cell: the design's run in three phases, the pressure in the middle one
    (a lock held for the whole phase stops every claim for as long: the stall bound waits it out)."""
    settings = given.settings
    seconds = settings.suite_phase_s
    stall = max(settings.stall_timeout, seconds + 10) if pressure == "lock-table" else settings.stall_timeout
    phases = suite_phases(pressure, seconds, settings.rate)
    return dataclasses.replace(
        given, settings=dataclasses.replace(settings, phases=phases, fill_db=None, stall_timeout=stall)
    )


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
