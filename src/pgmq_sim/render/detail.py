"""-v: every row the run has, section by section."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.model.quantities import count_text, ms_text, seconds_text
from pgmq_sim.render.lines import (
    ACCOUNT_TYPES,
    NAMES,
    audit_rows,
    claims_text,
    client_text,
    drift_not_judged,
    enqueue_text,
    episodes_text,
    fault_text,
    files_text,
    head,
    latency_text,
    ms,
    outputs_text,
    print_checks,
    print_drift,
    print_sweep,
    processed_text,
    producer_text,
    role_cost_text,
    server_cost_text,
    throughput_text,
    time_split_text,
    window_limits_text,
)
from pgmq_sim.render.pressure import print_phases
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import cohort_text
from pgmq_sim.verdicts.server_waits import waits_text
from pgmq_sim.verdicts.verdict import RunVerdict


def print_detail(
    console: Console, result: RunResult, verdict: RunVerdict, written: Sequence[tuple[str, object]] = ()
) -> None:
    """Every row the run has, as -v asks."""
    table = head(result, detail=True)
    _design_rows(table, result)
    table.add_row("files", escape(files_text(result)))
    table.add_row("seed", f"{result.settings.seed} (replay with -seed {result.settings.seed})")
    table.add_row("processed", processed_text(result))
    table.add_row("messages/s", throughput_text(result))
    if result.producer is not None:
        table.add_row("producer", producer_text(result.producer))
    _latency_rows(table, result)
    claims = result.claims
    table.add_row(
        "claims", escape(claims_text(claims)) if claims else f"{count_text(result.empty_claims)} empty"
    )
    if result.connections_lost or result.reconnects:
        lost = [
            f"{c.reason.label} ({c.sqlstate or 'no SQLSTATE'}) x{count_text(c.lost)}"
            for c in result.server_reasons
            if c.lost
        ]
        causes = f"; lost to {', '.join(lost)}" if lost else ""
        lost_n, reconnects = count_text(result.connections_lost), count_text(result.reconnects)
        table.add_row("connections", escape(f"{lost_n} lost, {reconnects} reconnects{causes}"))
    _bound_row(table, result)
    _server_rows(table, result, verdict)
    audit_rows(table, result)
    _failure_rows(table, result)
    _account_rows(table, result)
    limit = verdict.limit
    table.add_row("limit", f"[bold]{limit.resource}[/]: {escape(limit.evidence)}")
    if verdict.enqueue is not None:
        enqueue = verdict.enqueue
        fix = f"; fix: {enqueue.fix}" if enqueue.fix else ""
        table.add_row("enqueue limit", f"[bold]{enqueue.resource}[/]: {escape(enqueue.evidence + fix)}")
    if verdict.episodes:
        table.add_row("episodes", escape(episodes_text(verdict.episodes)))
    if result.limit_by_window:
        table.add_row("limit by window", escape(window_limits_text(result.limit_by_window)))
    if result.waits is not None:
        table.add_row("server waits", escape(waits_text(result.waits)))
    table.add_row("workers' time", escape(time_split_text(verdict.time_split)))
    for fault in result.faults:
        table.add_row("fault", escape(fault_text(fault)))
    table.add_row("output", escape(outputs_text(result.settings, written)))
    console.print(table)
    _print_workers(console, result)
    print_phases(console, result.phases, detail=True)
    if verdict.sweep is not None:
        print_sweep(console, verdict.sweep)
    if verdict.drift is not None:
        print_drift(console, verdict.drift)
    elif result.settings.drift:
        console.print(drift_not_judged(result))
    for note in result.notes:
        console.print(f"note: {escape(note)}")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {escape(cause)}")
    for line in verdict.advice:
        console.print(f"[yellow]advice:[/] {escape(line)}")
    if verdict.checks:
        print_checks(console, verdict.checks)


def _design_rows(table: Table, result: RunResult) -> None:
    """The queue design, or the batch, where they are not the seed's."""
    queue = result.queue or {}
    if queue and not queue.get("seed_table", True):
        batch = f"; batch {result.settings.batch}" if result.settings.batch > 1 else ""
        table.add_row(
            "queue",
            escape(
                f"{queue['folder']} ({queue['origin']}): {queue['delivery']}, "
                f"{'ordered' if queue['ordered'] else 'unordered'}, {queue['completion']} on completion;"
                f" tables {', '.join(queue.get('tables', []))}{batch}"
            ),
        )
    elif result.settings.batch > 1:
        table.add_row("batch", f"up to {count_text(result.settings.batch)} messages per claim")


