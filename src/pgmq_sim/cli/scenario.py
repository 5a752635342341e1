"""A scenario: a command's options from its flags and its scenario file (`-config FILE`), each with
where it came from. A flag wins over the file, the file over the default.

The file is TOML (read with tomllib), or a run's JSON, whose `scenario` is read back to rerun it.
Its keys are the options' names; checks, chaos and -fail-on are arrays, -compare's cells tables
(`[[compare]]`), a sweep the `[sweep]` table with its own keys. A path the run reads (a queue
folder, -schema, -next-msg, -baseline, a rate profile's CSV) is relative to the file; a path it
writes (-json, -plot, -junit, -logfile) to the current directory, and a run's JSON read back leaves
them out (a rerun must not write over the run it reads). A DSN may name an environment variable
(`dsn = "$PGMQ_SIM_DSN"`); a scenario written out never holds a password. Every problem with the
file is one line naming the file, the line and the key."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import tomli_w
from click.core import ParameterSource

from pgmq_sim.cli.cells import split_cell
from pgmq_sim.cli.option import SECTIONS, CommandOptions, Option, split_list
from pgmq_sim.cli.scenario_file import read_scenario
from pgmq_sim.cli.scenario_values import PROFILE_FORMS, file_value, is_design_path

FLAG, FILE, DEFAULT = "flag", "file", "default"


@dataclass(frozen=True)
class Scenario:
    """A command's options as its code reads them (by parameter, in the command line's types), and
    where each came from (by key: flag, file or default)."""

    spec: CommandOptions
    options: dict[str, Any]
    sources: dict[str, str]
    path: Path | None = None  # the scenario file read, if any
    written: tuple[tuple[str, str], ...] = ()  # (key, text) of a DSN the file named by a variable

    def given(self, param: str) -> bool:
        """Given by a flag or by the file."""
        return self.sources.get(self.spec.by_param(param).name, FLAG) != DEFAULT


def scenario_of(spec: CommandOptions, ctx: click.Context) -> Scenario:
    """The options of the command line `ctx` parsed, with its -config file's under them."""
    params = ctx.params
    config = params.get("config")
    from_file, written = read_scenario(spec, Path(config)) if config is not None else ({}, {})
    options: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for option in spec:
        if option.kind == "version":
            continue
        if ctx.get_parameter_source(option.param) == ParameterSource.COMMANDLINE:
            options[option.param], source = option.checked(params[option.param]), FLAG
        elif option.param in from_file:
            options[option.param], source = from_file[option.param], FILE
        else:
            options[option.param], source = params.get(option.param, option.default), DEFAULT
        sources[option.name] = source
    kept = tuple((key, text) for key, text in written.items() if sources[key] == FILE)
    return Scenario(spec, options, sources, Path(config) if config is not None else None, kept)


def scenario_data(
    scenario: Scenario, also: frozenset[str] = frozenset(), relative_to: Path | None = None
) -> dict[str, Any]:
    """The scenario as a file holds it: the options given (and those named in `also`), in the
    options' order, the [sweep] table last; paths the run reads made relative to `relative_to`."""
    data: dict[str, Any] = {}
    sweep: dict[str, Any] = {}
    written = dict(scenario.written)
    for option in scenario.spec.keys:
        value = scenario.options.get(option.param)
        if value is None or not (scenario.sources[option.name] != DEFAULT or option.name in also):
            continue
        if relative_to is not None:
            value = _moved(option, value, relative_to)
        kept = file_value(option, value, written.get(option.name))
        if option.form == "sweep":
            sweep = kept | sweep
        elif option.table == "sweep":
            sweep[option.name] = kept
        else:
            data[option.name] = kept
    if sweep:
        data["sweep"] = sweep
    return data


def _moved(option: Option, value: Any, folder: Path) -> Any:
    """A path the run reads, relative to `folder` instead of the current directory."""

    def move(path: str) -> str:
        return path if os.path.isabs(path) else os.path.relpath(path, folder)

    if option.place == "in":
        return Path(move(str(value)))
    if option.place == "design" and is_design_path(value):
        return move(value)
    if option.place == "profile" and value.partition(":")[0] not in PROFILE_FORMS:
        return move(value)
    if option.form == "compare" and value.strip() != "all":
        cells = []
        for item in split_list(value):
            name, *dimensions = split_cell(item)
            cells.append("/".join([move(name) if is_design_path(name) else name, *dimensions]))
        return ",".join(cells)
    return value


def scenario_toml(scenario: Scenario) -> str:
    """-print-config: the options given, as a scenario file, section by section."""
    data = scenario_data(scenario)
    sections = {o.name: o.section for o in scenario.spec}
    lines = [f"# {scenario.spec.command} -config FILE runs this; a flag given too wins over the file"]
    tables = {key: value for key, value in data.items() if isinstance(value, dict)}
    section = None
    for key, value in data.items():
        if key in tables:
            continue
        if sections[key] != section:
            section = sections[key]
            lines += ["", f"# {SECTIONS[section]}"]
        option = scenario.spec.by_name(key)
        if (
            option is not None
            and option.secret
            and value == f"${option.secret}"
            and key not in dict(scenario.written)
        ):
            lines.append(
                f"# {option.flag} held a password, which a scenario never keeps: export {option.secret}"
            )
        lines.append(tomli_w.dumps({key: value}).rstrip())
    if tables:
        lines += ["", tomli_w.dumps(tables).rstrip()]
    return "\n".join(lines) + "\n"


def scenario_record(scenario: Scenario, effective: dict[str, Any], json_path: Path | None) -> dict[str, Any]:
    """The JSON's `scenario`: the keys given, and every setting's with its default filled in (the
    computed ones from `effective`, by key; a runner's option only when given); and
    `scenario_sources`: every key's source (flag, file or default). Read back by -config, its paths
    are relative to the JSON file."""
    filled = dict(scenario.options)
    for key, value in effective.items():
        option = scenario.spec.by_name(key)
        if option is not None and filled.get(option.param) is None:
            filled[option.param] = value
    whole = Scenario(scenario.spec, filled, scenario.sources, scenario.path, scenario.written)
    folder = json_path.parent if json_path is not None and str(json_path) != "-" else None
    settings = frozenset(o.name for o in scenario.spec if o.field is not None) | set(effective)
    return {
        "scenario": scenario_data(whole, also=settings, relative_to=folder),
        "scenario_sources": {o.name: scenario.sources[o.name] for o in scenario.spec.keys},
    }
