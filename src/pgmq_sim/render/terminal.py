"""The result on a terminal (or a pipe): the summary, the workers and the comparison table."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.model.checks import number
from pgmq_sim.model.events import Fault
from pgmq_sim.model.journeys import MEDIAN, P99
from pgmq_sim.model.sweep import SweepResult
from pgmq_sim.result.costs import ServerCost
from pgmq_sim.result.drift import DriftReport
from pgmq_sim.result.roles import QUEUE_ROLES, Role, RoleCosts
from pgmq_sim.result.run import RunResult
from pgmq_sim.settings import SHORT_DRIFT_S, Settings
from pgmq_sim.verdicts.advice import advice
from pgmq_sim.verdicts.drift import FIGURES as DRIFT_FIGURES
from pgmq_sim.verdicts.figures import KEPT_UP
from pgmq_sim.verdicts.limits import run_limit, time_split


def ms_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


SHORT_NOTES = 3  # notes the short summary shows; -v and the report show every one
SHORT_ADVICE = 3  # lines of advice likewise
SHORT_CAUSES = 3  # an audit's causes likewise
SHORT_TYPES = 6  # more types than this: the short summary gives the overall rate alone
OURS = ("packaged", "built-in")  # where the tool's own SQL files come from


def print_summary(console: Console, result: RunResult, verbose: bool = False) -> None:
    """The answer in a screen: the run, its figures, the audit, the limit, and where the rest went
    (-v prints the rest here too: print_detail)."""
    if verbose:
        print_detail(console, result)
        return
    table = _head(result, detail=False)
    if any(f.get("origin") not in OURS for f in result.files.values()):  # a file of the user's
        table.add_row("files", escape(files_text(result)))
    table.add_row("seed", f"{result.settings.seed} (replay with -seed {result.settings.seed})")
    table.add_row("processed", processed_text(result))
    table.add_row("messages/s", throughput_text(result, SHORT_TYPES))
    if result.producer is not None and result.producer.on_time_share < KEPT_UP:
        table.add_row("producer", result.producer.text())
    table.add_row("end-to-end ms", "  ".join(f"{k} {ms_cell(v)}" for k, v in result.e2e_ms.items()))
    if result.latency is not None:
        table.add_row("where the time went", escape(latency_text(result)))
    if result.connections_lost or result.reconnects:
        table.add_row("connections", f"{result.connections_lost} lost, {result.reconnects} reconnects")
    _audit_rows(table, result, SHORT_CAUSES)
    limit = run_limit(result)
    table.add_row("limit", f"[bold]{limit.resource}[/]: {escape(limit.evidence)}")
    for kind, faults in _faults_by_kind(result).items():
        table.add_row("fault", escape(fault_group_text(kind, faults)))
    table.add_row("output", escape(outputs_text(result.settings)))
    console.print(table)
    if result.sweep is not None:
        console.print(f"[bold]{result.sweep.headline()}[/]")
        if result.sweep.limit_line():
            console.print(escape(result.sweep.limit_line() or ""))
    if result.drift is not None:
        _print_drift_verdict(console, result.drift)
    elif result.settings.drift:
        console.print(drift_not_judged(result))
    _print_some(console, "note:", list(result.notes), SHORT_NOTES, "notes")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {escape(cause)}")
    _print_some(console, "[yellow]advice:[/]", advice(result, limit), SHORT_ADVICE, "lines of advice")
    if result.checks:
        _print_checks_verdict(console, result)


def _print_some(console: Console, label: str, lines: list[str], most: int, what: str) -> None:
    for line in lines[:most]:
        console.print(f"{label} {escape(line)}")
    if len(lines) > most:
        console.print(f"({len(lines) - most} more {what}: -v, or the -report)")


def _audit_rows(table: Table, result: RunResult, causes: int | None = None) -> None:
    if result.audit:
        a = result.audit
        verdict = "[green]pass[/]" if a.passed else "[red]FAIL[/]"
        if a.passed:
            delivery = "at least once" if a.at_least_once else "exactly once"
            order = "kept" if a.ordered else "not checked (unordered strategy)"
            detail = "; ".join([f"{a.processed}/{a.expected} {delivery}, order {order}", *a.problems])
        else:
            detail = "; ".join(a.problems)
        table.add_row("audit", f"{verdict}: {escape(detail)}")
        shown = a.causes if causes is None else a.causes[:causes]
        for cause in shown:
            table.add_row("audit cause", escape(cause))
        if len(shown) < len(a.causes):
            table.add_row("audit cause", f"({len(a.causes) - len(shown)} more: -v, or the -report)")
    elif result.settings.audit:
        why = result.audit_skipped or "the server could not be reached"
        table.add_row("audit", f"[red]not run[/]: {escape(why)}")


def _faults_by_kind(result: RunResult) -> dict[str, list[Fault]]:
    kinds: dict[str, list[Fault]] = {}
    for fault in result.faults:
        kinds.setdefault(fault.kind, []).append(fault)
    return kinds


def fault_group_text(kind: str, faults: list[Fault]) -> str:
    """One fault as the detail shows it; a repeated one as one line: how many, when, what it cost."""
    if len(faults) == 1:
        return fault_text(faults[0])
    first, last = faults[0], faults[-1]
    text = f"{kind} x{len(faults)}, {first.at_s:.1f} s to {last.at_s:.1f} s: {first.detail} (the first)"
    out = sum(f.outage_s or 0.0 for f in faults)
    if any(f.connections_lost is not None for f in faults):
        text += f"; out {out:.2f} s in all"
        if any(f.open_at_end for f in faults):
            text += "; not recovered by the end of the run"
    return text


def fault_text(fault: Fault) -> str:
    effect = fault.effect()
    return f"{fault.at_s:.1f} s {fault.kind}: {fault.detail}" + (f"; {effect}" if effect else "")


def outputs_text(settings: Settings) -> str:
    """Where the run's files went, and how to see what the summary leaves out."""
    written = [
        f"{name} {path}"
        for name, path in (
            ("report", settings.report_path),
            ("JSON", settings.json_path),
            ("plot", settings.plot_path),
            ("JUnit", settings.junit_path),
        )
        if path is not None
    ]
    written.append(f"log {settings.logfile}")
    text = "; ".join(written)
    if settings.report_path is None and not settings.verbose:
        text += "; the detail: -v, or -report FILE.html"
    return text


