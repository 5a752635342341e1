"""The result on a terminal (or a pipe): the summary, the workers and the comparison table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from pgmq_sim.model.quantities import count_text
from pgmq_sim.render.detail import print_detail
from pgmq_sim.render.lines import (
    audit_rows,
    claims_text,
    drift_not_judged,
    enqueue_text,
    episodes_text,
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
    producer_text,
    throughput_text,
    window_limits_text,
)
from pgmq_sim.render.pressure import print_phases
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import Resource
from pgmq_sim.verdicts.figures import KEPT_UP
from pgmq_sim.verdicts.verdict import RunVerdict

SHORT_NOTES = 3  # notes the short summary shows; -v and the report show every one
SHORT_ADVICE = 3  # lines of advice likewise
SHORT_CAUSES = 3  # an audit's causes likewise
SHORT_EPISODES = 3  # episodes the short summary shows; -v, the JSON and the report show every one
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
        table.add_row("producer", producer_text(result.producer))
    table.add_row("end-to-end ms", "  ".join(f"{k} {ms(v)}" for k, v in result.e2e_ms.items()))
    if result.enqueue is not None:
        table.add_row("enqueue ms", escape(enqueue_text(result.enqueue)))
    if result.latency is not None:
        table.add_row("where the time went", escape(latency_text(result)))
    if result.connections_lost or result.reconnects:
        lost, reconnects = count_text(result.connections_lost), count_text(result.reconnects)
        table.add_row("connections", f"{lost} lost, {reconnects} reconnects")
    audit_rows(table, result, SHORT_CAUSES)
    if result.claims is not None and verdict.claims_inflated:  # the limit's evidence names the cause
        table.add_row("claims", escape(claims_text(result.claims)))
    limit = verdict.limit
    table.add_row("limit", f"[bold]{limit.resource}[/]: {escape(limit.evidence)}")
    enqueue = verdict.enqueue  # asked for with -producers; the limit's own when the producer was it
    if enqueue is not None and result.settings.producers > 1 and limit.resource != Resource.PRODUCER:
        table.add_row("enqueue limit", f"[bold]{enqueue.resource}[/]: {escape(enqueue.evidence)}")
    if verdict.episodes:  # what the whole run's limit averaged away, each with its time
        table.add_row("episodes", escape(episodes_text(verdict.episodes, SHORT_EPISODES)))
    if len({s.resource for s in result.limit_by_window}) > 1:  # the stretches of another limit
        table.add_row("limit by window", escape(window_limits_text(result.limit_by_window, SHORT_EPISODES)))
    for kind, faults in faults_by_kind(result).items():
        table.add_row("fault", escape(fault_group_text(kind, faults)))
    table.add_row("output", escape(outputs_text(result.settings, written)))
    console.print(table)
    print_phases(console, result.phases, detail=False)
    if verdict.sweep is not None:  # its steps, what each step's failure was, its headline and limit
        print_sweep(console, verdict.sweep)
    if verdict.drift is not None:
        print_drift_verdict(console, verdict.drift)
    elif result.settings.drift:
        console.print(drift_not_judged(result))
    _print_some(console, "note:", list(result.notes), SHORT_NOTES, "notes")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {escape(cause)}")
    _print_some(console, "[yellow]advice:[/]", list(verdict.advice), SHORT_ADVICE, "lines of advice")
    if verdict.checks:
        print_checks_verdict(console, verdict.checks)


def _print_some(console: Console, label: str, lines: list[str], most: int, what: str) -> None:
    for line in lines[:most]:
        console.print(f"{label} {escape(line)}")
    if len(lines) > most:
        console.print(f"({len(lines) - most} more {what}: -v, or the -report)")
