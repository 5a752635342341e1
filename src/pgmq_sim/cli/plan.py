"""A run's options checked before anything runs: read into settings, each -compare cell's design
loaded, every refusal that needs no server and no port made here, with one line each."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pgmq_sim.cli.cells import parse_compare
from pgmq_sim.cli.diff_command import load_run
from pgmq_sim.cli.option import CommandOptions
from pgmq_sim.cli.options import RUN
from pgmq_sim.cli.outputs import check_outputs
from pgmq_sim.cli.scenario import Scenario
from pgmq_sim.designs.design import load_design
from pgmq_sim.distributed.runner_flags import DistributedOptions, checked_fleet, distributed_mode  # no Locust
from pgmq_sim.engine.state import RunInput
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.pressure import SUITE_PRESSURES, suite_phases
from pgmq_sim.runlog import RunLog
from pgmq_sim.settings import Settings
from pgmq_sim.verdicts.checks import refuse_unproduced, refuse_unwatchable
from pgmq_sim.verdicts.diff import setting_differences

__all__ = ["RunPlan", "load_baseline", "parse_compare", "plan_run", "run_input"]  # parse_compare: cli/cells


def is_set(value: Any) -> bool:
    """An option's value that says something: neither absent nor a flag left off."""
    return value is not None and value is not False


def check_rules(spec: CommandOptions, options: dict[str, Any]) -> None:
    """The rules the options declare between them: one that goes with another, two that conflict."""
    for option in spec:
        mine = options.get(option.param)
        if not is_set(mine):
            continue
        if option.needs is not None:
            name, fix = option.needs
            needed = spec.by_name(name)
            if needed is not None and not is_set(options.get(needed.param)):
                raise UsageError(f"{option.flag} goes with {needed.flag}; drop it, or {fix}")
        for name, why in option.conflicts:
            other = spec.by_name(name)
            theirs = options.get(other.param) if other is not None else None
            if is_set(theirs) and theirs != mine:
                raise UsageError(why.format(mine=mine, theirs=theirs))


def settings_of(
    options: dict[str, Any], spec: CommandOptions = RUN, kind: type[Settings] = Settings
) -> Settings:
    """The settings, every field from its option: the value given, else the option's default, else
    its fallback (from the other options), read by the option's parser: a bad value is named before
    a rule between options that it breaks."""
    fields: dict[str, Any] = {}
    for option in spec:
        if not option.fields:
            continue
        value = options[option.param]
        if value is None and option.fallback is not None:
            read = option.fallback(options)
        else:
            read = option.value(value)
        if len(option.fields) > 1:
            fields.update(
                zip(option.fields, read if read is not None else (None,) * len(option.fields), strict=True)
            )
        else:
            fields[option.fields[0]] = read
    check_rules(spec, options)
    settings = kind(**fields)
    if settings.suite is not None and settings.phases:
        raise UsageError(
            "-suite pressure makes each cell's phases; give -phase SECONDS (each phase's length)"
        )
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
        flag = "-priority" if settings.priority is not None else "-delay"
        raise UsageError(
            f"{flag}: the seed's table ({design.name}) has no priority and no due time; use a design"
            " that has them (-queue priority, next-attempt or visibility, or a folder of your own)"
        )
    elif settings.retrying:
        if design.ordered and not design.has_split_form:
            notes = (
                f"claim {design.claim} has no form for leases and retries (claim_split.sql); it runs as it"
                " is, and the audit judges whether it keeps order",
            )
        design = design.for_retries()
    if settings.batch > 1 and not design.takes_batch:
        notes += (
            f"-batch {settings.batch}: claim {design.claim} takes one message (its text has no $2, the"
            " batch's size); its batches are of one",
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
    settings = settings_of(options)
    fleet = checked_fleet(options, settings) if mode == "master" else None
    check_outputs(RUN, settings)
    tx_given = TxMode(options["tx"]) if options["tx"] is not None else None
    cells = (
        parse_compare(options["compare"], tx_given)
        if options["compare"]
        else [(settings.claim, settings.wakeup, tx_given)]
    )
    baseline = load_baseline(settings)
    inputs = tuple(
        run_input(dataclasses.replace(settings, claim=name, wakeup=wakeup, tx=tx or TxMode.SINGLE), tx)
        for name, wakeup, tx in cells
    )
    if settings.suite is not None:
        inputs = tuple(suite_cell(cell, pressure) for cell in inputs for pressure in SUITE_PRESSURES)
    for cell in inputs:
        cell.settings.check_sweep_wakeup()  # a cell's wake-up is its own
    log = RunLog(settings.logfile)  # checks the path; opens it only when the run starts
    return RunPlan(settings, inputs, baseline, fleet, log, scenario)


def suite_cell(cell: RunInput, pressure: str) -> RunInput:
    """A -suite pressure cell: the design's run in three phases, the pressure in the middle one
    (a lock held for the whole phase stops every claim for as long: the stall bound waits it out)."""
    settings = cell.settings
    seconds = settings.suite_seconds
    stall = max(settings.stall_timeout, seconds + 10) if pressure == "lock-table" else settings.stall_timeout
    phases = suite_phases(pressure, seconds, settings.rate)
    return dataclasses.replace(
        cell, settings=dataclasses.replace(settings, phases=phases, fill_db=None, stall_timeout=stall)
    )


def load_baseline(settings: Settings) -> dict[str, Any] | None:
    """-baseline FILE: read and matched to this run's settings before anything runs."""
    if settings.baseline_path is None:
        return None
    base = load_run(settings.baseline_path)
    differences = setting_differences(base, {"settings": settings.as_json(), "server": base.get("server")})
    if differences:
        raise UsageError(
            f"-baseline {settings.baseline_path} ran other settings ({'; '.join(differences)});"
            " run with its settings, or compare the two JSON files with pgmq-sim diff --allow-different"
        )
    return base