def files_text(result: RunResult) -> str:
    return "; ".join(f"{k} {v['path']} ({v['origin']})" for k, v in result.files.items())


def throughput_text(result: RunResult, most_types: int | None = None) -> str:
    if most_types is not None and len(result.per_type) > most_types:
        return f"{result.throughput_per_s:.1f} ({len(result.per_type)} types)"
    per_type = ", ".join(
        f"{t} {n / result.elapsed_s:.0f}" if result.elapsed_s else f"{t} 0"
        for t, n in result.per_type.items()
    )
    return f"{result.throughput_per_s:.1f} ({per_type})"


def drift_not_judged(result: RunResult) -> str:
    return (
        f"note: -drift: not judged: the run lasted {result.elapsed_s:.0f} s, and a drift needs"
        f" {SHORT_DRIFT_S:.0f} s at one setting"
    )


def _head(result: RunResult, detail: bool) -> Table:
    """The summary's table with its first rows: an error, the server, the pooler (with what its mode
    changed, in the detail), the design."""
    table = Table(title=f"pgmq-sim: {result.outcome}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    if result.error:
        table.add_row("error", f"[red]{escape(result.error)}[/]")
    path = result.path
    table.add_row("server", escape(result.server) + (f" ({path.tls})" if path and path.tls else ""))
    if path is not None and path.pooled:
        how = "detected" if path.detected else "given by -pooler"
        changes = "; " + "; ".join(path.changes) if detail else ""
        table.add_row("pooler", escape(f"{path.pooler} pooling ({how}: {path.evidence}){changes}"))
    product = (result.queue or {}).get("product")  # a built-in product: the version of its SQL run
    version = f" ({product['name']} {product['version']})" if product else ""
    table.add_row(
        "design / wake-up / tx",
        escape(f"{result.strategy}{version} / {result.settings.wakeup} / {result.settings.tx}"),
    )
    return table


def print_detail(console: Console, result: RunResult) -> None:
    """Every row the run has, as -v asks."""
    table = _head(result, detail=True)
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
        table.add_row("batch", f"up to {result.settings.batch} messages per claim")
    table.add_row("files", escape(files_text(result)))
    table.add_row("seed", f"{result.settings.seed} (replay with -seed {result.settings.seed})")
    table.add_row("processed", processed_text(result))
    table.add_row("messages/s", throughput_text(result))
    if result.producer is not None:
        table.add_row("producer", result.producer.text())
    e2e_label = "end-to-end ms" + ("" if result.settings.paced else " (incl. backlog wait)")
    for label, values in (
        (e2e_label, result.e2e_ms),
        ("claim ms", result.claim_ms),
        ("complete+commit ms", result.complete_ms),
    ):
        table.add_row(label, "  ".join(f"{k} {ms_cell(v)}" for k, v in values.items()))
    if result.e2e_by_priority:
        levels = "; ".join(
            f"{level}: p50 {v['p50']:.0f} p99 {v['p99']:.0f}"
            for level, v in sorted(result.e2e_by_priority.items())
        )
        table.add_row("end-to-end ms by priority", escape(levels))
    table.add_row("empty claims", str(result.empty_claims))
    if result.connections_lost or result.reconnects:
        lost = [
            f"{c.reason.label} ({c.sqlstate or 'no SQLSTATE'}) x{c.lost}"
            for c in result.server_reasons
            if c.lost
        ]
        causes = f"; lost to {', '.join(lost)}" if lost else ""
        table.add_row(
            "connections", escape(f"{result.connections_lost} lost, {result.reconnects} reconnects{causes}")
        )
    bound, worker_bound = result.ordering_bound_per_s, result.worker_bound_per_s
    if bound and worker_bound:
        groups = result.bound_groups
        if groups < result.groups:  # a hot key sets it
            assert result.keys is not None
            share = result.keys.expected_hot_share
            what = f"hottest group {share:.1%} of messages: {groups:.1f} groups' worth"
        else:
            what = f"{result.groups} groups"
        claim, complete = result.claim_ms["p50"] or 0.0, result.complete_ms["p50"] or 0.0
        text = (
            f"{bound:.0f}/s ({what}, one message each per {result.work_mean_ms:.2f} ms work"
            f" + {claim:.2f} ms claim + {complete:.2f} ms completion, p50)"
        )
        text += f"; run reached {result.bound_share:.0%}"
        if worker_bound < bound:
            share = result.throughput_per_s / worker_bound
            text += f"; {len(result.workers)} workers allow at most {worker_bound:.0f}/s ({share:.0%})"
        table.add_row("ordering bound", text)
    if result.timeouts is not None and any(t.on for t in result.timeouts.settings):
        table.add_row("server timeouts", escape(result.timeouts.text()))
    if result.health:
        h = result.health
        table.add_row(
            "table",
            f"{h.live_tuples} live, {h.dead_tuples} dead tuples, {h.table_bytes // 1024} KiB"
            f" + {h.index_bytes // 1024} KiB indexes, autovacuum x{h.autovacuum_runs}",
        )
    if result.bystander is not None:
        b = result.bystander
        beside = "  ".join(f"{k} {ms_cell(v)}" for k, v in b.beside_ms.items())
        alone = "  ".join(f"{k} {ms_cell(v)}" for k, v in b.alone_ms.items())
        why = b.incomparable_because
        verdict = "comparable" if why is None else f"not comparable: {why}"
        table.add_row(
            "bystander ms",
            f"{beside} beside the queue; alone (before and after): {alone} ({b.rate:g}/s, {b.errors} errors);"
            f" {verdict}",
        )
    if result.server_cost is not None:
        table.add_row("server cost", server_cost_text(result.server_cost))
        if result.server_cost.roles is not None:
            table.add_row("cost by role", role_cost_text(result.server_cost.roles))
    if result.client.processes:
        table.add_row("client", client_text(result))
    _audit_rows(table, result)
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
            f"{s.held_s:.0f} s by pid {s.pid} ({s.application or '-'}), the same backend_xmin each"
            f" second{'' if s.xmin_age is None else f', {s.xmin_age:,} transactions behind'}; dead tuples"
            f" {s.dead_tuples_before} -> {s.dead_tuples_peak}",
        )
    if result.pooler is not None:
        p = result.pooler
        table.add_row(
            "pooler",
            f"clients waiting for a server connection: up to {p.waiting_max}, longest"
            f" {p.longest_wait_ms:.0f} ms, {p.waited_s:.2f} s in all; server connections active up to"
            f" {p.servers_active_max} ({p.samples} samples)",
        )
    if result.latency is not None:
        table.add_row("where the time went", escape(latency_text(result)))
        slowest = sorted(
            result.latency.per_type.items(), key=lambda tc: -(tc[1]["p99"].total_ms if "p99" in tc[1] else 0)
        )
        for queue_type, cohorts in slowest[:ACCOUNT_TYPES]:
            said = "; ".join(f"{NAMES[name]} {c.text()}" for name, c in sorted(cohorts.items()))
            table.add_row(f"  {queue_type}", escape(said))
        if len(slowest) > ACCOUNT_TYPES:
            table.add_row(
                "", f"({len(slowest) - ACCOUNT_TYPES} more types: the JSON's latency_split, or the -report)"
            )
    limit = run_limit(result)
    table.add_row("limit", f"[bold]{limit.resource}[/]: {escape(limit.evidence)}")
    if result.waits is not None:
        table.add_row("server waits", escape(result.waits.text()))
    table.add_row("workers' time", escape(time_split_text(result)))
    for fault in result.faults:
        table.add_row("fault", escape(fault_text(fault)))
    table.add_row("output", escape(outputs_text(result.settings)))
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
    if result.sweep is not None:
        print_sweep(console, result.sweep)
    if result.drift is not None:
        print_drift(console, result.drift)
    elif result.settings.drift:
        console.print(drift_not_judged(result))
    for note in result.notes:
        console.print(f"note: {escape(note)}")
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {escape(cause)}")
    for line in advice(result, limit):
        console.print(f"[yellow]advice:[/] {escape(line)}")
    if result.checks:
        print_checks(console, result)