def _latency_rows(table: Table, result: RunResult) -> None:
    """End-to-end, claim and completion percentiles, and per priority."""
    e2e_label = "end-to-end ms" + ("" if result.settings.paced else " (incl. backlog wait)")
    for label, values in (
        (e2e_label, result.e2e_ms),
        ("claim ms", result.claim_ms),
        ("complete+commit ms", result.complete_ms),
    ):
        table.add_row(label, "  ".join(f"{k} {ms(v)}" for k, v in values.items()))
    if result.enqueue is not None:
        table.add_row("enqueue ms", escape(enqueue_text(result.enqueue)))
    if result.e2e_by_priority:
        levels = "; ".join(
            f"{level}: p50 {v['p50']:.0f} p99 {v['p99']:.0f}"
            for level, v in sorted(result.e2e_by_priority.items())
        )
        table.add_row("end-to-end ms by priority", escape(levels))


def _bound_row(table: Table, result: RunResult) -> None:
    """The ordering bound, what sets it, and how close the run came."""
    bound, worker_bound = result.ordering_bound_per_s, result.worker_bound_per_s
    if bound and worker_bound:
        groups = result.bound_groups
        if groups < result.groups:  # a hot key sets it
            assert result.keys is not None
            share = result.keys.expected_hot_share
            what = f"hottest group {share:.1%} of messages: {groups:.1f} groups' worth"
        else:
            what = f"{count_text(result.groups)} groups"
        claim, complete = result.claim_ms["p50"] or 0.0, result.complete_ms["p50"] or 0.0
        text = (
            f"{bound:.0f}/s ({what}, one message each per {ms_text(result.work_mean_ms)} work"
            f" + {ms_text(claim)} claim + {ms_text(complete)} completion, p50)"
        )
        text += f"; run reached {result.bound_share:.0%}"
        if worker_bound < bound:
            share = result.throughput_per_s / worker_bound
            workers = count_text(len(result.workers))
            text += f"; {workers} workers allow at most {worker_bound:.0f}/s ({share:.0%})"
        table.add_row("ordering bound", text)


def _server_rows(table: Table, result: RunResult, verdict: RunVerdict) -> None:
    """What the server said: its timeouts, the table, a neighbour's latency, the cost."""
    if result.timeouts is not None and any(t.on for t in result.timeouts.settings):
        table.add_row("server timeouts", escape(result.timeouts.text()))
    census = result.census
    if census and (
        census.autovacuum_off()
        or census.synchronous_commit_off()
        or any(t.options or t.triggers for t in census.tables)
    ):  # only where a setting shapes the figures: the JSON and the report keep the whole census
        table.add_row("server settings", escape(census.text()))
    if result.health:
        h = result.health
        off = census.autovacuum_off() if census else None
        table.add_row(
            "table",
            f"{count_text(h.live_tuples)} live, {count_text(h.dead_tuples)} dead tuples,"
            f" {h.table_bytes // 1024} KiB + {h.index_bytes // 1024} KiB indexes, "
            + (escape(f"autovacuum off: {off}") if off else f"autovacuum x{count_text(h.autovacuum_runs)}"),
        )
    if result.bystander is not None:
        b = result.bystander
        beside = "  ".join(f"{k} {ms(v)}" for k, v in b.beside_ms.items())
        alone = "  ".join(f"{k} {ms(v)}" for k, v in b.alone_ms.items())
        why = verdict.bystander.incomparable_because if verdict.bystander else None
        compared = "comparable" if why is None else f"not comparable: {why}"
        table.add_row(
            "bystander ms",
            f"{beside} beside the queue; alone (before and after): {alone}"
            f" ({b.rate:g}/s, {count_text(b.errors)} errors); {compared}",
        )
    if result.server_cost is not None:
        table.add_row("server cost", server_cost_text(result.server_cost))
        if result.server_cost.roles is not None:
            table.add_row("cost by role", role_cost_text(result.server_cost.roles))
    if result.client.processes:
        table.add_row("client", client_text(result))


