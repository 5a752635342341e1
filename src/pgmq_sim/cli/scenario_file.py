"""Reading a scenario file (`-config FILE`): TOML, or a run's JSON whose `scenario` is read back.
Its keys are the options' names; each value is checked as its flag's would be, and every problem
names the file, the line and the key."""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pgmq_sim.cli.option import CommandOptions, Option
from pgmq_sim.cli.scenario_values import PROFILE_FORMS, example_line, is_design_path
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import TxMode, WakeupMode
from pgmq_sim.model.pressure import PHASE_KEYS
from pgmq_sim.model.sweep import SLO_KEYS
from pgmq_sim.paths import describe_path

VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")  # the whole value: "$PGMQ_SIM_DSN"
CELL_KEYS = ("queue", "wakeup", "tx")
SWEEP_KINDS = ("rate", "workers")
TYPE_NEEDED = {
    "switch": "true or false",
    "int": "a whole number",
    "float": "a number",
    "text": "a string (in quotes)",
    "path": "a path (a string in quotes)",
}


def read_scenario(spec: CommandOptions, path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The file's options (by parameter, as the command line gives them) and the DSNs it names by
    a variable (by key, as written)."""
    text = _read_text(path)
    result = path.suffix.lower() == ".json"
    if result:
        data, lines = _run_json(path, text), json_lines(text)
    else:
        data, lines = _toml(path, text), toml_lines(text)
    reader = _Reader(spec, path, lines, result)
    return reader.read(data), reader.written


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"-config {describe_path(path)}: no such file; give a scenario file (TOML) or a run's JSON"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise UsageError(f"cannot read -config {describe_path(path)}: {why}; give a scenario file") from None


def _toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(at.group(1)) if at else 1
        problem = re.sub(r"\s*\(at (?:line \d+, column \d+|end of document)\)", "", message)
        where = f"{describe_path(path)}:{line}:"
        twice = re.match(r"Cannot declare \((.*)\) twice", problem)
        if twice:
            table = ".".join(part.strip(" '\"") for part in twice.group(1).split(",") if part.strip())
            raise UsageError(f"{where} [{table}] is given twice; give it once") from None
        if problem.startswith("Cannot overwrite a value"):
            key = _key_on(text, line)
            raise UsageError(f"{where} {key} is given twice; give it once") from None
        raise UsageError(f"{where} not TOML ({problem}); fix the file, or give a run's .json") from None


def _key_on(text: str, line: int) -> str:
    lines = text.splitlines()
    found = KEY.match(lines[line - 1].strip()) if 0 < line <= len(lines) else None
    return _parts(found.group(1))[-1] if found else "a key"


def _run_json(path: Path, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{describe_path(path)}:{exc.lineno}: not JSON ({exc.msg}); give a run's -json file"
        ) from None
    scenario = doc.get("scenario") if isinstance(doc, dict) else None
    if not isinstance(scenario, dict):
        raise UsageError(
            f"{describe_path(path)}: no scenario in it (a run's JSON holds one since scenario files);"
            " give a scenario file, or a run's -json file"
        )
    return scenario


KEY_PART = r"(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)"
KEY = re.compile(rf"^({KEY_PART}(?:\s*\.\s*{KEY_PART})*)\s*=")
HEADER = re.compile(r"^\[\[\s*([^\]]+?)\s*\]\]|^\[\s*([^\]]+?)\s*\]")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in dotted.split("."))


def toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of each key and table, by its path of names (an array of tables' items numbered):
    tomllib says what a file holds, not where."""
    found: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    items: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = HEADER.match(stripped)
        if header:
            table = _parts(header.group(1) or header.group(2))
            if header.group(1):
                items[table] = items.get(table, -1) + 1
                table = (*table, str(items[table]))
            found.setdefault(table, number)
            continue
        key = KEY.match(stripped)
        if key:
            found.setdefault((*table, *_parts(key.group(1))), number)
    return found


def json_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of each key of a run's JSON `scenario` (written one key a line)."""
    found: dict[tuple[str, ...], int] = {}
    inside: list[str] = []
    started = False
    for number, line in enumerate(text.splitlines(), 1):
        key = re.match(r'^(\s*)"([^"]+)":', line)
        if key and not started:
            started = key.group(2) == "scenario" and len(key.group(1)) == 2
            continue
        if not started:
            continue
        depth = (len(key.group(1)) if key else len(line) - len(line.lstrip())) // 2 - 2
        if depth < 0:
            break
        if key:
            inside[depth:] = [key.group(2)]
            found.setdefault(tuple(inside), number)
    return found


class _Reader:
    """A file's values checked one by one, each problem naming the file, the line and the key."""

    def __init__(self, spec: CommandOptions, path: Path, lines: dict[tuple[str, ...], int], result: bool):
        self.spec, self.path, self.lines, self.result = spec, path, lines, result
        self.base = path.parent
        self.written: dict[str, str] = {}

    def where(self, *keys: str) -> str:
        for end in range(len(keys), 0, -1):
            if keys[:end] in self.lines:
                return f"{describe_path(self.path)}:{self.lines[keys[:end]]}: "
        return f"{describe_path(self.path)}:1: "

    def read(self, data: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, raw in data.items():
            option = self.spec.by_name(key)
            if option is not None and option.form == "sweep" and option.in_file:
                self.sweep(option, raw, values)
                continue
            if option is None or not option.in_file or option.table is not None:
                raise UsageError(self.unknown(key, option, None))
            if self.result and option.place == "out":
                continue  # a rerun writes where its own flags say, never over the run it reads
            values[option.param] = self.value(option, raw, (key,))
        return values

    def unknown(self, key: str, option: Option | None, table: str | None) -> str:
        where = self.where(*((table, key) if table else (key,)))
        if option is not None and option.table is not None and option.table != table:
            return f"{where}{key} goes in the [{option.table}] table; move it under [{option.table}]"
        if option is not None and option.table is None and table is not None:
            return f"{where}{key} is not a key of [{table}]; move it above the table's header"
        if option is not None:
            return f"{where}{key} is not a key of a scenario file; give {option.flag} on the command line"
        names = [o.name for o in self.spec.keys if (o.table == table if table else o.table is None)]
        if table == "sweep":
            names += list(SWEEP_KINDS)
        close = difflib.get_close_matches(key.lstrip("-"), names, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        inside = f" in [{table}]" if table else ""
        names_of = f"{self.spec.command} --help"
        return f"{where}unknown key {key}{inside}{hint}; the keys are the flags' names ({names_of})"

    def value(self, option: Option, raw: Any, keys: tuple[str, ...]) -> Any:
        where = self.where(*keys)
        if option.form == "list":
            if not (isinstance(raw, list) and raw and all(isinstance(item, str) for item in raw)):
                raise self.wrong(option, raw, where, "an array of strings")
            return option.checked(",".join(raw), where)
        if option.form == "compare":
            return option.checked(self.cells(raw, where), where)
        if option.form == "phases" and not _is_number(raw):
            return option.checked(self.phases(raw, where), where)
        if option.form == "slo":
            halves = raw if isinstance(raw, dict) and raw and set(raw) <= set(SLO_KEYS) else {}
            if not halves or not all(_is_number(n) for n in halves.values()):
                raise self.wrong(
                    option,
                    raw,
                    where,
                    "a table with the end-to-end p99 (e2e-p99), the enqueue p99, or both, in ms",
                )
            return option.checked(",".join(f"{key}={n:g}" for key, n in halves.items()), where)
        value = self.typed(option, raw, where)
        if option.secret and isinstance(value, str):
            value = self.expand(option, value, where)
        return option.checked(self.located(option, value), where)

    def typed(self, option: Option, raw: Any, where: str) -> Any:
        kind = option.kind
        if kind == "switch" and isinstance(raw, bool):
            return raw
        if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if kind == "float" and _is_number(raw):
            return float(raw)
        if kind in ("text", "path") and isinstance(raw, str):
            return Path(raw) if kind == "path" else raw
        if kind == "text" and option.numbers and _is_number(raw):
            return f"{raw:g}"
        raise self.wrong(option, raw, where, TYPE_NEEDED[kind])

    def wrong(self, option: Option, raw: Any, where: str, needed: str) -> UsageError:
        shown = "(not shown)" if option.secret else _shown(raw)
        example = example_line(option)
        hint = f", e.g. {example}" if example else ""
        return UsageError(f"{where}{option.name} = {shown}: give {needed}{hint}")

    def expand(self, option: Option, value: str, where: str) -> str:
        named = VARIABLE.fullmatch(value)
        if named is None:
            return value
        variable = named.group(1) or named.group(2)
        found = os.environ.get(variable)
        if not found:
            raise UsageError(
                f"{where}{option.name} names ${variable}, which is not set; export {variable}, or give"
                f" {option.flag} on the command line"
            )
        self.written[option.name] = value
        return found

    def located(self, option: Option, value: Any) -> Any:
        """A path the run reads, relative to the file; one it writes stays as written."""
        if option.place == "in":
            return self.base / value
        if option.place == "design":
            return self.design(value)
        if option.place == "profile" and value.partition(":")[0] not in PROFILE_FORMS:
            return str(self.base / value)
        return value

    def design(self, name: str) -> str:
        """A design's folder relative to the file; a built-in's name stays a name (a folder of that
        name beside the file wins, as one in the current directory does for a flag)."""
        local = any((self.base / folder / name / "queue.toml").is_file() for folder in ("", "strategies"))
        local = local or any(
            (self.base / folder / name / "claim.sql").is_file() for folder in ("", "strategies")
        )
        return str(self.base / name) if is_design_path(name) or local else name

    def cells(self, raw: Any, where: str) -> str:
        if raw == "all":
            return "all"
        if not (isinstance(raw, list) and raw and all(isinstance(cell, dict) for cell in raw)):
            raise UsageError(
                f'{where}compare = {_shown(raw)}: give "all", or a table per cell: [[compare]] with'
                ' queue = "indexed", wakeup = "notify", tx = "split"'
            )
        texts = []
        for index, cell in enumerate(raw):
            at = self.where("compare", str(index))
            unknown = sorted(set(cell) - set(CELL_KEYS))
            if unknown:
                raise UsageError(
                    f"{at}unknown key {unknown[0]} in a [[compare]] cell; a cell has queue, wakeup, tx"
                )
            queue = cell.get("queue")
            if not isinstance(queue, str):
                raise UsageError(f'{at}a [[compare]] cell needs queue = "NAME" (a design, or its folder)')
            parts = [self.design(queue)]
            for key, kind in (("wakeup", WakeupMode), ("tx", TxMode)):
                if key in cell:
                    if cell[key] not in tuple(kind):
                        names = ", ".join(member.value for member in kind)
                        at = self.where("compare", str(index), key)
                        raise UsageError(f"{at}{key} = {_shown(cell[key])}: use one of {names}")
                    parts.append(str(cell[key]))
            texts.append("/".join(parts))
        return ",".join(texts)

    def phases(self, raw: Any, where: str) -> str:
        """[[phase]] tables as -phase's text."""
        if not (isinstance(raw, list) and raw and all(isinstance(phase, dict) for phase in raw)):
            raise UsageError(
                f"{where}phase = {_shown(raw)}: give seconds (with suite), or a table per phase: [[phase]]"
                ' with name = "baseline", duration = 20, rate = 100, pressure = "idle-in-tx"'
            )
        texts = []
        for index, phase in enumerate(raw):
            unknown = sorted(set(phase) - set(PHASE_KEYS))
            if unknown:
                raise UsageError(
                    f"{self.where('phase', str(index))}unknown key {unknown[0]} in a [[phase]] table;"
                    f" a phase has {', '.join(PHASE_KEYS)}"
                )
            items = {k: f"{v:g}" if _is_number(v) else str(v) for k, v in phase.items()}
            texts.append(" ".join(f"{key}={value}" for key, value in items.items()))
        return "; ".join(texts)

    def sweep(self, option: Option, raw: Any, values: dict[str, Any]) -> None:
        where = self.where("sweep")
        if not isinstance(raw, dict):
            raise UsageError(
                f'{where}sweep = {_shown(raw)}: give a [sweep] table, e.g. [sweep] rate = "auto"'
            )
        kinds = [kind for kind in SWEEP_KINDS if kind in raw]
        if len(kinds) != 1:
            raise UsageError(
                f'{where}[sweep] needs rate or workers (one of them): "auto", "A..B", "A..B*F" or [A, B, C]'
            )
        kind = kinds[0]
        given = raw[kind]
        if isinstance(given, str):
            text = f"{kind}={given}"
        elif isinstance(given, list) and given and all(_is_number(v) for v in given):
            text = f"{kind}=" + ",".join(f"{v:g}" for v in given)
        else:
            at = self.where("sweep", kind)
            raise UsageError(
                f'{at}{kind} = {_shown(given)}: give "auto", "A..B", "A..B*F" or an array of numbers'
            )
        values[option.param] = option.checked(text, self.where("sweep", kind))
        for key, item in raw.items():
            if key in SWEEP_KINDS:
                continue
            nested = self.spec.by_name(key)
            if nested is None or nested.table != "sweep":
                raise UsageError(self.unknown(key, nested, "sweep"))
            values[nested.param] = self.value(nested, item, ("sweep", key))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(raw: Any) -> str:
    text = json.dumps(raw, default=str) if isinstance(raw, str | list | dict) else str(raw).lower()
    return text if len(text) <= 60 else text[:57] + "..."
