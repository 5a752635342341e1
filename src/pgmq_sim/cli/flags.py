"""A command's flags, read from its options: spelled as the Go tool spells them (-fill-db) and as
GNU does (--fill-db), listed by section in --help, an unknown one named as written and one given
twice refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pgmq_sim import __version__
from pgmq_sim.cli.option import SECTIONS, CommandOptions, Option, plain
from pgmq_sim.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])
HELP_NAMES = ["-h", "-help", "--help"]
TYPES: dict[str, Any] = {"int": int, "float": float, "text": str, "path": click.Path(path_type=Path)}


class SectionedCommand(click.Command):
    """--help lists the options section by section, in the order of SECTIONS."""

    spec: CommandOptions

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections = {o.param: o.section for o in self.spec}
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                groups.setdefault(sections.get(param.name or "", "scenario"), []).append(record)
        for key, title in SECTIONS.items():
            if key in groups:
                with formatter.section(title):
                    formatter.write_dl(groups[key])


def command_of(spec: CommandOptions, doc: str | None = None) -> Callable[[F], SectionedCommand]:
    """The click command of these options."""

    def decorate(function: F) -> SectionedCommand:
        for option in reversed(spec.options):
            function = parameter(option)(function)
        made = click.command(
            cls=SectionedCommand, help=doc, context_settings={"help_option_names": HELP_NAMES}
        )(function)
        assert isinstance(made, SectionedCommand)
        made.spec = spec
        return made

    return decorate


def parameter(option: Option) -> Callable[[F], F]:
    if option.kind == "version":
        return click.version_option(
            __version__, "-version", "--version", prog_name="pgmq-sim", help="The version."
        )
    if option.argument:
        return click.argument(option.param, type=TYPES[option.kind], required=False, metavar=option.metavar)
    kwargs: dict[str, Any] = {"help": plain(option.help[:1].upper() + option.help[1:]) + "."}
    if option.kind == "switch":
        kwargs |= {"is_flag": True, "default": False}
    else:
        kwargs |= {"type": TYPES[option.kind], "default": option.default, "metavar": option.metavar}
        if option.shown_default:  # click would show a text default in parentheses
            kwargs["help"] += f"  [default: {plain(option.shown_default)}]"
        kwargs["show_default"] = option.default is not None and not option.shown_default
    return flag(option.name, option.param, option.short, **kwargs)


def flag(name: str, dest: str | None = None, short: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """An option spelled both -name (as the Go tool) and --name (and -x, where it has a short one)."""
    spellings = ([f"-{short}"] if short else []) + [f"-{name}", f"--{name}"]
    return click.option(*spellings, dest or name.replace("-", "_"), **kwargs)


def check_flags(command: SectionedCommand, args: list[str]) -> None:
    """Name an unknown flag as written (click would name its first letter) and refuse a flag
    given twice (click would silently keep the last)."""
    names = {}
    for param in command.params:
        for opt in param.opts:
            if opt.startswith("-"):
                names[opt] = param.name
    names.update({"-h": "help", "-help": "help", "--help": "help"})
    seen: dict[str | None, str] = {}
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-" or _is_number(arg):
            continue
        flag_name = arg.split("=", 1)[0]
        if flag_name not in names:
            raise UsageError(f"unknown flag {flag_name}; see {command.spec.command} --help for the flags")
        dest = names[flag_name]
        if dest in seen:
            raise UsageError(f"{flag_name} is given twice ({seen[dest]} and {arg}); give it once")
        seen[dest] = arg


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
