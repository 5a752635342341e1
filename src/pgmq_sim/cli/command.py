"""Command line: the Go tool's flags, Go-style (-fill-db 10) or GNU-style (--fill-db 10); a run's
dispatch (one run, -compare's cells, a Locust master or worker), its signals and its exit status."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from types import FrameType
from typing import Any

import click
import psycopg
from rich.console import Console
from rich.markup import escape

from pgmq_sim import __version__
from pgmq_sim.cli.diff_command import diff_line, print_diff
from pgmq_sim.cli.flags import check_flags as refuse_flags
from pgmq_sim.cli.flags import command_of
from pgmq_sim.cli.options import RUN
from pgmq_sim.cli.outputs import Finished, given_outputs, needs_documents, write_outputs
from pgmq_sim.cli.plan import RunPlan, plan_run
from pgmq_sim.cli.scenario import Scenario, scenario_of, scenario_record, scenario_toml
from pgmq_sim.dsn import first_line
from pgmq_sim.engine.bounded import Signals
from pgmq_sim.engine.looped import LoopCarrier
from pgmq_sim.engine.runner import CarrierFactory, run_once
from pgmq_sim.engine.state import RunInput
from pgmq_sim.errors import FaultRefused, SimError
from pgmq_sim.model.kinds import CHECK_EXIT, TxMode
from pgmq_sim.model.pressure import cell_label
from pgmq_sim.render.files import STDOUT, result_document
from pgmq_sim.render.lines import outputs_text
from pgmq_sim.render.pressure import print_scorecards
from pgmq_sim.render.progress import TerminalObserver
from pgmq_sim.render.side_by_side import print_comparison
from pgmq_sim.render.terminal import print_summary
from pgmq_sim.result.observer import RunObserver
from pgmq_sim.result.run import RunResult
from pgmq_sim.runlog import RunLog
from pgmq_sim.server import open_server
from pgmq_sim.settings import Settings
from pgmq_sim.verdicts.diff import DEFAULT_FAIL_ON, FigureChange, diff_json, setting_differences, worse
from pgmq_sim.verdicts.diff import compare as compare_runs
from pgmq_sim.verdicts.pressure import scorecard, suite_json
from pgmq_sim.verdicts.verdict import RunVerdict, judge_run

SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
REPORT_WIDTH = 120  # when stdout is a file or pipe; a terminal uses its own width


HELP = """Simulate load on a PostgreSQL table used as a message queue with ordered
processing per (queue_type, order_id), then report throughput, latency and an
exactly-once/order audit. A port of pggo_msg_queue.

Example: pgmq-sim -fill-db 100000 -workers 12 -rate 100 -delmsg

