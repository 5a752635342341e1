"""The summary's texts and rows, one per figure, shared by the short summary (render/terminal) and
-v's detail (render/detail)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgmq_sim.model.checks import number
from pgmq_sim.model.events import Fault
from pgmq_sim.model.journeys import MEDIAN, P99
from pgmq_sim.model.quantities import count_text, ms_figure, ms_text, seconds_text
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.audit import LiveAudit, LiveAuditRecord
from pgmq_sim.result.claims import REASONS, ClaimAccount, ClaimReason
from pgmq_sim.result.costs import ServerCost
from pgmq_sim.result.enqueues import EnqueueAccount
from pgmq_sim.result.roles import QUEUE_ROLES, Role, RoleCosts
from pgmq_sim.result.run import ProducerFigures, RunResult
from pgmq_sim.result.window_limits import LimitStretch, usual
from pgmq_sim.settings import SHORT_DRIFT_S, Settings
from pgmq_sim.verdicts.cause import cohort_text
from pgmq_sim.verdicts.checks import CheckResult
from pgmq_sim.verdicts.checks import breached as breached_checks
from pgmq_sim.verdicts.drift import FIGURES as DRIFT_FIGURES
from pgmq_sim.verdicts.drift import DriftReport
from pgmq_sim.verdicts.episodes import Episode
from pgmq_sim.verdicts.knee import SweepVerdict


def episodes_text(episodes: Sequence[Episode], most: int | None = None) -> str:
    """The episodes, one a line, in time order: `most` of them (all when None), then how many more."""
    shown = list(episodes if most is None else episodes[:most])
    lines = [e.text() for e in shown]
    if len(episodes) > len(shown):
        lines.append(f"({count_text(len(episodes) - len(shown))} more: -v, or the -report)")
    return "\n".join(lines)


def window_limits_text(stretches: Sequence[LimitStretch], most: int | None = None) -> str:
    """The limit of most of the run's windows, then each stretch of another, in time order: `most`
    of them (all when None), then how many more. e.g. 'workers in 92% of the run's time (22
    windows); in the others:' and 'from 120 s to 260 s (14 windows, p99 21.8 s): server-cpu: ...'."""
    common = usual(stretches)
    total = sum(s.seconds for s in stretches)
    mine = [s for s in stretches if s.resource == common]
    share = sum(s.seconds for s in mine) / total if total > 0 else 1.0
    windows = sum(s.windows for s in mine)
    other = [s for s in stretches if s.resource != common]
    if not other:
        return f"{common} in every window ({count_text(windows)})"
    lines = [f"{common} in {share:.0%} of the run's time ({count_text(windows)} windows); in the others:"]
    shown = other if most is None else other[:most]
    for s in shown:
        p99 = f", p99 {ms_text(s.p99_ms)}" if s.p99_ms is not None else ""
        lines.append(
            f"from {s.from_s:.0f} s to {s.to_s:.0f} s"
            f" ({count_text(s.windows)} window{'s' * (s.windows > 1)}{p99}): {s.resource}: {s.evidence}"
        )
    if len(other) > len(shown):
        lines.append(
            f"({count_text(len(other) - len(shown))} more: -v, the JSON's limit_by_window, or the -report)"
        )
    return "\n".join(lines)


def ms(value: float | None) -> str:
    """A table's cell in milliseconds, by the rule of every sentence's (verdicts/cause.ms_figure), in
    every table: the run's, a comparison's, a sweep's, a pressure suite's."""
    return "-" if value is None else ms_figure(value)


def audit_cell(r: RunResult) -> str:
    """pass/FAIL, and what an unordered pass does not promise."""
    if r.audit is None:
        return "off"
    a = r.audit
    text = a.verdict if a.passed else "FAIL"
    if a.order_violations and not a.ordered:
        text += f" ({count_text(a.order_violations)} out of order: unordered)"
    return text


