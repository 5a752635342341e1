"""What one option is: its name (the flag and the scenario file's key), its type, default, range,
choices, parser, help and section, its rules with other options and, for an output file, how it is
checked and written: all written once. The click flags, the file's keys, --help, the docs' flag
table, the settings (cli/plan builds every field of Settings from its option), the checks before a
run and the files written after it are read from it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pgmq_sim.dsn import DSN_ENV, check_dsn
from pgmq_sim.errors import UsageError

Kind = Literal["switch", "int", "float", "text", "path", "version"]
# how a value is written in a scenario file, when it is not one TOML value of its kind
Form = Literal["value", "list", "compare", "sweep", "slo", "phases"]
# what a path is: read (relative to the scenario file), written (relative to the current directory),
# a queue design (a name or a folder), or a rate profile (a form or a CSV file)
Place = Literal["in", "out", "design", "profile"]


@dataclass(frozen=True)
class Range:
    """The values an option takes: bounds (open or closed) and why they are there."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    why: str = ""

    def problem(self, value: float) -> str | None:
        """What is wrong with the value, or None."""
        below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        above = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        if not (below or above):
            return None
        why = f" ({self.why})" if self.why else ""
        return f"must be {self.describe()}{why}"

    def describe(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.low is not None and self.high is not None:
            if not (self.low_open or self.high_open):
                return f"between {low} and {high}"
            first = f"more than {low}" if self.low_open else f"at least {low}"
            return f"{first} and {'less than' if self.high_open else 'at most'} {high}"
        if self.low is not None:
            if self.low == 0 and not self.low_open:
                return "0 or more (not negative)"
            return f"more than {low}" if self.low_open else f"{low} or more"
        return f"less than {high}" if self.high_open else f"{high} or less"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}" if value != int(value) else str(int(value))


SECTIONS = {  # the order of --help and of the docs' flag tables
    "diff": "What to diff",
    "go": "The Go tool's",
    "design": "The queue design",
    "workload": "The workload",
    "time": "Time, capacity and sweeps",
    "faults": "Faults and failing work",
    "path": "The server and the path to it",
    "gates": "CI gates and baselines",
    "outputs": "Outputs",
    "runners": "More processes, more hosts",
    "scenario": "Scenario files",
}


@dataclass(frozen=True)
class Output:
    """An output file: its name in the summary's output line, its check before the run (beside the
    path's own: cli/outputs) and its writing at the end, from what the run left (`Finished`)."""

    label: str
    write: Callable[[Path, Any], None]  # (path, cli.outputs.Finished); a failure raises SimError
    check: Callable[[Path], None] | None = None
    rank: int = 0  # its place in the summary's output line
    documents: bool = True  # written from the results' JSON documents (made only when a file needs them)


