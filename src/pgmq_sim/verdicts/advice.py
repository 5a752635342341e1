"""Advice: first the one fix that follows from the run's measured limit (limits.py), then small
rules for what lies beside the throughput (latency, vacuum, failing heads, the tool's own CPU), each
reading a result and returning one line or nothing. No rule speaks of capacity: only the limit
does, so no two lines pull in opposite directions."""

from __future__ import annotations

from collections.abc import Callable

from pgmq_sim.model.identity import said, whose
from pgmq_sim.model.quantities import count_text, ms_text, seconds_text
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import MeasuredCause
from pgmq_sim.verdicts.drift import unvacuumed_at
from pgmq_sim.verdicts.limits import Limit
from pgmq_sim.verdicts.resources import client_limited

Rule = Callable[[RunResult], str | None]


def idle_workers(r: RunResult) -> str | None:
    """Empty claims dominate only matter when some type has more workers than groups."""
    if not r.ordered:
        return None
    crowded = [
        t
        for t, groups in r.groups_per_type.items()
        if sum(1 for w in r.workers if w.queue_type == t) > groups
    ]
    claims = r.processed + r.empty_claims
    empty = r.empty_claims - (r.claims.outside_empty if r.claims else 0)  # not a notifier outside's
    if not crowded or empty <= r.processed:
        return None
    return (
        f"{count_text(empty)} of {count_text(claims)} claims found nothing: {', '.join(crowded)} have more"
        " workers than groups, and a group takes one worker at a time; use fewer workers or more -orders"
    )


def polling_latency(r: RunResult) -> str | None:
    """The median message's latency is mostly the idle workers' sleep: measured by the latency
    account where the run has one (hidden time, no longer than a poll), else read from e2e's p50."""
    e2e_p50, poll_ms, work = r.e2e_ms["p50"], r.settings.poll_interval * 1000, r.work_mean_ms
    if r.settings.wakeup != "poll" or not r.settings.paced or e2e_p50 is None:
        return None
    median = r.latency.median if r.latency is not None else None
    if median is not None:
        if median.share("hidden") < 0.5 or median.hidden_ms > 1.5 * poll_ms:
            return None
        return (
            f"the median message waited {ms_text(median.hidden_ms)} of its {ms_text(median.total_ms)} hidden"
            f" from idle workers that poll every {r.settings.poll_interval:g} s; -wakeup notify wakes"
            " them at once"
        )
    if not (max(5 * work, 0.2 * poll_ms) < e2e_p50 < 2 * poll_ms):
        return None
    return (
        f"end-to-end p50 {ms_text(e2e_p50)} is mostly messages waiting for idle workers that poll"
        f" every {r.settings.poll_interval:g} s; -wakeup notify wakes them at once"
    )


def backlog_wait(r: RunResult) -> str | None:
    """A prefilled backlog makes end-to-end latency mean time spent queued, not service time."""
    e2e_p50 = r.e2e_ms["p50"]
    if r.settings.paced or e2e_p50 is None or e2e_p50 < 10 * max(r.work_mean_ms, 1.0):
        return None
    median = r.latency.median if r.latency is not None else None
    if median is not None and median.largest not in ("capacity", "ordering"):
        return None  # measured: the median waited for something else than busy workers (the limit says)
    return (
        f"end-to-end p50 {ms_text(e2e_p50)} is mostly time waiting in the prefilled backlog of"
        f" {count_text(r.produced)} messages, not service time; use -rate R to measure latency at a steady"
        " load"
    )


SNAPSHOT_HELD_S = 5.0


def old_snapshot(r: RunResult) -> str | None:
    """Seed 001's lesson: vacuum cannot remove what a snapshot still sees; no vacuum setting helps."""
    hold = r.snapshot
    if (
        hold is None
        or hold.held_s < SNAPSHOT_HELD_S
        or hold.dead_tuples_peak <= hold.dead_tuples_before + 1000
    ):
        return None
    behind = "" if hold.xmin_age is None else f"; its xmin {count_text(hold.xmin_age)} transactions behind"
    pooled = r.path is not None and r.path.transaction_pooled
    named = said(hold.application, whose(hold.application, "", True, pooled)) if hold.application else ""
    return (
        f"a snapshot held for {seconds_text(hold.held_s)} by pid {hold.pid}"
        f" ({named or 'no application_name'}{behind})"
        " kept vacuum from removing dead tuples"
        f" ({count_text(hold.dead_tuples_before)} -> {count_text(hold.dead_tuples_peak)});"
        " end long transactions (commit per message); vacuum settings cannot help"
    )


