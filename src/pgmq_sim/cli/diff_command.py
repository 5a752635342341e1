"""`pgmq-sim diff BASE.json NEW.json`: what changed between two runs, beyond their noise. A figure
named by -fail-on that got worse exits 4, so a CI can gate a change on the last good run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pgmq_sim import __version__
from pgmq_sim.cli.flags import command_of
from pgmq_sim.cli.options import DIFF
from pgmq_sim.cli.scenario import Scenario, scenario_of, scenario_toml
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.kinds import CHECK_EXIT
from pgmq_sim.render.files import check_output_path, write_json
from pgmq_sim.render.report import check_report_path, diff_report, write_report
from pgmq_sim.verdicts.diff import (
    FigureChange,
    compare,
    diff_json,
    parse_fail_on,
    setting_differences,
    single_run,
    worse,
)


def load_run(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}; give a run's -json file") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno}); give a run's -json file"
        ) from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a pgmq-sim run's JSON (-json FILE)")
    return single_run(doc, str(path))


def print_diff(console: Console, changes: list[FigureChange], differences: list[str], title: str) -> None:
    for line in differences:
        console.print(f"settings differ: {line}")
    table = Table(title=title, title_justify="left")
    for column in ("figure", "base", "new", "change", "verdict", "noise"):
        table.add_column(column, justify="right" if column in ("base", "new", "change") else "left")
    colour = {"better": "green", "worse": "red"}
    for c in changes:
        change = "-" if c.change is None else f"{c.change:+.1%}"
        shown = f"[{colour[c.verdict]}]{c.verdict}[/]" if c.verdict in colour else c.verdict
        table.add_row(c.name, _num(c.base), _num(c.new), change, shown, c.how)
    console.print(table)


def diff_line(changes: list[FigureChange]) -> str:
    """The figures that moved beyond the noise, in one line (the table is -v's and the report's)."""
    moved = {verdict: [c.name for c in changes if c.verdict == verdict] for verdict in ("worse", "better")}
    said = [f"{verdict}: {', '.join(names)}" for verdict, names in moved.items() if names]
    return "; ".join(said) + "; the rest within the noise" if said else "every figure within the noise"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


@command_of(DIFF, "Compare two runs' JSON, figure by figure: better, worse, or ~ within the runs' own noise.")
def diff_command(**_options: object) -> None:
    scenario = scenario_of(DIFF, click.get_current_context())
    names, base_doc, new_doc, differences = diff_inputs(scenario)
    if scenario.options["print_config"]:
        click.echo(scenario_toml(scenario), nl=False)
        return
    base, new, json_path, report_path = (
        scenario.options[key] for key in ("base", "new", "json_path", "report_path")
    )
    changes = compare(base_doc, new_doc)
    console = Console(highlight=False)
    print_diff(console, changes, differences, f"{base} -> {new}")
    failing = worse(changes, names)
    diff = diff_json(differences, changes, failing)
    if json_path is not None:
        write_json(json_path, {"base": str(base), "new": str(new), **diff})
    if report_path is not None:
        try:
            page = diff_report(base_doc, new_doc, (str(base), str(new)), diff, names, __version__)
        except Exception as exc:  # an older version's JSON may lack what the page shows
            raise SimError(
                f"cannot draw the -report page: {exc!r}; the diff is above (and in -json), or rerun the runs"
                " with this version"
            ) from None
        write_report(report_path, page)
        console.print(f"report: {report_path}")
    if failing:
        console.print(f"[red]worse beyond noise:[/] {', '.join(c.name for c in failing)} (exit 4)")
        sys.exit(CHECK_EXIT)
    console.print(f"no figure of {', '.join(names)} got worse beyond the noise")


def diff_inputs(scenario: Scenario) -> tuple[tuple[str, ...], dict[str, Any], dict[str, Any], list[str]]:
    """Every refusal before the figures are compared: the -fail-on names, the two runs and how their
    settings differ."""
    base, new, json_path = (scenario.options[key] for key in ("base", "new", "json_path"))
    if base is None or new is None:
        raise UsageError("pgmq-sim diff needs BASE.json NEW.json (or base and new in a -config file)")
    names, allow_different = parse_fail_on(scenario.options["fail_on"]), scenario.options["allow_different"]
    if json_path is not None:
        check_output_path(json_path, "-json")
    if scenario.options["report_path"] is not None:
        check_report_path(scenario.options["report_path"])
    base_doc, new_doc = load_run(base), load_run(new)
    differences = setting_differences(base_doc, new_doc)
    if differences and not allow_different:
        raise UsageError(
            f"the runs' settings differ ({'; '.join(differences)}); add --allow-different to diff them anyway"
        )
    return names, base_doc, new_doc, differences
