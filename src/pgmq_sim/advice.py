"""Advice: small rules, each reading a result and returning one line or nothing."""

from __future__ import annotations

from collections.abc import Callable

from pgmq_sim.result import RunResult

Rule = Callable[[RunResult], str | None]


def slow_claim(r: RunResult) -> str | None:
    claim_p50, work = r.claim_ms["p50"], r.work_mean_ms
    if claim_p50 is None or r.settings.work.mean_ms <= 0 or claim_p50 <= work:
        return None
    fix = "try -claim indexed" if r.strategy == "seed" else "check the claim's plan with EXPLAIN"
    return (
        f"claim p50 {claim_p50:.1f} ms exceeds the mean work {work:.1f} ms:"
        f" the claim query scans the backlog; {fix}"
    )


def overhead_caps_bound(r: RunResult) -> str | None:
    claim_p50, complete_p50, work = r.claim_ms["p50"], r.complete_ms["p50"], r.work_mean_ms
    if claim_p50 is None or complete_p50 is None or r.ordering_bound_per_s is None:
        return None
    overhead = claim_p50 + complete_p50
    if claim_p50 > work or overhead <= 0.2 * (work + overhead):
        return None
    if claim_p50 > complete_p50:
        cause = "the claim query; try -claim indexed" if r.strategy == "seed" else "the claim query"
    else:
        cause = "completing and committing (server load, WAL flush)"
    return (
        f"each message spends {claim_p50:.2f} ms claiming and {complete_p50:.2f} ms"
        f" completing against {work:.2f} ms of work, which caps the run at"
        f" {work / (work + overhead):.0%} of the ordering bound; most of it is {cause}"
    )


def too_few_workers(r: RunResult) -> str | None:
    worker_bound, bound = r.worker_bound_per_s, r.ordering_bound_per_s
    if worker_bound is None or bound is None or worker_bound >= 0.9 * bound:
        return None
    return (
        f"fewer workers than groups in some type: {len(r.workers)} workers can keep at most"
        f" {worker_bound:.0f}/s of the {bound:.0f}/s ordering bound; add workers"
    )


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
    if not crowded or r.empty_claims <= r.processed:
        return None
    return (
        f"{r.empty_claims} of {claims} claims found nothing: {', '.join(crowded)} have more workers"
        " than groups, and a group takes one worker at a time; use fewer workers or more -orders"
    )


def polling_latency(r: RunResult) -> str | None:
    e2e_p50, poll_ms, work = r.e2e_ms["p50"], r.settings.poll_interval * 1000, r.work_mean_ms
    if r.settings.wakeup != "poll" or not r.settings.paced or e2e_p50 is None:
        return None
    if not (max(5 * work, 0.2 * poll_ms) < e2e_p50 < 2 * poll_ms):
        return None
    return (
        f"end-to-end p50 {e2e_p50:.0f} ms is mostly messages waiting for idle workers that poll"
        f" every {r.settings.poll_interval:g} s; -wakeup notify wakes them at once"
    )