A scenario file holds the same options, a key each (fill-db = 100000):
pgmq-sim -config scenario.toml; pgmq-sim ... -print-config writes one.
"""


@command_of(RUN, HELP)
def command(**_options: object) -> None:
    sys.exit(execute(scenario_of(RUN, click.get_current_context())))


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


def execute(scenario: Scenario) -> int:
    plan = plan_run(scenario)
    if scenario.options["print_config"]:
        click.echo(scenario_toml(scenario), nl=False)
        return 0
    if plan is None:
        from pgmq_sim.distributed.worker_process import run_worker

        return run_worker(scenario.options, scenario.given("logfile"))
    settings, inputs, log = plan.settings, plan.inputs, plan.log
    carrier: CarrierFactory = LoopCarrier
    if plan.fleet is not None:
        from pgmq_sim.distributed.master import LocustCarrier

        carrier = partial(LocustCarrier, plan.fleet)
    summary_to_stderr = settings.json_path == STDOUT  # stdout then carries only the JSON
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    console = Console(highlight=False, width=None if wide else REPORT_WIDTH, stderr=summary_to_stderr)
    observer: RunObserver = TerminalObserver(Console(stderr=True, highlight=False), settings.progress)
    metrics = None
    if settings.metrics_port is not None:  # the last check: it opens the port
        from pgmq_sim.render.metrics import MetricsObserver  # prometheus_client: a tenth of the start

        metrics = observer = MetricsObserver(settings.metrics_host, settings.metrics_port, observer)
        click.echo(f"pgmq-sim: live metrics at {metrics.url}", err=True)
    cells = (ManyCells if len(inputs) > 1 else OneRun)(settings, observer, log, console)
    with signals_caught() as (signals, received):
        try:
            with open_server(settings.dsn) as server:
                console.print(f"pgmq-sim {__version__}: using {server.label}; seed {settings.seed}")
                log.event(f"run start: server {server.label}; seed {settings.seed}")
                for given in inputs:
                    if signals.interrupt.is_set():
                        break
                    cells.begin(given)
                    try:
                        result = run_once(given, server, observer, log, signals, carrier)
                    except SimError as exc:
                        cells.refused(given, exc)
                        continue
                    cells.ran(given, result)
            record = scenario_record(scenario, effective(plan), settings.json_path)
            code = _report(settings, cells, console, plan.baseline, record)
            if received:
                code = SIGNAL_EXIT[signal.Signals(received[0])]
            outcome = ", ".join(r.outcome for r in cells.results) or "no run"
            log.event(f"run end: {outcome}; exit {code}")
            return code
        except SimError as exc:  # refused before it changed anything: the log, once opened, says so
            log.event(f"run end: refused: {exc}; exit {exc.exit_code}")
            raise
        finally:
            log.close()
            if metrics is not None:
                metrics.close()


class OneRun:
    """A command of one cell: its error ends the command, and its summary is printed as it ends."""

    many = False

    def __init__(self, settings: Settings, observer: RunObserver, log: RunLog, console: Console) -> None:
        self.settings, self.observer, self.log, self.console = settings, observer, log, console
        self.results: list[RunResult] = []
        self.verdicts: list[RunVerdict] = []  # each result's, judged once
        self.failed: list[dict[str, str]] = []  # cells that ended in an error before running
        self.skipped: list[dict[str, str]] = []  # -suite pressure's cells the path cannot take

    def begin(self, given: RunInput) -> None:
        """A cell about to run."""

    def refused(self, given: RunInput, exc: SimError) -> None:
        raise exc

    def ran(self, given: RunInput, result: RunResult) -> None:
        self.results.append(result)
        self.verdicts.append(judge_run(result))
        self.shown(result)
        if result.error:  # the summary says it too; stderr gets the one line
            click.echo(f"pgmq-sim: error: {self.where(given)}{result.error}", err=True)

    def shown(self, result: RunResult) -> None:
        outputs = given_outputs(RUN, self.settings)
        print_summary(self.console, result, self.verdicts[-1], self.settings.verbose, outputs)

    def where(self, given: RunInput) -> str:
        return ""

    def print_table(self) -> dict[str, Any] | None:
        """The table of the cells, after them (a suite's JSON)."""
        return None


class ManyCells(OneRun):
    """-compare's designs or -suite pressure's cells: a cell's error is a row, not the end (one broken
    cell should not cost the others their results), and one table shows them all at the end."""

    many = True

    def begin(self, given: RunInput) -> None:
        self.observer.say(f"cell {input_label(given)}")

    def refused(self, given: RunInput, exc: SimError) -> None:
        suite = self.settings.suite is not None
        cell = {"strategy": given.design.label, "wakeup": given.settings.wakeup, "tx": given.settings.tx}
        cell |= {"pressure": pressure_of(given)} if suite else {}
        if suite and isinstance(exc, FaultRefused):  # a row, not a failure
            self.skipped.append(cell | {"skipped": str(exc)})
            self.observer.say(f"note: {input_label(given)}: skipped: {exc}")
            self.log.event(f"note: {input_label(given)}: skipped: {exc}")
            return
        self.failed.append(cell | {"error": str(exc)})
        click.echo(f"pgmq-sim: error: {input_label(given)}: {exc}", err=True)

    def shown(self, result: RunResult) -> None:
        """Shown in the table at the end."""

    def where(self, given: RunInput) -> str:
        return f"{input_label(given)}: "

    def print_table(self) -> dict[str, Any] | None:
        settings, console = self.settings, self.console
        suite = None
        if settings.suite:
            cells = scorecard(self.results, self.failed, self.skipped)
            print_scorecards(console, cells, settings.suite_seconds)
            suite = suite_json(cells, settings.suite_seconds)
        else:
            print_comparison(console, self.results, self.verdicts)
        console.print(escape(f"output: {outputs_text(settings, given_outputs(RUN, settings))}"))
        return suite


def effective(plan: RunPlan) -> dict[str, Any]:
    """The values a run chose where none was given, for the JSON's scenario: a rerun runs the same."""
    settings, options = plan.settings, plan.scenario.options
    chosen: dict[str, Any] = {"fill-db": settings.fill_db, "workers": settings.workers, "seed": settings.seed}
    if options["queue"] is None and options["claim"] is None:
        chosen["queue"] = settings.claim
    return chosen


def input_label(given: RunInput) -> str:
    s = given.settings
    pressures = [pressure_of(given)] if s.suite else []
    return cell_label(given.design.label, str(s.wakeup), s.tx == TxMode.SPLIT, pressures)


def pressure_of(given: RunInput) -> str:
    """A -suite pressure cell's pressure."""
    return next((str(p.pressure) for p in given.settings.phases if p.pressure is not None), "none")


def _report(
    settings: Settings,
    cells: OneRun,
    console: Console,
    baseline: dict[str, Any] | None,
    record: dict[str, Any],
) -> int:
    """Every output that can be written is; a failure of one (a full disk) is named, not fatal. The
    cells not run: those that failed (exit 1), and a suite's skipped (a row, not a failure)."""
    results, verdicts, failed = cells.results, cells.verdicts, cells.failed
    suite = cells.print_table()
    worse_than_base: list[FigureChange] = []
    # a document costs the advice: made only for a file that holds it
    needed = baseline is not None or needs_documents(RUN, settings)
    documents = [result_document(r, v) for r, v in zip(results, verdicts, strict=True)] if needed else []
    if baseline is not None and documents:
        changes = compare_runs(baseline, documents[0])
        differences = setting_differences(baseline, documents[0])  # the server, if any
        title = f"against -baseline {settings.baseline_path}"
        if settings.verbose:
            print_diff(console, changes, differences, title)
        else:
            console.print(escape(f"{title}: {diff_line(changes)}"))
        worse_than_base = worse(changes, DEFAULT_FAIL_ON)
        if worse_than_base:
            names = ", ".join(c.name for c in worse_than_base)
            console.print(f"[red]worse than the baseline beyond noise:[/] {names} (exit 4)")
        documents[0]["baseline"] = {
            "path": str(settings.baseline_path),
            **diff_json(differences, changes, worse_than_base),
        }
    errors = write_outputs(
        RUN, settings, Finished(results, verdicts, documents, failed, cells.many, record, suite)
    )
    for error in errors:
        click.echo(f"pgmq-sim: error: {error}", err=True)
    code = max([v.exit_code for v in verdicts] + [1 if failed or errors else 0])
    return CHECK_EXIT if code == 0 and worse_than_base else code


def main() -> None:
    args = sys.argv[1:]
    try:
        if args[:1] == ["audit"]:
            from pgmq_sim.cli.audit_command import audit_command

            refuse_flags(audit_command, args[1:])
            audit_command.main(args[1:], prog_name="pgmq-sim audit", standalone_mode=False)
            return
        if args[:1] == ["diff"]:
            from pgmq_sim.cli.diff_command import diff_command

            refuse_flags(diff_command, args[1:])
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
    """An unknown flag named as written, a flag given twice refused."""
    refuse_flags(command, args)
