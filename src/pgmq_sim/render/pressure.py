"""A run's phases and -suite pressure's scorecards on the terminal."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.model.quantities import count_text, seconds_text
from pgmq_sim.render.lines import account_text, ms
from pgmq_sim.result.phased import PhaseResult, SuiteCell


def _number(value: float | int | None) -> str:
    return "-" if value is None else f"{value:g}"


def _count(value: int | None) -> str:
    return "-" if value is None else count_text(value)


def recovery_text(p: PhaseResult) -> str:
    """After a pressure phase: whether the run came back to its baseline, and when ('' unmeasured)."""
    if p.recovered is None:
        return ""
    if p.recovered:
        return f"recovered in {seconds_text(p.recovery_s or 0)}"
    return f"not recovered in {seconds_text(p.seconds)}"


def print_phases(console: Console, phases: Sequence[PhaseResult], detail: bool) -> None:
    """A row per phase; with detail, each phase's waits, limit and faults below."""
    if not phases:
        return
    table = Table(title="phases (one queue, one audit)", title_justify="left")
    for column in ("phase", "pressure", "msg/s", "e2e p50 ms", "e2e p99 ms", "backlog", "dead tuples", "MB"):
        table.add_column(column, justify="left" if column in ("phase", "pressure") else "right")
    table.add_column("limit / recovery")
    for p in phases:
        table.add_row(
            escape(p.name),
            escape(p.pressure or "-"),
            f"{p.throughput_per_s:.0f}",
            ms(p.e2e_ms.get("p50")),
            ms(p.p99_ms),
            count_text(p.backlog_end),
            _count(p.dead_tuples_end),
            _number(p.table_mb_end),
            escape(recovery_text(p) or (p.limit or "-")),
        )
    console.print(table)
    if not detail:
        return
    for p in phases:
        console.print(f"[bold]{escape(p.name)}[/] waits: {escape(p.waits)}")
        console.print(f"  limit {escape(p.limit or '-')}: {escape(p.limit_evidence or '')}")
        if p.account is not None:
            console.print(f"  where the time went: {escape(account_text(p.account))}")
        for fault in p.faults:
            console.print(f"  fault {escape(fault)}")


def _limit(cell: SuiteCell) -> str:
    """The limit's resource; a lock's with its evidence, which names the lock and its holder."""
    if cell.limit == "locks" and cell.limit_evidence:
        return f"{cell.limit}: {cell.limit_evidence}"
    return cell.limit or "-"


def print_scorecards(console: Console, cells: Sequence[SuiteCell], phase_s: float) -> None:
    """One scorecard per design, side by side in the order they ran."""
    designs = list(dict.fromkeys(c.design for c in cells))
    for design in designs:
        table = Table(
            title=f"pressure scorecard: {design} (baseline, pressure, recovery; {phase_s:g} s each)",
            title_justify="left",
        )
        columns = ("pressure", "audit", "lost", "dup", "order", "msg/s", "p99 ms", "recovery", "dead peak")
        for column in columns:
            table.add_column(
                column, justify="left" if column in ("pressure", "audit", "recovery") else "right"
            )
        table.add_column("limit during the pressure")
        for c in (c for c in cells if c.design == design):
            if c.skipped is not None:
                table.add_row(escape(c.pressure), "skipped", *["-"] * 7, escape(c.skipped))
                continue
            if c.not_injected is not None:  # its audit stands; nothing was under a pressure
                said = "not injected" if c.audit in (None, "pass") else f"{c.audit}, not injected"
                counts = (_count(c.lost), _count(c.duplicated), _count(c.out_of_order))
                table.add_row(escape(c.pressure), said, *counts, *["-"] * 4, escape(c.not_injected))
                continue
            recovery = (
                "-"
                if c.recovered is None
                else seconds_text(c.recovery_s or 0)
                if c.recovered
                else f"not in {seconds_text(phase_s)}"
            )
            table.add_row(
                escape(c.pressure),
                c.audit or "not run",
                _count(c.lost),
                _count(c.duplicated),
                _count(c.out_of_order),
                _number(c.throughput_per_s),
                ms(c.p99_ms),
                recovery,
                _count(c.dead_tuples_peak),
                escape(_limit(c)),
            )
        console.print(table)
        unscored = [
            f"{c.pressure} ({'skipped' if c.skipped is not None else 'not injected'})"
            for c in cells
            if c.design == design and (c.skipped is not None or c.not_injected is not None)
        ]
        if unscored:
            said = ", ".join(unscored)
            console.print(escape(f"note: not scored (the reason in its row): {said}"))
