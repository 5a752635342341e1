"""Why the limit is where it is: one verdict from measured figures (verdicts/figures), the resource
that bounded the run or a sweep's step, its evidence, and the one fix that follows from it.

A run with a latency account starts from it: where the slowest 1% of its messages spent their time.
Hidden time (a free worker did not get the message) is read through what hid it (verdicts/hidden);
ordering, through the groups; capacity (every worker that may take it busy), through what kept the
workers busy: the resources' checks (verdicts/resources), which go from the cause to the symptom (a
pool, a claim plan or a hot key can each make the workers look busy or the server's CPU look full,
so those are judged first), each firing only at its limit. A run without an account (-no-audit, a
sweep's step) is judged by those checks alone."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.quantities import ms_text
from pgmq_sim.result.account import CohortSplit, NotDueHead
from pgmq_sim.result.run import RunResult
from pgmq_sim.verdicts.cause import (
    MORE_WORKERS_CANNOT,
    SEED_CLAIM_FIX,
    MeasuredCause,
    Resource,
    cohort_text,
)
from pgmq_sim.verdicts.ending import ended
from pgmq_sim.verdicts.figures import Figures
from pgmq_sim.verdicts.resources import (
    CAPACITY,
    CLAIM_BLOCKS,
    CLIENT_CORE_SHARE,
    ORDERING_SHARE,
    SERVER_CPU_SHARE,
    SERVICE,
    WORKERS_BUSY,
    client_cpu,
    ordering,
    outage,
    producer_held,
    server_policy,
)


@dataclass(frozen=True)
class Limit:
    """The limit: the measured cause that bounded the run, and the server's wait profile beside it."""

    cause: MeasuredCause
    wait_profile: dict[str, float] | None

    @property
    def resource(self) -> Resource:
        return self.cause.resource

    @property
    def evidence(self) -> str:
        return self.cause.evidence

    @property
    def fix(self) -> str | None:  # the one thing to change, or None (below every limit)
        return self.cause.fix

    def as_json(self) -> dict[str, Any]:
        return {"resource": str(self.resource), "evidence": self.evidence, "wait_profile": self.wait_profile}


def judge(f: Figures) -> Limit:
    profile = f.waits.shares() if f.waits is not None and f.waits.busy else None
    return Limit(_cause(f), profile)


def _cause(f: Figures) -> MeasuredCause:
    for check in (client_cpu, producer_held, server_policy, outage):
        found = check(f)
        if found is not None:
            return found
    if f.p99 is not None:
        return _from_account(f, f.p99)
    for check in CAPACITY:
        found = check(f)
        if found is not None:
            return found
    return _nearest(f)


def _nearest(f: Figures, said_first: str = "") -> MeasuredCause:
    """Below every threshold: the nearest one, named as such when the run did not keep up."""
    levels = [(Resource.WORKERS, f.busy / WORKERS_BUSY, f"workers busy {f.busy:.0%}")]
    if f.ordering_bound_per_s:
        share = f.achieved_per_s / f.ordering_bound_per_s
        hot = f"; {f.hot_group}" if f.hot_group else ""
        levels.append((Resource.ORDERING, share / ORDERING_SHARE, f"{share:.0%} of the ordering bound{hot}"))
    if f.server_cpu_share is not None:
        cpu = f.server_cpu_share
        levels.append((Resource.SERVER_CPU, cpu / SERVER_CPU_SHARE, f"server CPU {cpu:.0%} of its cores"))
    if f.client_core_share is not None:
        own = f.client_core_share
        levels.append((Resource.CLIENT_CPU, own / CLIENT_CORE_SHARE, f"the tool's CPU {own:.0%} of a core"))
    levels.sort(key=lambda level: -level[1])
    said = ", ".join(text for _, _, text in levels)
    if f.offered_per_s is not None and f.kept_up:
        return MeasuredCause(
            Resource.NONE,
            f"{said_first}the offered {f.offered_per_s:g}/s was served below every limit ({said})",
        )
    if said_first:
        return MeasuredCause(Resource.NONE, f"{said_first}below every limit ({said})")
    return MeasuredCause(
        levels[0][0],
        f"nearest its limit, none reached ({said}): idle workers asleep between polls, a short run,"
        " or cores shared by client and server may have held the rest back",
    )


HIDDEN_SHARE = 0.5  # of the slowest 1%'s time: hidden time that makes the limit what hid it