def backlog_wait(r: RunResult) -> str | None:
    """A prefilled backlog makes end-to-end latency mean time spent queued, not service time."""
    e2e_p50 = r.e2e_ms["p50"]
    if r.settings.paced or e2e_p50 is None or e2e_p50 < 10 * max(r.work_mean_ms, 1.0):
        return None
    return (
        f"end-to-end p50 {e2e_p50:.0f} ms is mostly time waiting in the prefilled backlog of"
        f" {r.produced} messages, not service time; use -rate R to measure latency at a steady load"
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
    return (
        f"a snapshot held for {hold.held_s:.0f} s by pid {hold.pid}"
        f" ({hold.application or 'no application_name'})"
        f" kept vacuum from removing dead tuples ({hold.dead_tuples_before} -> {hold.dead_tuples_peak});"
        " end long transactions (commit per message); vacuum settings cannot help"
    )


def dead_tuples(r: RunResult) -> str | None:
    """Dead tuples in a drained table are gone at the next vacuum: only a live queue suffers, and
    when an old snapshot is the cause, another rule says so instead."""
    h = r.health
    if h is None or h.live_tuples == 0 or h.dead_tuples <= max(1000, 2 * h.live_tuples):
        return None
    if old_snapshot(r) is not None:
        return None
    return (
        f"{h.dead_tuples} dead tuples against {h.live_tuples} live: every claim steps over them;"
        " vacuum the queue table more often (autovacuum_vacuum_scale_factor, or a manual VACUUM)"
    )


def head_of_line(r: RunResult) -> str | None:
    """Failing heads block their groups in ordered processing: the cost a team must accept."""
    if r.retries is None or not r.retries.blocked_groups or not r.ordered:
        return None
    worst = r.retries.blocked_groups[0]
    return (
        f"failing heads kept their groups waiting {r.retries.blocked_s_total:.1f} s in all"
        f" (worst: {worst[0]}/order {worst[1]}, {worst[3]:.1f} s over {worst[2]} failures);"
        " ordered processing cannot pass a failing message: a smaller -backoff-ms or -max-attempts"
        " shortens the wait, a dead letter ends it"
    )


def rate_too_high(r: RunResult) -> str | None:
    # a constant -rate only: a profile's or a sweep's backlog is judged by its own shape and steps
    if (
        not r.settings.rate
        or r.settings.rate_profile
        or r.settings.sweep
        or not r.timeline
        or r.outcome != "completed"
    ):
        return None
    last = r.timeline[-1].backlog
    if last <= r.settings.rate * 5:
        return None
    return (
        f"backlog ended at {last}: -rate {r.settings.rate:g}/s exceeds what the"
        " workers process; add workers or groups"
    )


def hot_key(r: RunResult) -> str | None:
    """Ordered processing advances a group one message at a time: a hot key caps the whole run."""
    keys, bound = r.keys, r.ordering_bound_per_s
    if keys is None or bound is None or not keys.hottest or keys.groups is None:
        return None
    uniform_bound = keys.groups / (r.work_mean_ms / 1000)
    if bound >= 0.5 * uniform_bound:
        return None
    hot, share = keys.hottest[0], keys.hot_share
    if share is None:
        return None
    return (
        f"hot key: group ({hot.queue_type}, order_id {hot.order_id}) has {share:.0%} of the messages, and a"
        f" group takes one message per work time: it caps the run at {bound:.0f}/s ({uniform_bound:.0f}/s if"
        " keys were even); more workers cannot help, spreading the key can"
    )


def pool_bottleneck(r: RunResult) -> str | None:
    """Behind a pooler whose pool is smaller than the workers, the workers queue for a server
    connection: the claim's latency is mostly that wait."""
    serving, workers = r.worker_backends_max, len(r.workers)
    claim_p50, complete_p50 = r.claim_ms["p50"], r.complete_ms["p50"]
    if r.path is None or not r.path.pooled or not serving or serving >= workers:
        return None
    if claim_p50 is None or complete_p50 is None or claim_p50 < 2 * complete_p50:
        return None
    return (
        f"the pool is the bottleneck: {workers} workers shared at most {serving} server connections, and"
        f" the claim p50 {claim_p50:.1f} ms is mostly the wait for one (complete p50 {complete_p50:.1f} ms);"
        f" raise the pooler's pool size to {workers}, or run {serving} workers"
    )


def client_limit(r: RunResult) -> str | None:
    """A load generator must say when it, not the server, set the pace."""
    busiest = r.client.busiest
    if busiest is None or not r.client.limited or r.processed < 100:
        return None
    per_msg = busiest.cpu_us_per_msg
    fix = "more worker processes (--processes N) or a client host of its own (--master/--worker)"
    return (
        f"the client set the pace, not the server: {busiest.runner} used {busiest.core_share:.0%} of a core"
        + (f" ({per_msg:.0f} us of CPU per message)" if per_msg is not None else "")
        + f"; measure the queue with {fix}"
    )


def client_starved(r: RunResult) -> str | None:
    """Threads runnable but waiting for a CPU: the client and the server share too few cores."""
    local = next((p for p in r.client.processes if p.runner == "local"), None)
    if local is None or local.run_delay_s is None or local.elapsed_s <= 0 or r.processed < 100:
        return None
    waited = local.run_delay_s / local.elapsed_s  # thread-seconds per second
    if waited < 0.5 or r.client.limited:
        return None
    return (
        f"the tool's threads waited {waited:.1f} s per second for a CPU: client and server share the"
        " cores; the server's figures include that contention (a client host of its own avoids it)"
    )


RULES: tuple[Rule, ...] = (
    slow_claim,
    overhead_caps_bound,
    too_few_workers,
    idle_workers,
    polling_latency,
    backlog_wait,
    old_snapshot,
    dead_tuples,
    head_of_line,
    rate_too_high,
    hot_key,
    pool_bottleneck,
    client_limit,
    client_starved,
)


def advice(result: RunResult) -> list[str]:
    """One line for each figure that calls for action."""
    return [line for rule in RULES if (line := rule(result))]