ACCOUNT_TYPES = 12  # -v: the types whose slowest took longest, each a row
NAMES = {MEDIAN: "median", P99: "slowest 1%"}


def latency_text(result: RunResult) -> str:
    """The latency account's cohorts, e.g. 'median 5.2 ms: service 67%, hidden 33%; slowest 1% ...'."""
    assert result.latency is not None
    cohorts = ((NAMES[MEDIAN], result.latency.median), (NAMES[P99], result.latency.p99))
    return "; ".join(f"{name} {c.text()}" for name, c in cohorts if c is not None)


def time_split_text(result: RunResult) -> str:
    split = time_split(result)
    return ", ".join(f"{name} {share:.0%}" for name, share in split.items())


def print_drift(console: Console, drift: DriftReport) -> None:
    """Each figure's first and last window and its line's trend; the verdict on the last line."""
    table = Table(title=f"drift, by windows of {drift.window_s} s", title_justify="left")
    for column in ("figure", "first", "last", "per hour", "over the run", "p", "bound per hour"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    units = {f.name: (f.label, f.unit, f.bound_per_h) for f in DRIFT_FIGURES}
    for t in drift.trends:
        label, unit, bound = units[t.figure]
        mark = " [red]✗[/]" if t.drifting else ""
        table.add_row(
            label + mark, f"{t.first:,.3g} {unit}", f"{t.last:,.3g} {unit}", f"{t.per_hour:+,.3g} {unit}",
            f"{t.share_over_run:+.1%}", f"{t.p:.2g}", f"{bound:.0%}",
        )  # fmt: skip
    console.print(table)
    facts = []
    if drift.snapshot_max_s is not None:
        facts.append(f"oldest snapshot at most {drift.snapshot_max_s:.0f} s old")
    if drift.autovacuums is not None:
        facts.append(f"autovacuum of the queue's table x{drift.autovacuums}")
    facts.append(drift.table_note)
    console.print("drift facts: " + escape("; ".join(facts)))
    _print_drift_verdict(console, drift)


def _print_drift_verdict(console: Console, drift: DriftReport) -> None:
    if drift.drifting:
        console.print(f"[red]drifting:[/] {escape('; '.join(drift.drifting))}")
    else:
        console.print("[green]stable[/]: no figure drifts beyond its bound")


def print_checks(console: Console, result: RunResult) -> None:
    """The -check thresholds, one row each, and the breached ones named on the last line."""
    table = Table(title="checks", title_justify="left")
    for column in ("", "check", "value", "bound"):
        table.add_column(column, justify="right" if column in ("value", "bound") else "left")
    for c in result.checks:
        value = "not measured" if c.value is None else f"{number(c.value)} {c.check.unit}".rstrip()
        mark = "[green]✓[/]" if c.passed else "[red]✗[/]"
        table.add_row(
            mark, str(c.check), value, f"{c.check.op} {number(c.check.bound)} {c.check.unit}".rstrip()
        )
    console.print(table)
    _print_checks_verdict(console, result)


def _print_checks_verdict(console: Console, result: RunResult) -> None:
    breached = result.breached
    if breached:
        console.print(f"[red]checks breached:[/] {', '.join(str(c.check) for c in breached)} (exit 4)")
    else:
        console.print(f"[green]checks passed:[/] {len(result.checks)} of {len(result.checks)}")


def processed_text(result: RunResult) -> str:
    of = f" of {result.target}" if result.target is not None else ""
    text = f"{result.processed}{of} in {result.elapsed_s:.2f} s ({result.produced} produced"
    if result.settings.duration is not None:
        text += f"; -duration {result.settings.duration:g} s"
        if result.audit is not None:
            text += f"; {result.audit.left_behind} left as backlog"
    return text + ")"


def _num(value: float | None, unit: str, digits: int = 1) -> str | None:
    return None if value is None else f"{value:.{digits}f} {unit}"


def server_cost_text(cost: ServerCost) -> str:
    doc = cost.as_json()
    parts = [
        _num(doc["wal_bytes_per_msg"], "B WAL"),
        _num(doc["commits_per_msg"], "commits", 2),
        _num(doc["blks_hit_per_msg"], "buffer hits"),
        _num(doc["blks_read_per_msg"], "reads", 2),
        _num(doc["rows_written_per_msg"], "rows written", 2),
        _num(doc["cpu_us_per_msg"], "us CPU", 0),
    ]
    return "per message: " + ", ".join(p for p in parts if p) + f" ({cost.messages} messages)"


ROLE_NAMES = {Role.PRODUCER: "producer", Role.CONSUMERS: "consumers", Role.EMPTY_CLAIMS: "empty claims"}


def role_cost_text(roles: RoleCosts) -> str:
    """Per message, what the queue cost (producer, consumers) apart from what measuring it did."""
    lines = []
    for role in QUEUE_ROLES:
        parts = [
            _num(roles.transactions_per_msg(role), "tx", 2),
            _num(roles.wal_per_msg(role), "B WAL", 0),
        ]
        if roles.statements is not None:
            s = roles.statements[role]
            m = roles.messages
            parts.append(_num(s.blks_hit / m if m else None, "buffer hits", 1))
            parts.append(_num(s.exec_ms * 1000 / m if m else None, "us executing", 0))
        name = ROLE_NAMES.get(role, "tool (run record, journal, clocks, housekeeping)")
        lines.append(f"{name}: " + ", ".join(p for p in parts if p))
    rest = roles.unattributed_transactions
    if rest is not None and roles.messages:
        wakeups = roles.transactions.wakeups if roles.transactions else None
        said = f", of which up to {wakeups / roles.messages:.2f} LISTEN reads" if wakeups else ""
        lines.append(f"other transactions: {rest / roles.messages:.2f}{said}")
    if roles.statements is None:
        lines.append("(statements not split: pg_stat_statements is not read here)")
    return "\n".join(lines)


def client_text(result: RunResult) -> str:
    client = result.client
    shares = ", ".join(f"{p.runner} {p.core_share:.2f}" for p in client.processes)
    per_msg = client.cpu_us_per_msg
    text = f"CPU {per_msg:.0f} us per message" if per_msg is not None else "CPU -"
    logins = client.logins
    if logins is not None and logins.count:
        text += (
            f" once every worker had its session; {logins.count} logins took {logins.elapsed_s:.2f} s"
            f" and {logins.cpu_s * 1000 / logins.count:.1f} ms of CPU each"
        )
    return text + f"; share of a core: {shares}"


def print_sweep(console: Console, sweep: SweepResult) -> None:
    slo = f"; SLO e2e p99 <= {sweep.slo_p99_ms:g} ms" if sweep.slo_p99_ms is not None else ""
    table = Table(
        title=f"sweep {sweep.spec}: {sweep.step_s:g} s steps, settle <= {sweep.settle_s:g} s{slo}",
        title_justify="left",
    )
    setting = "workers" if sweep.spec.kind == "workers" else "rate/s"
    columns = (
        "step", setting, "offered/s", "achieved/s", "e2e p50", "e2e p99", "backlog", "slope/s",
        "claim p50", "empty", "dead tup.", "WAL B/msg", "srv us/msg", "cli us/msg", "limit", "verdict",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "verdict" else "right")

    def num(value: float | None, digits: int = 0) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    def ms(value: float | None) -> str:
        return num(value, 0 if value is not None and value >= 100 else 1)

    for step in sweep.steps:
        table.add_row(
            str(step.index + 1) + ("" if step.purpose == "step" else f" {step.purpose}"),
            f"{step.setting:g}",
            num(step.offered_per_s),
            num(step.achieved_per_s),
            ms(step.e2e_ms["p50"]),
            ms(step.e2e_ms["p99"]),
            str(step.backlog_end),
            num(step.backlog_slope_per_s),
            ms(step.claim_ms["p50"]),
            str(step.empty_claims),
            "-" if step.dead_tuples is None else str(step.dead_tuples),
            num(step.wal_bytes_per_msg),
            num(step.server_cpu_us_per_msg),
            num(step.client_cpu_us_per_msg),
            step.limit or "-",
            "[green]pass[/]" if step.verdict == "pass" else "[red]FAIL[/]",
        )
    console.print(table)
    for step in sweep.steps:
        why = "; ".join(step.reasons)
        faults = f"faults in it: {', '.join(step.faults)}" if step.faults else ""
        left = f"{step.backlog_left} messages still waiting after its settle" if step.backlog_left else ""
        said = "; ".join(part for part in (why, faults, left) if part)
        if said:
            console.print(f"step {step.index + 1}: {said}")
    console.print(f"[bold]{sweep.headline()}[/]")
    limit = sweep.limit_line()
    if limit:
        console.print(escape(limit))
    for row in sweep.noise():
        p99s = [p for p in row["e2e_p99_ms"] if p is not None]
        spread = f"p99 {min(p99s):.0f}-{max(p99s):.0f} ms" if p99s else "no p99"
        achieved = row["achieved_per_s"]
        console.print(
            f"  {row['rate']:g} msg/s, {row['runs']} runs: {row['passed']} passed; {spread},"
            f" achieved {min(achieved):.0f}-{max(achieved):.0f}/s"
        )