def audit_rows(table: Table, result: RunResult, causes: int | None = None) -> None:
    if result.audit:
        a = result.audit
        verdict = "[green]pass[/]" if a.passed else "[red]FAIL[/]"
        if a.passed:
            delivery = "at least once" if a.at_least_once else "exactly once"
            order = "kept" if a.ordered else "not checked (unordered strategy)"
            done = f"{count_text(a.processed)}/{count_text(a.expected)} {delivery}, order {order}"
            detail = "; ".join([done, *a.problems])
        else:
            detail = "; ".join(a.problems)
        table.add_row("audit", f"{verdict}: {escape(detail)}")
        shown = a.causes if causes is None else a.causes[:causes]
        for cause in shown:
            table.add_row("audit cause", escape(cause))
        if len(shown) < len(a.causes):
            more = count_text(len(a.causes) - len(shown))
            table.add_row("audit cause", f"({more} more: -v, or the -report)")
        if result.live_audit is not None and result.live_audit.windows:
            table.add_row("live audit", escape(live_audit_text(result.live_audit)))
    elif result.settings.audit:
        why = result.audit_skipped or "the server could not be reached"
        table.add_row("audit", f"[red]not run[/]: {escape(why)}")


def live_audit_text(live: LiveAuditRecord) -> str:
    """The windows the run judged as it went, and what its end judged."""
    seen = LiveAudit.of(live.windows)
    failed = f"{count_text(seen.failed_windows)} failed" if seen.failed_windows else "all passed"
    end = (
        f"the end judged msg_id {live.end_from + 1:,} on"
        if live.end_from
        else "the end judged the whole run again"
    )
    judged = sum(w.judged_s for w in live.windows)
    return (
        f"{count_text(seen.windows)} window(s) closed while the run went, every {live.every_s:g} s or less"
        f" often (msg_id 1 to {seen.through:,}), {failed}, judging them took {judged:.1f} s; {end}"
    )


def faults_by_kind(result: RunResult) -> dict[str, list[Fault]]:
    kinds: dict[str, list[Fault]] = {}
    for fault in result.faults:
        kinds.setdefault(fault.kind, []).append(fault)
    return kinds


def fault_group_text(kind: str, faults: list[Fault]) -> str:
    """One fault as the detail shows it; a repeated one as one line: how many, when, what it cost."""
    if len(faults) == 1:
        return fault_text(faults[0])
    first, last, times = faults[0], faults[-1], count_text(len(faults))
    text = f"{kind} x{times}, {first.at_s:.1f} s to {last.at_s:.1f} s: {first.detail} (the first)"
    out = sum(f.outage_s or 0.0 for f in faults)
    if any(f.connections_lost is not None for f in faults):
        text += f"; out {seconds_text(out)} in all"
        if any(f.open_at_end for f in faults):
            text += "; not recovered by the end of the run"
    return text


def fault_text(fault: Fault) -> str:
    effect = fault.effect()
    return f"{fault.at_s:.1f} s {fault.kind}: {fault.detail}" + (f"; {effect}" if effect else "")


def outputs_text(settings: Settings, written: Sequence[tuple[str, object]]) -> str:
    """Where the run's files went (`written`: each output's label and path, as their options declare
    them), and how to see what the summary leaves out."""
    shown = [f"{label} {path}" for label, path in written]
    shown.append(f"log {settings.logfile}")
    text = "; ".join(shown)
    if settings.report_path is None and not settings.verbose:
        text += "; the detail: -v, or -report FILE.html"
    return text


def files_text(result: RunResult) -> str:
    return "; ".join(f"{k} {v['path']} ({v['origin']})" for k, v in result.files.items())


def throughput_text(result: RunResult, most_types: int | None = None) -> str:
    if most_types is not None and len(result.per_type) > most_types:
        return f"{result.throughput_per_s:.1f} ({count_text(len(result.per_type))} types)"
    per_type = ", ".join(
        f"{t} {n / result.elapsed_s:.0f}" if result.elapsed_s else f"{t} 0"
        for t, n in result.per_type.items()
    )
    return f"{result.throughput_per_s:.1f} ({per_type})"


def drift_not_judged(result: RunResult) -> str:
    return (
        f"note: -drift: not judged: the run lasted {seconds_text(result.elapsed_s)}, and a drift needs"
        f" {SHORT_DRIFT_S:.0f} s at one setting"
    )


def head(result: RunResult, detail: bool) -> Table:
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


ACCOUNT_TYPES = 12  # -v: the types whose slowest took longest, each a row
NAMES = {MEDIAN: "median", P99: "slowest 1%"}


def latency_text(result: RunResult) -> str:
    assert result.latency is not None
    return account_text(result.latency)