def autovacuum_off(r: RunResult) -> str | None:
    """Autovacuum kept from the queue's tables (read before the run), named where it is set, with the
    dead tuples it left and the table's growth: however short the run, never a table judged sound."""
    off = r.census.autovacuum_off() if r.census is not None else None
    if off is None:
        return None
    points = [(float(s.second), s.dead_tuples, s.table_mb) for s in r.timeline]
    if r.health is not None:  # the end's exact count
        points.append((r.elapsed_s, r.health.dead_tuples, None))
    return (
        f"{unvacuumed_at(points, off)}; turn autovacuum back on where it is off, or VACUUM the queue's"
        " table on a schedule"
    )


def dead_tuples(r: RunResult) -> str | None:
    """Dead tuples in a drained table are gone at the next vacuum: only a live queue suffers, and
    when an old snapshot or autovacuum off is the cause, another rule says so instead."""
    h = r.health
    if h is None or h.live_tuples == 0 or h.dead_tuples <= max(1000, 2 * h.live_tuples):
        return None
    if old_snapshot(r) is not None or autovacuum_off(r) is not None:
        return None
    now = f" (now: {r.census.vacuum_thresholds()})" if r.census is not None else ""
    return (
        f"{count_text(h.dead_tuples)} dead tuples against {count_text(h.live_tuples)} live: every claim steps"
        " over them;"
        f" vacuum the queue table more often (autovacuum_vacuum_scale_factor, autovacuum_naptime, or a"
        f" manual VACUUM){now}"
    )


def head_of_line(r: RunResult) -> str | None:
    """Failing heads block their groups in ordered processing: the cost a team must accept."""
    if r.retries is None or not r.retries.blocked_groups or not r.ordered:
        return None
    worst = r.retries.blocked_groups[0]
    return (
        f"failing heads kept their groups waiting {seconds_text(r.retries.blocked_s_total)} in all"
        f" (worst: {worst[0]}/order {worst[1]}, {seconds_text(worst[3])} over {count_text(worst[2])}"
        " failures);"
        " ordered processing cannot pass a failing message: a smaller -backoff-ms or -max-attempts"
        " shortens the wait, a dead letter ends it"
    )


def client_starved(r: RunResult) -> str | None:
    """Threads runnable but waiting for a CPU: the client and the server share too few cores."""
    local = r.client.local
    if local is None or local.run_delay_s is None or local.elapsed_s <= 0 or r.processed < 100:
        return None
    waited = local.run_delay_s / local.elapsed_s  # thread-seconds per second
    if waited < 0.5 or client_limited(r.client):
        return None
    return (
        f"the tool's threads waited {waited:.1f} s per second for a CPU: client and server share the"
        " cores; the server's figures include that contention (a client host of its own avoids it)"
    )


RULES: tuple[Rule, ...] = (
    idle_workers,
    polling_latency,
    backlog_wait,
    old_snapshot,
    autovacuum_off,
    dead_tuples,
    head_of_line,
    client_starved,
)


def advice(result: RunResult, limit: Limit, cost: MeasuredCause | None) -> list[str]:
    """The audit's fix, the limit's, the fix for what inflated the costs (a session outside the run
    that woke the workers for nothing), then one line for each other figure that calls for action;
    none repeats what the run already does (each rule is written not to: tests/test_advice.py reads
    every rule's line against runs that already do what it would say)."""
    lines = []
    audit = result.audit
    if audit is not None and not audit.passed and audit.fix:  # a wrong answer before a slow one
        lines.append(f"audit failed: {audit.fix}")
    if limit.fix:
        lines.append(f"limit {limit.resource}: {limit.fix}")
    if cost is not None and cost.fix is not None:
        lines.append(f"cost {cost.resource}: {cost.fix}")
    for rule in RULES:
        if rule is idle_workers and limit.resource == "workers":
            continue  # "fewer workers" beside "add workers": the limit speaks for the workers
        if rule is polling_latency and limit.resource == "polling":
            continue  # the limit says it already
        line = rule(result)
        if line:
            lines.append(line)
    return lines