def _after(account: str, found: MeasuredCause) -> MeasuredCause:
    """A check's cause, said after the account it explains."""
    return dataclasses.replace(found, evidence=f"{account}; {found.evidence}")


def _from_account(f: Figures, p99: CohortSplit) -> MeasuredCause:
    """The limit read from where the slowest 1% spent their time: its largest part, then its cause."""
    account = f"the slowest 1% took {cohort_text(p99)}"
    part = p99.largest
    if part == "hidden" or p99.share("hidden") >= HIDDEN_SHARE:
        return _hidden(f, p99, account)
    turn = p99.claim_ms + p99.ordering_ms  # each group's turns: claims, then work and commits
    if part == "claim" or (part == "ordering" and p99.claim_ms >= CLAIM_OF_TURN * turn):
        return _claim(f, p99, account)
    if part == "ordering":
        found = ordering(f)
        if found is not None:
            return _after(account, found)
        hot = f" ({f.hot_group})" if f.hot_group else ""
        bound = f.ordering_bound_per_s
        if bound:
            share = f.achieved_per_s / bound
            hot += f"; {f.achieved_per_s:.0f}/s is {share:.0%} of the ordering bound {bound:.0f}/s"
        fix = MORE_WORKERS_CANNOT
        if p99.not_due_head is not None:  # a head not yet due held its group (procrastinate's lock)
            hot += (
                f"; {ms_text(p99.not_due_head_ms)} of it behind a head not yet due: {_head(p99.not_due_head)}"
            )
            if p99.not_due_head_ms >= p99.ordering_ms / 2:
                fix = (
                    "a group's later messages wait for its head's due time: schedule later only what must"
                    " wait, or give a delayed message a group (lock) of its own"
                )
        return MeasuredCause(
            Resource.ORDERING,
            f"{account}: {ms_text(p99.ordering_ms)} waiting while an earlier message of their group"
            f" held it{hot}",
            fix,
        )
    if part == "due":
        held = (
            f"; {ms_text(p99.not_due_head_ms)} of their ordering behind a head not yet due:"
            f" {_head(p99.not_due_head)}"
            if p99.not_due_head is not None
            else ""
        )
        before = "most of it before they were due (as the design or the retries asked)"
        return MeasuredCause(Resource.DUE, f"{account}: {before}{held}")
    checks = CAPACITY if part == "capacity" else SERVICE
    for check in checks:
        found = check(f)
        if found is not None:
            return _after(account, found)
    if part == "capacity":
        waited = f"{ms_text(p99.capacity_ms)} while every worker that could take them was busy"
        if f.offered_per_s is not None and f.kept_up:  # the rate was served: a queue's tail, no limit
            return _nearest(f, f"{account}: {waited} (a queue's tail at workers busy {f.busy:.0%}); ")
        return MeasuredCause(
            Resource.WORKERS,
            f"{account}: {waited} (workers busy {f.busy:.0%})",
            "add workers" + (f": each adds about {1000 / f.service_ms:.0f}/s" if f.service_ms else ""),
        )
    return _nearest(f, f"{account}: mostly service (work, claim and completion); ")


CLAIM_OF_TURN = 1 / 4  # of the slowest 1%'s claim and ordering time: the claim makes the groups' turns slow


def _claim(f: Figures, p99: CohortSplit, account: str) -> MeasuredCause:
    """The claim statements that took the slowest, or their groups' earlier messages, ran most of
    their wait (each group's turn is its claim, then its work and commit): what made the claim slow."""
    blocks = f.blocks_per_msg
    read = f"; the server read {blocks:.0f} buffers per message" if blocks is not None else ""
    p50 = f" (claim p50 {ms_text(f.claim_ms)}{read})" if f.claim_ms is not None else ""
    bound = f.ordering_bound_per_s
    turns = (
        f"; {f.achieved_per_s:.0f}/s is {f.achieved_per_s / bound:.0%} of the ordering bound" if bound else ""
    )
    said = (
        f"{account}: {ms_text(p99.claim_ms)} while the claim statements that took them, or their group's"
        f" earlier messages, ran{p50}{turns}"
    )
    # a scan makes the server's CPU look full: judged first; a claim that seeks reads tens of buffers
    if blocks is not None and blocks >= CLAIM_BLOCKS / 2:
        fix = (
            SEED_CLAIM_FIX
            if f.strategy == "seed"
            else "check the claim's plan with EXPLAIN (ANALYZE, BUFFERS): it scans the backlog"
        )
        return MeasuredCause(Resource.CLAIM_PLAN, f"{said}: the claim scans the backlog", fix)
    for check in SERVICE:  # what made the statement slow, where it was measured (not a commit's flush)
        found = check(f)
        if found is not None and found.resource != Resource.WAL_FLUSH:
            return _after(said, found)
    return MeasuredCause(Resource.UNEXPLAINED, f"{said}: what slowed the claim was not measured")