def account_text(account: LatencyAccount) -> str:
    """The latency account's cohorts, e.g. 'median 5.2 ms: service 67%, hidden 33%; slowest 1% ...'."""
    cohorts = ((NAMES[MEDIAN], account.median), (NAMES[P99], account.p99))
    return "; ".join(f"{name} {cohort_text(c)}" for name, c in cohorts if c is not None)


EMPTY_WORDS = {
    ClaimReason.START: "at the start (or after a lost listener)",
    ClaimReason.NOTIFIED: "after notifications",
    ClaimReason.POLL: "polls",
    ClaimReason.FALLBACK: "at the notify fallback",
    ClaimReason.COMPLETION: "right after a completion",
    ClaimReason.RETRY: "retries after a cancel or a lost connection",
}


def claims_text(claims: ClaimAccount) -> str:
    """e.g. '9,000 took messages, 22,057 came back empty (2.45 per message): 21,600 after
    notifications from outside the run, 400 after the run's own, 57 at the notify fallback'."""
    took, empty = sum(claims.took.values()), claims.empty_claims
    parts: list[str] = []
    outside = claims.outside_empty if claims.senders else 0
    for reason in REASONS:
        n = claims.empty[reason.value]
        if reason == ClaimReason.NOTIFIED and outside:
            parts.append(f"{count_text(outside)} after notifications from outside the run")
            n -= outside
            if n:
                parts.append(f"{count_text(n)} after the run's own")
        elif n:
            parts.append(f"{count_text(n)} {EMPTY_WORDS[reason]}")
    per = claims.per_msg(empty)
    rate = f" ({per:.2f} per message)" if per is not None else ""
    return f"{count_text(took)} took messages, {count_text(empty)} came back empty{rate}" + (
        f": {', '.join(parts)}" if parts else ""
    )


def enqueue_text(account: EnqueueAccount) -> str:
    """e.g. '4 sessions, p50 0.61 p95 1.20 p99 2.31 max 9.80; slowest 1% 3.1 ms: on the server:
    WAL flush ... 55%, waiting for a free producer session 30%, ...'."""
    who = "1 session" if account.sessions == 1 else f"{count_text(account.sessions)} sessions"
    if account.batch > 1:
        who += f" (up to {count_text(account.batch)} per transaction)"
    figures = "  ".join(f"{k} {ms(v)}" for k, v in account.latency_ms.items())
    slowest = account.split(account.slowest_parts_s)
    parts = ", ".join(
        f"{account.part_text(name)} {share:.0%}"
        for name, share in sorted(slowest.items(), key=lambda kv: -kv[1])
        if share >= 0.01
    )
    mean = account.mean_ms(account.slowest_parts_s, account.slowest_count)
    triggers = trigger_text(account)
    return f"{who}: {figures}; slowest 1% {ms_text(mean)}: {parts}" + (f"; {triggers}" if triggers else "")


def trigger_text(account: EnqueueAccount) -> str:
    """e.g. 'msg_queue_notify() 0.021 ms a call, 3,000 calls'."""
    if account.triggers_untimed:
        return f"triggers not timed: {account.triggers_untimed}"
    timed = [(n, c, ms) for n, c, ms in account.triggers if c]
    return "; ".join(f"{n} {ms / c:.3f} ms a call, {count_text(c)} calls" for n, c, ms in timed)


def producer_text(p: ProducerFigures) -> str:
    """e.g. '1,000 offered, 950 written on time (95%), 1,000 by the end'."""
    said = (
        f"{count_text(p.offered)} offered, {count_text(p.on_time)} written on time ({p.on_time_share:.0%}),"
        f" {count_text(p.written)} by the end"
    )
    if p.stalled_s:
        said += f"; nothing written in {p.stalled_s} s while messages were due"
    return said


def time_split_text(split: dict[str, float]) -> str:
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
        facts.append(f"oldest snapshot at most {seconds_text(drift.snapshot_max_s)} old")
    if drift.autovacuums is not None:
        facts.append(f"autovacuum of the queue's table x{count_text(drift.autovacuums)}")
    facts.append(drift.table_note)
    console.print("drift facts: " + escape("; ".join(facts)))
    print_drift_verdict(console, drift)


def print_drift_verdict(console: Console, drift: DriftReport) -> None:
    if drift.drifting:
        console.print(f"[red]drifting:[/] {escape('; '.join(drift.drifting))}")
    else:
        console.print("[green]stable[/]: no figure drifts beyond its bound")


