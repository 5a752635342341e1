"""How a scenario file writes an option's value: the forms the reader accepts and the writer
produces (arrays, [[compare]] cells, the [sweep] table), and a one-line example of each key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomli_w

from pgmq_sim.cli.cells import split_cell
from pgmq_sim.cli.option import Option, split_list
from pgmq_sim.dsn import holds_secret
from pgmq_sim.model.kinds import WakeupMode
from pgmq_sim.model.pressure import is_number, parse_phases

PROFILE_FORMS = ("ramp", "step", "burst")


def is_design_path(name: str) -> bool:
    """As the designs read a -queue's text: a folder or a file, not a built-in's name."""
    return "/" in name or name.startswith(".") or name.endswith(".sql")


def file_value(option: Option, value: Any, written: str | None = None) -> Any:
    """A value as the command line gives it, as a scenario file writes it."""
    if option.secret and isinstance(value, str):
        return written or (f"${option.secret}" if holds_secret(value) else value)
    if option.form == "list":
        return split_list(value)
    if option.form == "compare":
        if value.strip() == "all":
            return "all"
        cells = []
        for item in split_list(value):
            name, *dimensions = split_cell(item)
            cell = {"queue": name}
            for dimension in dimensions:
                cell["wakeup" if dimension in tuple(WakeupMode) else "tx"] = dimension
            cells.append(cell)
        return cells
    if option.form == "phases":
        return float(value) if is_number(value) else [p.as_table() for p in parse_phases(value)]
    if option.form == "slo":
        halves = (item.partition("=") for item in value.split(","))
        return {key.strip(): _plain_number(float(ms.strip().removesuffix("ms"))) for key, _, ms in halves}
    if option.form == "sweep":
        kind, _, rest = value.partition("=")
        numbers = split_list(rest)
        if all(re.fullmatch(r"\d+(?:\.\d+)?", n) for n in numbers):
            return {kind.strip(): [_plain_number(float(n)) for n in numbers]}
        return {kind.strip(): rest.strip()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return _plain_number(value)
    return value


def _plain_number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def example_line(option: Option) -> str | None:
    """The option's example as a file's line: fill-db = 250."""
    flags = {f"-{option.name}", f"--{option.name}"}
    args = option.example
    at = next((i for i, arg in enumerate(args) if arg in flags), None)
    if at is None:
        return None
    if option.kind == "switch":
        return f"{option.name} = true"
    text = args[at + 1] if at + 1 < len(args) else ""
    value: Any = {"int": int, "float": float}.get(option.kind, str)(text)
    kept = file_value(option, value)
    if option.form == "sweep":
        return "[sweep] " + " ".join(f"{key} = {_inline(item)}" for key, item in kept.items())
    return ("[sweep] " if option.table else "") + f"{option.name} = {_inline(kept)}"


def _inline(value: Any) -> str:
    """A value as one line of TOML, for a hint (tomli_w writes arrays a line an item)."""
    if isinstance(value, list):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_inline(item)}" for key, item in value.items()) + " }"
    return tomli_w.dumps({"v": value}).partition("=")[2].strip()
