"""The result on a terminal (or a pipe): the summary, the workers and the comparison table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pgmq_sim.advice import advice
from pgmq_sim.result import RunResult


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def audit_cell(r: RunResult) -> str:
    """pass/FAIL, and what an unordered pass does not promise."""
    if r.audit is None:
        return "off"
    a = r.audit
    text = a.verdict if a.passed else "FAIL"
    if a.order_violations and not a.ordered:
        text += f" ({a.order_violations} out of order: unordered)"
    return text


def print_summary(console: Console, result: RunResult) -> None:
    table = Table(title=f"pgmq-sim: {result.outcome}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    if result.error:
        table.add_row("error", f"[red]{result.error}[/]")
    table.add_row("server", result.server)
    table.add_row(
        "strategy / wake-up / tx", f"{result.strategy} / {result.settings.wakeup} / {result.settings.tx}"
    )
    table.add_row("files", "; ".join(f"{k} {v['path']} ({v['origin']})" for k, v in result.files.items()))
    table.add_row("seed", f"{result.settings.seed} (replay with -seed {result.settings.seed})")
    table.add_row(
        "processed",
        f"{result.processed} of {result.target} in {result.elapsed_s:.2f} s ({result.produced} produced)",
    )
    per_type = ", ".join(
        f"{t} {n / result.elapsed_s:.0f}" if result.elapsed_s else f"{t} 0"
        for t, n in result.per_type.items()
    )
    table.add_row("messages/s", f"{result.throughput_per_s:.1f} ({per_type})")
    e2e_label = "end-to-end ms" + ("" if result.settings.rate else " (incl. backlog wait)")
    for label, values in (
        (e2e_label, result.e2e_ms),
        ("claim ms", result.claim_ms),
        ("complete+commit ms", result.complete_ms),
    ):
        table.add_row(label, "  ".join(f"{k} {_ms(v)}" for k, v in values.items()))
    table.add_row("empty claims", str(result.empty_claims))
    if result.connections_lost or result.reconnects:
        table.add_row("connections", f"{result.connections_lost} lost, {result.reconnects} reconnects")
    bound, worker_bound = result.ordering_bound_per_s, result.worker_bound_per_s
    if bound and worker_bound:
        text = (
            f"{bound:.0f}/s ({result.groups} groups / {result.work_mean_ms:.2f} ms work);"
            f" run reached {result.bound_share:.0%}"
        )
        if worker_bound < bound:
            share = result.throughput_per_s / worker_bound
            text += f"; {len(result.workers)} workers allow at most {worker_bound:.0f}/s ({share:.0%})"
        table.add_row("ordering bound", text)
    if result.health:
        h = result.health
        table.add_row(
            "table",
            f"{h.live_tuples} live, {h.dead_tuples} dead tuples, {h.table_bytes // 1024} KiB"
            f" + {h.index_bytes // 1024} KiB indexes, autovacuum x{h.autovacuum_runs}",
        )
    if result.audit:
        a = result.audit
        verdict = "[green]pass[/]" if a.passed else "[red]FAIL[/]"
        detail = "; ".join(a.problems()) or (
            f"{a.processed}/{a.expected} exactly once, order "
            + ("kept" if a.ordered else "not checked (unordered strategy)")
        )
        table.add_row("audit", f"{verdict}: {detail}")
    elif result.settings.audit:
        table.add_row("audit", "[yellow]not run[/]: the server could not be reached")
    if result.retries:
        rt = result.retries
        table.add_row(
            "retries",
            f"{rt.failed_attempts} failed attempts, {rt.dead_lettered} dead letters,"
            f" {rt.recovered} recovered, {rt.crashes} worker crashes;"
            f" heads blocked groups {rt.blocked_s_total:.1f} s",
        )
    if result.audit and result.audit.retrying:
        a = result.audit
        table.add_row(
            "attempts",
            f"{a.attempts} attempts, {a.redelivered} redelivered, {a.dead_lettered} dead-lettered,"
            f" {a.failed_attempts} failed",
        )
    if result.snapshot and result.snapshot.held_s >= 1:
        s = result.snapshot
        table.add_row(
            "oldest snapshot",
            f"{s.held_s:.0f} s by pid {s.pid} ({s.application or '-'}); dead tuples"
            f" {s.dead_tuples_before} -> {s.dead_tuples_peak}",
        )
    for fault in result.faults:
        table.add_row("fault", f"{fault.at_s:.1f} s {fault.kind}: {fault.detail}")
    console.print(table)
    workers = Table(title="workers", title_justify="left")
    columns = ["worker", "type", "processed", "empty claims", "busy", "conn. lost"]
    runners = {w.runner for w in result.workers}
    if len(runners) > 1:
        columns.insert(1, "runner")
    for column in columns:
        workers.add_column(column, justify="left" if column in ("worker", "runner") else "right")
    for w in result.workers:
        cells = [w.name, w.queue_type, str(w.processed), str(w.empty_claims), f"{w.busy_share:.0%}"]
        cells.append(str(w.connections_lost))
        if len(runners) > 1:
            cells.insert(1, w.runner)
        workers.add_row(*cells)
    console.print(workers)
    for note in result.notes:
        console.print(f"note: {note}")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {cause}")
    for line in advice(result):
        console.print(f"[yellow]advice:[/] {line}")


def print_comparison(console: Console, results: list[RunResult]) -> None:
    table = Table(title="claim strategies compared (one workload)", title_justify="left")
    columns = (
        "strategy",
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
            column, justify="left" if column in ("strategy", "wake-up", "tx", "audit") else "right"
        )
    for r in results:
        share = r.bound_share
        table.add_row(
            r.strategy,
            r.settings.wakeup,
            r.settings.tx,
            f"{r.throughput_per_s:.0f}",
            _ms(r.e2e_ms["p50"]),
            _ms(r.e2e_ms["p99"]),
            _ms(r.claim_ms["p50"]),
            _ms(r.claim_ms["p99"]),
            str(r.empty_claims),
            "-" if share is None else f"{share:.0%}",
            audit_cell(r),
        )
    console.print(table)