def print_checks(console: Console, checks: tuple[CheckResult, ...]) -> None:
    """The -check thresholds, one row each, and the breached ones named on the last line."""
    table = Table(title="checks", title_justify="left")
    for column in ("", "check", "value", "bound"):
        table.add_column(column, justify="right" if column in ("value", "bound") else "left")
    for c in checks:
        value = "not measured" if c.value is None else f"{number(c.value)} {c.check.unit}".rstrip()
        if c.not_judged is not None:
            value += escape(f", not judged: {c.not_judged}")
        mark = "[yellow]-[/]" if c.passed is None else "[green]✓[/]" if c.passed else "[red]✗[/]"
        table.add_row(
            mark, str(c.check), value, f"{c.check.op} {number(c.check.bound)} {c.check.unit}".rstrip()
        )
    console.print(table)
    print_checks_verdict(console, checks)


def print_checks_verdict(console: Console, checks: tuple[CheckResult, ...]) -> None:
    breached = breached_checks(checks)
    unjudged = [c for c in checks if c.passed is None]
    aside = (
        f"; not judged (no breach): {', '.join(f'{c.check} ({c.not_judged})' for c in unjudged)}"
        if unjudged
        else ""
    )
    if breached:
        console.print(
            f"[red]checks breached:[/] {', '.join(str(c.check) for c in breached)} (exit 4){escape(aside)}"
        )
    else:
        passed = count_text(len(checks) - len(unjudged))
        console.print(f"[green]checks passed:[/] {passed} of {count_text(len(checks))}{escape(aside)}")


def processed_text(result: RunResult) -> str:
    of = f" of {count_text(result.target)}" if result.target is not None else ""
    text = (
        f"{count_text(result.processed)}{of} in {seconds_text(result.elapsed_s)}"
        f" ({count_text(result.produced)} produced"
    )
    if result.settings.duration is not None:
        text += f"; -duration {result.settings.duration:g} s"
        if result.audit is not None:
            text += f"; {count_text(result.audit.left_behind)} left as backlog"
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
    return "per message: " + ", ".join(p for p in parts if p) + f" ({count_text(cost.messages)} messages)"


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
            f" once every worker had its session; {count_text(logins.count)} logins took"
            f" {seconds_text(logins.elapsed_s)} and {ms_text(logins.cpu_s * 1000 / logins.count)} of CPU each"
        )
    account = result.latency
    if account is not None and account.live_cpu_s is not None and result.processed:
        per_msg_us = account.live_cpu_s * 1e6 / result.processed
        text += (
            f"; the latency account kept as the run went: {per_msg_us:.0f} us per message more,"
            f" in a process of its own ({count_text(account.live_chunks)} chunks)"
        )
    return text + f"; share of a core: {shares}"


def print_sweep(console: Console, verdict: SweepVerdict) -> None:
    sweep = verdict.sweep
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

    for step in sweep.steps:
        table.add_row(
            str(step.index + 1) + ("" if step.purpose == "step" else f" {step.purpose}"),
            f"{step.setting:g}",
            num(step.offered_per_s),
            num(step.achieved_per_s),
            ms(step.e2e_ms["p50"]),
            ms(step.e2e_ms["p99"]),
            count_text(step.backlog_end),
            num(step.backlog_slope_per_s),
            ms(step.claim_ms["p50"]),
            count_text(step.empty_claims),
            "-" if step.dead_tuples is None else count_text(step.dead_tuples),
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
        n = step.backlog_left
        left = f"{count_text(n)} messages still waiting after its settle" if n else ""
        said = "; ".join(part for part in (why, faults, left) if part)
        if said:
            console.print(f"step {step.index + 1}: {said}")
    console.print(f"[bold]{verdict.headline}[/]")
    if verdict.limit:
        console.print(escape(verdict.limit))
    for row in sweep.noise():
        p99s = [p for p in row["e2e_p99_ms"] if p is not None]
        spread = f"p99 {ms_text(min(p99s))} to {ms_text(max(p99s))}" if p99s else "no p99"
        achieved = row["achieved_per_s"]
        console.print(
            f"  {row['rate']:g} msg/s, {count_text(row['runs'])} runs: {count_text(row['passed'])} passed;"
            f" {spread}, achieved {min(achieved):.0f}-{max(achieved):.0f}/s"
        )
