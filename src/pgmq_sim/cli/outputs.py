"""Output files, as their options declare them (`Option.output`): each path checked before the run,
each file written at the end, each named in the summary's output line, by one loop over the
command's outputs. A file that cannot be written is named, and costs no other file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgmq_sim import __version__
from pgmq_sim.cli.option import CommandOptions
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.render.files import STDOUT, check_output_path, write_json
from pgmq_sim.render.junit import write_junit
from pgmq_sim.render.plot import write_plot
from pgmq_sim.render.report import run_report, write_report
from pgmq_sim.result.run import RunResult
from pgmq_sim.settings import Settings
from pgmq_sim.verdicts.verdict import RunVerdict


@dataclass(frozen=True)
class Finished:
    """What a run leaves for its output files."""

    results: list[RunResult]
    verdicts: list[RunVerdict]  # each result's, judged once
    documents: list[dict[str, Any]]  # each result's JSON document, made where a file holds them
    failed: list[dict[str, str]]  # comparison cells that ended in an error before running
    compare: bool
    record: dict[str, Any]  # the scenario the run ran: -config FILE.json reruns it
    suite: dict[str, Any] | None = None  # -suite pressure: the scorecards


def json_file(path: Path, done: Finished) -> None:
    if done.results or done.failed:
        document = {"runs": done.documents, "failed": done.failed} if done.compare else done.documents[0]
        suite = {"suite": done.suite} if done.suite is not None else {}
        write_json(path, document | suite | done.record)


def plot_file(path: Path, done: Finished) -> None:
    if done.results:
        write_plot(path, done.documents, done.compare)


def junit_file(path: Path, done: Finished) -> None:
    if done.results:
        write_junit(path, done.results, done.verdicts)


def report_file(path: Path, done: Finished) -> None:
    if not (done.results or done.failed):
        return
    try:
        page = run_report(done.documents, __version__, done.failed, done.compare, done.suite)
    except Exception as exc:  # a page that cannot be drawn costs the page, never the run's exit
        raise SimError(
            f"cannot draw the -report page: {exc!r}; the run's JSON (-json) holds every figure"
        ) from None
    write_report(path, page)


def given_outputs(spec: CommandOptions, settings: Settings) -> list[tuple[str, Path]]:
    """(label, path) of each output file the run was asked for, in the summary's order."""
    given = [(o, getattr(settings, o.field or "")) for o in spec.outputs]
    ranked = sorted(given, key=lambda pair: pair[0].output.rank if pair[0].output else 0)
    return [(o.output.label, path) for o, path in ranked if o.output is not None and path is not None]


def check_outputs(spec: CommandOptions, settings: Settings) -> None:
    """Before the run: every output path writable, and what each file needs (a format, matplotlib)."""
    to_stdout = [o.flag for o in spec.outputs if getattr(settings, o.field or "") == STDOUT]
    if settings.logfile == "-":
        to_stdout.append("-logfile")
    if len(to_stdout) > 1:
        raise UsageError(
            f"{' and '.join(f'{flag} -' for flag in to_stdout)} would both write to stdout;"
            " send one of them to a file"
        )
    for option in spec.outputs:
        path = getattr(settings, option.field or "")
        if path is None or option.output is None:
            continue
        check_output_path(path, option.flag)
        if option.output.check is not None:
            option.output.check(path)


def needs_documents(spec: CommandOptions, settings: Settings) -> bool:
    return any(
        o.output is not None and o.output.documents and getattr(settings, o.field or "") is not None
        for o in spec.outputs
    )


def write_outputs(spec: CommandOptions, settings: Settings, done: Finished) -> list[str]:
    """Every output file that can be written is; the errors of those that cannot."""
    errors = []
    for option in spec.outputs:
        path = getattr(settings, option.field or "")
        if path is None or option.output is None:
            continue
        try:
            option.output.write(path, done)
        except SimError as exc:
            errors.append(str(exc))
    return errors