@dataclass(frozen=True)
class Option:
    """One option, once. `name` is the flag (-name, --name) and the scenario file's key."""

    name: str
    kind: Kind
    help: str  # one text for --help and the docs (`code` and [links](...) are shown plain in --help)
    section: str  # a key of SECTIONS
    default: Any = None  # the value when neither the command line nor the file gives one
    metavar: str | None = None
    shown_default: str | None = None  # what the default is, when `default` does not say it
    dest: str | None = None  # the parameter's name when it is not the key's (json -> json_path)
    # the Settings field it fills: "" the parameter's name, None none; several: its parse's tuple
    setting: str | tuple[str, ...] | None = ""
    range: Range | None = None
    choices: tuple[str, ...] | type[StrEnum] = ()  # an enum: its values, and the field holds the member
    parse: Callable[[Any], Any] | None = None  # the text read into its Settings field's value
    validate: Callable[[str], object] | None = None  # the text checked, where nothing is parsed
    fallback: Callable[[dict[str, Any]], Any] | None = None  # the field's value when none is given, from
    # the other options (by parameter), where no constant default says it
    needs: tuple[str, str] | None = None  # (an option it goes with, the fix when that one is missing)
    conflicts: tuple[tuple[str, str], ...] = ()  # (an option it cannot go with, the line that says why)
    output: Output | None = None  # a file the run writes
    form: Form = "value"
    table: str | None = None  # the key sits in this table of the file ([sweep])
    place: Place | None = None
    numbers: bool = False  # a text option a file may also give as a number (work-ms = 0)
    secret: str | None = None  # a DSN: the variable a scenario names instead of a password
    in_file: bool = True  # a key of scenario files (not -config itself, -print-config, -version)
    argument: bool = False  # given on the command line without a flag (pgmq-sim diff BASE NEW)
    gnu: bool = False  # shown --name in the docs (Locust's runners)
    short: str | None = None  # a short spelling besides -name and --name (-v)
    example: tuple[str, ...] = ()  # a command line that sets it, for the tests

    @property
    def param(self) -> str:
        return self.dest or self.name.replace("-", "_")

    @property
    def field(self) -> str | None:
        """Its Settings field (the first, where it fills several)."""
        fields = self.fields
        return fields[0] if fields else None

    @property
    def fields(self) -> tuple[str, ...]:
        if self.setting is None:
            return ()
        return self.setting if isinstance(self.setting, tuple) else (self.setting or self.param,)

    @property
    def names(self) -> tuple[str, ...]:
        """Its choices' names."""
        return tuple(str(c) for c in self.choices)

    def value(self, given: Any) -> Any:
        """A checked value as its Settings field holds it: parsed, a choice as its enum's member."""
        if given is None:
            return None
        if self.parse is not None:
            return self.parse(given)
        if isinstance(self.choices, type):
            return self.choices(given)
        return given

    @property
    def flag(self) -> str:
        """As messages and the docs name it."""
        if self.argument:
            return self.name.upper()
        return ("--" if self.gnu else "-") + self.name

    def checked(self, value: Any, where: str | None = None) -> Any:
        """The value (the command line's or a file's, as the command line's types) in its range and
        choices; `where` ("file:line: ") names it for a file, else it is named by its flag."""
        if value is None or self.kind in ("switch", "version"):
            return value
        named = f"{where}{self.name} =" if where is not None else self.flag
        shown = "(not shown)" if self.secret else f"{value:g}" if isinstance(value, float) else str(value)
        if self.kind == "float" and not math.isfinite(value):
            raise UsageError(f"{named} {shown} is not a finite number")
        if self.range is not None and self.kind in ("int", "float"):
            problem = self.range.problem(value)
            if problem:
                raise UsageError(f"{named} {shown} {problem}")
        if self.choices and value not in self.names:
            bad = f"{named} '{value}':" if where is not None else f"unknown {named} '{value}';"
            raise UsageError(f"{bad} use one of: {', '.join(self.names)}")
        if self.validate is not None and where is None:  # a flag's text, checked as given
            self.validate(value)
        reader = self.parse or self.validate
        if reader is not None and where is not None:  # a file's: its problem names the line
            try:
                reader(value)
            except UsageError as exc:
                raise UsageError(f"{where}{self.name}: {exc}") from None
        return value


@dataclass(frozen=True)
class CommandOptions:
    """A command's options: the run's, the audit's, the diff's."""

    command: str  # as the user types it: pgmq-sim, pgmq-sim audit
    options: tuple[Option, ...]

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    def by_name(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def by_param(self, param: str) -> Option:
        return next(o for o in self.options if o.param == param)

    @property
    def keys(self) -> tuple[Option, ...]:
        """The options a scenario file may give."""
        return tuple(o for o in self.options if o.in_file)

    @property
    def outputs(self) -> tuple[Option, ...]:
        """The output files the command writes."""
        return tuple(o for o in self.options if o.output is not None)


def split_list(text: str) -> list[str]:
    """A comma list (-check, -fail-on) as the items a file gives as an array."""
    return [part.strip() for part in text.split(",") if part.strip()]


def plain(text: str) -> str:
    """The docs' text as --help prints it: [links](page#anchor) as their words (page), no backticks."""
    linked = re.sub(r"\[([^\]]+)\]\(([^)#]+)[^)]*\)", r"\1 (\2)", text)
    return linked.replace("`", "").replace("\\|", "|")


NOT_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
PORT = Range(1, 65535, why="a TCP port")
DSN_DEFAULT = f"`${DSN_ENV}`, else embedded"
SEED_DSN = "postgres://test@localhost/test"  # the examples' server, with no password
ADAPTIVE = ("-sweep", "rate=auto", "-wakeup", "notify")
SWEEP_ONLY = ("sweep", "add -sweep rate=auto")  # the options only a sweep reads: needs=SWEEP_ONLY


def dsn_check(flag: str) -> Callable[[str], None]:
    """A DSN's text checked before any server is touched (the password never shown)."""
    return lambda text: check_dsn(text, flag)