def _hidden(f: Figures, p99: CohortSplit, account: str) -> MeasuredCause:
    """Hidden time made most of the slowest 1%: the cause that explains most of it, or unexplained."""
    h = f.hidden
    if h is None:
        return MeasuredCause(
            Resource.UNEXPLAINED,
            f"{account}: {ms_text(p99.hidden_ms)} hidden from free workers, and nothing was sampled to"
            " explain it",
        )
    lead = f"{account}; the slowest 1% were hidden from free workers {ms_text(h.hidden_ms)} each"
    if len(h.by_type) > 1:
        lead += f" ({h.types_text()})"
    top = h.causes[0] if h.causes else None
    if top is None or h.unexplained > h.share(top):
        said = "; ".join(f"{c.resource} explains {h.share(c):.0%}: {c.evidence}" for c in h.causes[:2])
        return MeasuredCause(
            Resource.UNEXPLAINED,
            f"{lead}: {h.unexplained:.0%} of it unexplained (looked at {h.looked_at})"
            + (f"; {said}" if said else ""),
        )
    rest = [c for c in h.causes[1:] if h.share(c) >= 0.1]
    also = "".join(f"; {c.resource} {h.share(c):.0%}: {c.evidence}" for c in rest[:1])
    unexplained = f"; {h.unexplained:.0%} unexplained" if h.unexplained >= 0.05 else ""
    return MeasuredCause(
        top.resource, f"{lead}: {h.share(top):.0%} {top.evidence}{also}{unexplained}", top.fix, h.share(top)
    )


def limit_of(r: RunResult, figures: Figures) -> Limit:
    """A run that died is judged by what ended it (verdicts/ending); one that ended as asked, by
    its figures."""
    found = ended(r)
    return Limit(found, None) if found is not None else judge(figures)


def with_cost(limit: Limit, cost: MeasuredCause | None) -> Limit:
    """The limit; a cause outside the run that inflated its costs is said beside it (verdicts/costs)."""
    if cost is None:
        return limit
    said = dataclasses.replace(limit.cause, evidence=f"{limit.evidence}; cost: {cost.evidence}")
    return dataclasses.replace(limit, cause=said)


def time_split(r: RunResult) -> dict[str, float]:
    """Where the workers' time went, as shares of their time in the run: the work, the claim's and
    the completion's round trips, the wait for a server connection (inside the claim's, told apart
    where the pooler's console measured it), waiting for a CPU (the run-queue delay of the tool's
    threads), and idle (polling an empty queue, asleep)."""
    elapsed, workers = r.elapsed_s, len(r.workers)
    if elapsed <= 0 or not workers:
        return {}
    total = elapsed * workers
    claim_s, complete_s = r.claim_total_s, r.complete_total_s
    work_s = r.work_mean_ms * r.processed / 1000
    local = r.client.local
    cpu_wait = min(total, local.run_delay_s) if local is not None and local.run_delay_s else 0.0
    pool_s = min(claim_s, r.pooler.waited_s) if r.pooler else 0.0  # measured by the pooler's console
    split = {
        "work": work_s / total,
        "claim": (claim_s - pool_s) / total,
        "waiting for a server connection": pool_s / total,
        "completion": complete_s / total,
        "waiting for a CPU": cpu_wait / total,
    }
    if not r.pooler:
        del split["waiting for a server connection"]
    split["idle"] = max(0.0, 1 - sum(split.values()))
    return {name: round(share, 3) for name, share in split.items()}


def _head(head: NotDueHead) -> str:
    return (
        f"group {head.queue_type}:{head.order_id} held by msg_id {head.msg_id}, not due until"
        f" {head.due_s:.2f} s into the run (msg_id {head.held_msg_id} waited behind it)"
    )
