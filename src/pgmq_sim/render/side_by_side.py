"""Designs side by side (-compare): one row per design on one workload, or one knee per sweep,
with each design's audit and its -check thresholds."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.model.quantities import count_text
from pgmq_sim.render.lines import audit_cell, ms, print_sweep
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.verdict import RunVerdict


def print_comparison(console: Console, results: list[RunResult], verdicts: list[RunVerdict]) -> None:
    if any(r.sweep is not None for r in results):
        print_knees(console, results, verdicts)
        return
    table = Table(title="queue designs compared (one workload)", title_justify="left")
    columns = (
        "design",
        "wake-up",
        "tx",
        "msg/s",
        "e2e p50 ms",
        "e2e p99 ms",
        "claim p50 ms",
        "claim p99 ms",
        "empty claims",
        "of bound",
        "audit",
        *(("checks",) if any(v.checks for v in verdicts) else ()),
    )
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("design", "wake-up", "tx", "audit", "checks") else "right"
        )
    for r, v in zip(results, verdicts, strict=True):
        share = r.bound_share
        checks = (checks_cell(v),) if "checks" in columns else ()
        table.add_row(
            r.strategy,
            r.settings.wakeup,
            r.settings.tx,
            f"{r.throughput_per_s:.0f}",
            ms(r.e2e_ms["p50"]),
            ms(r.e2e_ms["p99"]),
            ms(r.claim_ms["p50"]),
            ms(r.claim_ms["p99"]),
            count_text(r.empty_claims),
            "-" if share is None else f"{share:.0%}",
            audit_cell(r),
            *checks,
        )
    console.print(table)


def checks_cell(verdict: RunVerdict) -> str:
    """A design's -check thresholds in a side-by-side table: passed, or which it breached."""
    breached = verdict.breached
    if not breached:
        return "[green]passed[/]" if verdict.checks else "-"
    return "[red]failed[/]: " + escape(", ".join(str(c.check) for c in breached))


def print_knees(console: Console, results: list[RunResult], verdicts: list[RunVerdict]) -> None:
    """Each strategy's sweep, side by side: which claim design holds the SLO, up to what rate."""
    table = Table(
        title="max sustainable rate per design (one sweep each, one workload)", title_justify="left"
    )
    columns = ("design", "wake-up", "tx", "max sustainable/s", "first failing/s", "held", "at step",
               "its e2e p99 ms", "audit")  # fmt: skip
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("design", "wake-up", "tx", "held", "audit") else "right"
        )
    for r, v in zip(results, verdicts, strict=True):
        knee = v.sweep.knee if v.sweep else None
        best = v.sweep.max_sustainable_per_s if v.sweep else None
        failing = v.sweep.first_failing_per_s if v.sweep else None
        hold = r.sweep.hold if r.sweep else None
        table.add_row(
            r.strategy,
            r.settings.wakeup,
            r.settings.tx,
            "-" if best is None else f"{best:g}",
            "-" if failing is None else f"{failing:g}",
            "-" if hold is None else f"{hold.seconds:.0f} s: {hold.verdict}",
            "-" if knee is None else str(knee.index + 1),
            "-" if knee is None else ms(knee.e2e_ms["p99"]),
            audit_cell(r),
        )
    console.print(table)
    for v in verdicts:
        if v.sweep is not None:
            print_sweep(console, v.sweep)