def _failure_rows(table: Table, result: RunResult) -> None:
    """Retries, attempts, a held snapshot, the pooler's queue."""
    if result.retries:
        rt = result.retries
        table.add_row(
            "retries",
            f"{count_text(rt.failed_attempts)} failed attempts, {count_text(rt.dead_lettered)} dead letters,"
            f" {count_text(rt.recovered)} recovered, {count_text(rt.crashes)} worker crashes;"
            f" heads blocked groups {rt.blocked_s_total:.1f} s",
        )
    if result.audit and result.audit.retrying:
        a = result.audit
        table.add_row(
            "attempts",
            f"{count_text(a.attempts)} attempts, {count_text(a.redelivered)} redelivered,"
            f" {count_text(a.dead_lettered)} dead-lettered, {count_text(a.failed_attempts)} failed",
        )
    if result.snapshot and result.snapshot.held_s >= 1:
        s = result.snapshot
        table.add_row(
            "oldest snapshot",
            f"{seconds_text(s.held_s)} by pid {s.pid} ({s.application or '-'}), the same backend_xmin each"
            f" second{'' if s.xmin_age is None else f', {count_text(s.xmin_age)} transactions behind'};"
            f" dead tuples {count_text(s.dead_tuples_before)} -> {count_text(s.dead_tuples_peak)}",
        )
    if result.pooler is not None:
        p = result.pooler
        table.add_row(
            "pooler",
            f"clients waiting for a server connection: up to {count_text(p.waiting_max)}, longest"
            f" {ms_text(p.longest_wait_ms)}, {seconds_text(p.waited_s)} in all; server connections"
            f" active up to {count_text(p.servers_active_max)} ({count_text(p.samples)} samples)",
        )


def _account_rows(table: Table, result: RunResult) -> None:
    """The latency account, overall and for the types whose slowest took longest."""
    if result.latency is not None:
        table.add_row("where the time went", escape(latency_text(result)))
        slowest = sorted(
            result.latency.per_type.items(), key=lambda tc: -(tc[1]["p99"].total_ms if "p99" in tc[1] else 0)
        )
        for queue_type, cohorts in slowest[:ACCOUNT_TYPES]:
            said = "; ".join(f"{NAMES[name]} {cohort_text(c)}" for name, c in sorted(cohorts.items()))
            table.add_row(f"  {queue_type}", escape(said))
        if len(slowest) > ACCOUNT_TYPES:
            more = count_text(len(slowest) - ACCOUNT_TYPES)
            table.add_row("", f"({more} more types: the JSON's latency_split, or the -report)")


def _print_workers(console: Console, result: RunResult) -> None:
    """A row per worker (and its runner, where there are several)."""
    workers = Table(title="workers", title_justify="left")
    columns = ["worker", "type", "processed", "empty claims", "busy", "conn. lost"]
    runners = {w.runner for w in result.workers}
    if len(runners) > 1:
        columns.insert(1, "runner")
    for column in columns:
        workers.add_column(column, justify="left" if column in ("worker", "runner") else "right")
    for w in result.workers:
        cells = [
            w.name,
            w.queue_type,
            count_text(w.processed),
            count_text(w.empty_claims),
            f"{w.busy_share:.0%}",
        ]
        cells.append(count_text(w.connections_lost))
        if len(runners) > 1:
            cells.insert(1, w.runner)
        workers.add_row(*cells)
    console.print(workers)
