"""The result on a terminal (or a pipe): the summary, the workers and the comparison table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.render.detail import print_detail
from pgmq_sim.render.lines import (
    audit_cell,
    audit_rows,
    drift_not_judged,
    fault_group_text,
    faults_by_kind,
    files_text,
    head,
    latency_text,
    ms,
    outputs_text,
    print_checks_verdict,
    print_drift_verdict,
    print_sweep,
    processed_text,
    throughput_text,
)
from pgmq_sim.render.pressure import print_phases
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.figures import KEPT_UP
from pgmq_sim.verdicts.verdict import RunVerdict

SHORT_NOTES = 3  # notes the short summary shows; -v and the report show every one
SHORT_ADVICE = 3  # lines of advice likewise
SHORT_CAUSES = 3  # an audit's causes likewise
SHORT_TYPES = 6  # more types than this: the short summary gives the overall rate alone
OURS = ("packaged", "built-in")  # where the tool's own SQL files come from


def print_summary(
    console: Console,
    result: RunResult,
    verdict: RunVerdict,
    verbose: bool = False,
    written: Sequence[tuple[str, object]] = (),
) -> None:
    """The answer in a screen: the run, its figures, the audit, the limit, and where the rest went
    (-v prints the rest here too: print_detail). `written`: each output file's label and path."""
    if verbose:
        print_detail(console, result, verdict, written)
        return
    table = head(result, detail=False)
    if any(f.get("origin") not in OURS for f in result.files.values()):  # a file of the user's
        table.add_row("files", escape(files_text(result)))
    table.add_row("seed", f"{result.settings.seed} (replay with -seed {result.settings.seed})")
    table.add_row("processed", processed_text(result))
    table.add_row("messages/s", throughput_text(result, SHORT_TYPES))
    if result.producer is not None and result.producer.on_time_share < KEPT_UP:
        table.add_row("producer", result.producer.text())
    table.add_row("end-to-end ms", "  ".join(f"{k} {ms(v)}" for k, v in result.e2e_ms.items()))
    if result.latency is not None:
        table.add_row("where the time went", escape(latency_text(result)))
    if result.connections_lost or result.reconnects:
        table.add_row("connections", f"{result.connections_lost} lost, {result.reconnects} reconnects")
    audit_rows(table, result, SHORT_CAUSES)
    if result.claims is not None and result.claims.inflated:  # the limit's evidence names the cause
        table.add_row("claims", escape(result.claims.reasons_text()))
    limit = verdict.limit
    table.add_row("limit", f"[bold]{limit.resource}[/]: {escape(limit.evidence)}")
    for kind, faults in faults_by_kind(result).items():
        table.add_row("fault", escape(fault_group_text(kind, faults)))
    table.add_row("output", escape(outputs_text(result.settings, written)))
    console.print(table)
    print_phases(console, result.phases, detail=False)
    print_phases(console, result.phases, detail=False)
    if result.sweep is not None:
        console.print(f"[bold]{result.sweep.headline()}[/]")
        if result.sweep.limit_line():
            console.print(escape(result.sweep.limit_line() or ""))
    if result.drift is not None:
        print_drift_verdict(console, result.drift)
    elif result.settings.drift:
        console.print(drift_not_judged(result))
    _print_some(console, "note:", list(result.notes), SHORT_NOTES, "notes")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {escape(cause)}")
    _print_some(console, "[yellow]advice:[/]", list(verdict.advice), SHORT_ADVICE, "lines of advice")
    if result.checks:
        print_checks_verdict(console, result)


def _print_some(console: Console, label: str, lines: list[str], most: int, what: str) -> None:
    for line in lines[:most]:
        console.print(f"{label} {escape(line)}")
    if len(lines) > most:
        console.print(f"({len(lines) - most} more {what}: -v, or the -report)")


def print_comparison(console: Console, results: list[RunResult]) -> None:
    if any(r.sweep is not None for r in results):
        print_knees(console, results)
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
    )
    for column in columns:
        table.add_column(
            column, justify="left" if column in ("design", "wake-up", "tx", "audit") else "right"
        )
    for r in results:
        share = r.bound_share
        table.add_row(
            r.strategy,
            r.settings.wakeup,
            r.settings.tx,
            f"{r.throughput_per_s:.0f}",
            ms(r.e2e_ms["p50"]),
            ms(r.e2e_ms["p99"]),
            ms(r.claim_ms["p50"]),
            ms(r.claim_ms["p99"]),
            str(r.empty_claims),
            "-" if share is None else f"{share:.0%}",
            audit_cell(r),
        )
    console.print(table)


def print_knees(console: Console, results: list[RunResult]) -> None:
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
    for r in results:
        knee = r.sweep.knee if r.sweep else None
        best = r.sweep.max_sustainable_per_s if r.sweep else None
        failing = r.sweep.first_failing_per_s if r.sweep else None
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
    for r in results:
        if r.sweep is not None:
            print_sweep(console, r.sweep)
