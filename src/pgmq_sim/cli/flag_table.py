"""The docs' flag tables, written from the options (tools/flag_table.py puts them in README.md;
tests/test_options.py checks that README holds exactly these)."""

from __future__ import annotations

from pgmq_sim.cli.option import SECTIONS, CommandOptions, Option
from pgmq_sim.cli.options import AUDIT, DIFF, RUN

BEGIN = (
    "<!-- flag tables: written by tools/flag_table.py from src/pgmq_sim/cli/options.py; edit them there -->"
)
END = "<!-- end of the flag tables -->"


def flag_tables(commands: tuple[CommandOptions, ...] = (RUN, AUDIT, DIFF)) -> str:
    """Every command's options, a table per section, between the markers README.md keeps."""
    parts = [BEGIN]
    for spec in commands:
        for key, title in SECTIONS.items():
            rows = [row(o) for o in spec if o.section == key]
            if not rows:
                continue
            heading = title if spec is RUN else f"`{spec.command}`: {title[0].lower()}{title[1:]}"
            parts += ["", f"**{heading}**", "", "| flag | default | meaning |", "|---|---|---|", *rows]
    return "\n".join([*parts, "", END])


def row(option: Option) -> str:
    flag = (f"-{option.short}`, `" if option.short else "") + option.flag
    if option.metavar and not option.argument and option.kind not in ("switch", "version"):
        flag += f" {option.metavar}"
    elif option.argument:
        flag = option.metavar or flag
    return f"| `{_cell(flag)}` | {_cell(default_text(option))} | {_cell(option.help)} |"


def default_text(option: Option) -> str:
    if option.shown_default:
        return option.shown_default
    if option.kind == "switch":
        return "off"
    if option.default is None or option.kind == "version":
        return ""
    value = option.default
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if isinstance(value, int) else f"`{value}`"


def _cell(text: str) -> str:
    """A table cell: a | escaped (inside code spans too, as GitHub and the site both read it)."""
    return text.replace("\\|", "|").replace("|", "\\|")
