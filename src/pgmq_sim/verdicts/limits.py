"""Why the limit is where it is: one verdict from measured figures (the workers' busy time, the
server's wait profile, the pooler's waits, CPU on both sides, the claim's reads), the resource that
bounded the run or a sweep's step, its evidence, and the one fix that follows from it.

The checks go from the cause to the symptom: a pool, a claim plan or a hot key can each make the
workers look busy or the server's CPU look full, so those are judged first. Each fires only at
its limit (a threshold below which the resource is not what bounds the run)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.events import Fault
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.waits import BlockerSeen, WaitProfile
from pgmq_sim.verdicts.outages import MET
from pgmq_sim.verdicts.policies import PolicyMet, policies_met, run_shape

RESOURCES = (
    "client-cpu",
    "locks",
    "server-policy",
    "outage",
    "pool",
    "claim-plan",
    "wal-flush",
    "server-cpu",
    "ordering",
    "workers",
    "producer",
    "none",
)
WORKERS_BUSY = 0.85  # the workers' mean busy share at which more work could not be taken (a run's
# start and a drained queue's tail lower the mean of workers that were saturated)
ORDERING_SHARE = 0.8  # of the ordering bound, with each message's claim and completion (at p50)
WAIT_SHARE = 0.25  # of the backends' time in a transaction
MIN_WAIT_SAMPLES = 100  # backend-samples in a transaction: fewer are too few to judge a share by
POOL_WAIT_SHARE = 0.2  # of the workers' time, waiting for a server connection
SERVER_CPU_SHARE = 0.85  # of the server's cores
CLAIM_BLOCKS = 200  # buffers read per message: a claim that scans, not one that seeks
KEPT_UP = 0.95  # of the offered rate
CLIENT_CORE_SHARE = 0.9  # of a core, the busiest client process's (one GIL per process)
OUTAGE_SHARE = 0.05  # of the run's time, the path down: the outage, not the queue, set the pace
POLICY_SHARE = 0.05  # of the messages' attempts, ended by a server policy: the policy set the pace


@dataclass(frozen=True)
class Figures:
    """What the judge reads, for a whole run or a sweep's step; None where it was not measured."""

    workers: int
    achieved_per_s: float
    offered_per_s: float | None  # paced: the rate offered; None for a prefilled or topped-up queue
    arrived_share: float | None  # of the offered messages, the share the producer wrote on time
    kept_up: bool
    busy: float  # the workers' mean busy share
    service_ms: float | None  # a message's work, claim and completion, per worker
    ordering_bound_per_s: float | None  # RunResult.ordering_bound_per_s: work, claim and completion
    groups: int | None
    waits: WaitProfile | None
    pooled: bool = False
    pool_wait_share: float | None = None  # of the workers' time (the pooler's console)
    pool_servers: int | None = None  # server connections seen serving the workers at once
    claim_ms: float | None = None
    complete_ms: float | None = None
    work_ms: float = 0.0
    server_cpu_share: float | None = None  # of the server's cores, where its processes are ours
    server_cores: int | None = None
    client_core_share: float | None = None  # the busiest client process's share of a core
    blocks_per_msg: float | None = None
    strategy: str = ""
    hot_group: str | None = None  # the hottest group and its share, where a skew made one
    spare_connections: int | None = None  # more connections the server and the role allow (direct)
    claim_skips_locked: bool = False  # the claim passes over locked rows instead of waiting for them
    faults: tuple[Fault, ...] = ()  # injected or met, with their outages measured (a whole run's)
    elapsed_s: float | None = None
    policies: tuple[PolicyMet, ...] = ()  # the server's policies met, most often first (a whole run's)


@dataclass(frozen=True)
class Limit:
    resource: str
    evidence: str
    wait_profile: dict[str, float] | None
    fix: str | None  # the one thing to change, or None (below every limit)

    def as_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "evidence": self.evidence, "wait_profile": self.wait_profile}


def judge(f: Figures) -> Limit:
    profile = f.waits.shares() if f.waits is not None and f.waits.busy else None
    checks = (_client, _locks, _policy, _outage, _pool, _claim_plan, _wal, _server_cpu, _ordering, _workers,
              _producer)  # fmt: skip
    for check in checks:
        found = check(f)
        if found is not None:
            resource, evidence, fix = found
            return Limit(resource, evidence, profile, fix)
    # below every threshold: the nearest one, named as such when the run did not keep up
    levels = [("workers", f.busy / WORKERS_BUSY, f"workers busy {f.busy:.0%}")]
    if f.ordering_bound_per_s:
        share = f.achieved_per_s / f.ordering_bound_per_s
        hot = f"; {f.hot_group}" if f.hot_group else ""
        levels.append(("ordering", share / ORDERING_SHARE, f"{share:.0%} of the ordering bound{hot}"))
    if f.server_cpu_share is not None:
        cpu = f.server_cpu_share
        levels.append(("server-cpu", cpu / SERVER_CPU_SHARE, f"server CPU {cpu:.0%} of its cores"))
    if f.client_core_share is not None:
        own = f.client_core_share
        levels.append(("client-cpu", own / CLIENT_CORE_SHARE, f"the tool's CPU {own:.0%} of a core"))
    levels.sort(key=lambda level: -level[1])
    said = ", ".join(text for _, _, text in levels)
    if f.offered_per_s is not None and f.kept_up:
        return Limit(
            "none", f"the offered {f.offered_per_s:g}/s was served below every limit ({said})", profile, None
        )
    return Limit(
        levels[0][0],
        f"nearest its limit, none reached ({said}): idle workers asleep between polls, a short run,"
        " or cores shared by client and server may have held the rest back",
        profile,
        None,
    )


Found = tuple[str, str, str] | None


def _client(f: Figures) -> Found:
    share = f.client_core_share
    if share is None or share < CLIENT_CORE_SHARE:
        return None
    return (
        "client-cpu",
        f"the tool's busiest process used {share:.0%} of a core: the client set the pace, not the queue",
        "measure the queue with more worker processes (--processes N) or a client host of its own"
        " (--master/--worker)",
    )


def _policy(f: Figures) -> Found:
    """A server policy (a timeout of the role, the database or the server) that ended 5% or more of
    the messages' attempts: the run's pace is the policy's, and it is no outage."""
    if not f.policies or not f.elapsed_s:
        return None
    processed = f.achieved_per_s * f.elapsed_s
    top = f.policies[0]
    ended = sum(p.count for p in f.policies)
    share = top.count / (processed + ended)
    if share < POLICY_SHARE:
        return None
    evidence = "; ".join(p.evidence() for p in f.policies)
    evidence += f"; {processed:.0f} message(s) processed: {share:.0%} of the attempts ended by {top.setting}"
    return "server-policy", evidence, top.fix


def _outage(f: Figures) -> Found:
    """The path down 5% of the run or more, whether the run injected the fault or met it: the
    throughput is then the outage's, not the queue's (an outage makes every later figure a symptom:
    idle workers, a producer behind, clients waiting at the pooler)."""
    spans = sorted((x.at_s, x.at_s + x.outage_s) for x in f.faults if x.outage_s and not x.count)
    repeated = sum(x.outage_s or 0.0 for x in f.faults if x.count)  # one cause's outages, apart
    if not (spans or repeated) or not f.elapsed_s:
        return None
    down, reach = repeated, 0.0
    for a, b in spans:  # their union: two faults may share one pause
        down += max(0.0, b - max(a, reach))
        reach = max(reach, b)
    share = down / f.elapsed_s
    if share < OUTAGE_SHARE:
        return None
    said = []
    for x in sorted((x for x in f.faults if x.outage_s), key=lambda x: -(x.outage_s or 0))[:3]:
        what = f"{x.kind} {x.when()} out {x.outage_s:.1f} s" + (" in all" if x.count else "")
        what += ", not recovered by the end of the run" if x.open_at_end else ""
        what += f" ({x.detail})" if x.kind == MET else ""
        said.append(what)
    evidence = f"the path was down {down:.1f} s of {f.elapsed_s:.0f} s ({share:.0%}): " + "; ".join(said)
    if f.arrived_share is not None and f.arrived_share < KEPT_UP:
        evidence += f"; the producer wrote {f.arrived_share:.0%} of the offered messages on time"
    if any(x.kind == MET for x in f.faults if x.outage_s):
        fix = (
            "the run met an outage it did not inject: its throughput is the outage's, not the queue's;"
            " find what took the path down at the time named, and measure again once it is steady"
        )
    else:
        fix = (
            "the injected faults' outages set the throughput: judge the queue's capacity from a run"
            " without them, and the faults by their outage and recovery"
        )
    return "outage", evidence, fix


def _pool(f: Figures) -> Found:
    if not f.pooled:
        return None
    servers = f.pool_servers
    if f.pool_wait_share is not None:
        if f.pool_wait_share < POOL_WAIT_SHARE:
            return None
        evidence = (
            f"the workers spent {f.pool_wait_share:.0%} of their time waiting for a server connection"
            " (the pooler's console)"
        )
    else:  # without the console: a claim slow beside its completion, more workers than connections
        if servers is None or servers >= f.workers or f.claim_ms is None or f.complete_ms is None:
            return None
        if f.claim_ms < 2 * f.complete_ms or f.claim_ms < 0.5 * f.work_ms:
            return None
        evidence = (
            f"{f.workers} workers shared at most {servers} server connections, and the claim p50"
            f" {f.claim_ms:.1f} ms is mostly the wait for one (completion p50 {f.complete_ms:.1f} ms)"
        )
    share = f.pool_wait_share
    if share is None:  # without the console: the claim's excess over a completion is the wait
        claim, complete = f.claim_ms or 0.0, f.complete_ms or 0.0
        share = max(0.0, claim - complete) / max(1e-9, claim + f.work_ms + complete)
    want = min(f.workers, max((servers or 1) + 1, math.ceil((servers or 1) / max(0.05, 1 - share))))
    cap = 2 * f.server_cores if f.server_cores else None
    if cap is not None and want > cap:
        return (
            "pool",
            evidence,
            f"the pool is as large as the server's {f.server_cores} cores serve well: run {cap} workers",
        )
    return (
        "pool",
        evidence,
        f"raise the pooler's pool size to about {want} (server connections seen: {servers or '?'})",
    )


def _claim_plan(f: Figures) -> Found:
    """A claim that scans, where it held the run back: not in a paced run that kept up with its rate
    (a snapshot that keeps vacuum from removing dead tuples makes any claim read more; the advice
    names that snapshot)."""
    blocks = f.blocks_per_msg
    if blocks is None or blocks < CLAIM_BLOCKS or f.claim_ms is None:
        return None
    if f.offered_per_s is not None and f.kept_up:
        return None
    if f.complete_ms is not None and f.claim_ms < 2 * f.complete_ms:
        return None
    fix = (
        "try -claim indexed, which reads only each group's head"
        if f.strategy == "seed"
        else "check the claim's plan with EXPLAIN"
    )
    return (
        "claim-plan",
        f"the server read {blocks:.0f} buffers per message and the claim p50 is {f.claim_ms:.1f} ms:"
        " the claim scans the backlog",
        fix,
    )


WAL_FLUSH = (
    "commits waited for the WAL flush (IO: WALSync, LWLock: WALWrite)",
    "a faster WAL device, or synchronous_commit = off for the queue's transactions where losing the"
    " last commits on a crash is acceptable; more workers only queue on the flush",
)
BLOCKERS_NAMED = 2  # the blockers an evidence names, most samples first
SKIPPING_CLAIMS = ("indexed", "advisory")  # strategies whose claim skips what another worker holds


def _wait_share(f: Figures, name: str) -> float | None:
    """The class's share of the backends' time in a transaction, where enough samples judge it."""
    if f.waits is None or f.waits.busy < MIN_WAIT_SAMPLES or f.waits.share(name) < WAIT_SHARE:
        return None
    return f.waits.share(name)


def _locks(f: Figures) -> Found:
    """What was measured: the lock events, and who held what; the fix follows from whose lock it is."""
    share = _wait_share(f, "locks")
    if share is None or f.waits is None:
        return None
    waits = f.waits
    evidence = f"the backends waited on locks {share:.0%} of their time in a transaction"
    if waits.lock_events:
        evidence += f" ({waits.lock_text()})"
    named = waits.blocker_samples
    foreign = [b for b in waits.blockers if not b.ours][:BLOCKERS_NAMED]
    own = [b for b in waits.blockers if b.ours]
    said = [f"{b.text()} in {b.samples / named:.0%} of the samples that named a blocker" for b in foreign]
    if own:
        share = sum(b.samples for b in own) / named
        said.append(f"{_own(own)} in {share:.0%} of the samples that named a blocker")
    evidence += ("; blocked by " + "; ".join(said)) if said else "; no sample named a blocking session"
    top = foreign[0] if foreign else None
    if top is not None and top.samples * 2 >= sum(b.samples for b in own):
        what = f"{top.mode} on {top.target}" if top.mode else f"a lock on {top.target}"
        return (
            "locks",
            evidence,
            f"a session outside the run holds {what}: pid {top.pid}"
            f" ({top.application or 'no application_name'}); end it or move it out of the queue's"
            " hours: no claim or worker setting gets past a lock another session holds",
        )
    rows = waits.row_lock_share() >= 0.5
    if rows and not f.claim_skips_locked:
        name, _, given = f.strategy.partition("+")
        if given:  # -next-msg replaced the strategy's claim, which skips them
            how = (
                f"add SKIP LOCKED to the -next-msg claim's FOR UPDATE, or drop -next-msg for the {name} claim"
            )
        else:
            others = [f"-claim {other}" for other in SKIPPING_CLAIMS if other != name]
            how = f"use a claim that skips locked rows ({' or '.join(others)})"
        return "locks", evidence, f"claims queue behind each other's row locks: {how}"
    if own:  # the run's own sessions: the claim is not the cause, the holders are named
        remains = f"{_own(own)} ({waits.lock_text() or 'Lock'})"
    else:
        remains = f"{waits.lock_text() or 'Lock'} waits whose holder no sample named"
    lead = (
        "the claim already skips locked rows, so claims do not queue behind each other; "
        if f.claim_skips_locked
        else ""
    )
    return (
        "locks",
        evidence,
        f"{lead}what remains is {remains}: find the statement that takes it (pg_locks, the run's log)",
    )


def _own(blockers: list[BlockerSeen]) -> str:
    """The run's own blocking sessions in one phrase: how many, which, and what they held most."""
    names = sorted({b.application or f"pid {b.pid}" for b in blockers})
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    top = blockers[0]  # most samples first
    what = f"holding {top.mode} on {top.target}" if top.mode else f"ahead in the queue for {top.target}"
    return f"the run's own sessions ({shown}) {what}"


def _wal(f: Figures) -> Found:
    share = _wait_share(f, "wal-flush")
    if share is None:
        return None
    what, fix = WAL_FLUSH
    return "wal-flush", f"{what} {share:.0%} of the backends' time in a transaction", fix


def _server_cpu(f: Figures) -> Found:
    share = f.server_cpu_share
    if share is None or share < SERVER_CPU_SHARE:
        return None
    return (
        "server-cpu",
        f"the server's processes used {share:.0%} of its {f.server_cores} cores",
        "the server's CPU is the limit: a cheaper claim, fewer connections in flight, or more cores;"
        " more workers will not help",
    )


def _ordering(f: Figures) -> Found:
    bound = f.ordering_bound_per_s
    if not bound or f.achieved_per_s < ORDERING_SHARE * bound:  # no bound (none measured, or zero)
        return None
    return (
        "ordering",
        f"{f.achieved_per_s:.0f}/s is {f.achieved_per_s / bound:.0%} of the ordering bound {bound:.0f}/s:"
        " each group takes one message at a time, and the busiest group sets the pace"
        + (f" ({f.hot_group})" if f.hot_group else ""),
        "more workers cannot help: spread the keys (more -orders, or split the hot key), or shorten the work",
    )


def _workers(f: Figures) -> Found:
    if f.busy < WORKERS_BUSY:
        return None
    evidence = f"the workers were busy {f.busy:.0%} of the time"
    if f.service_ms:
        evidence += f" ({f.service_ms:.1f} ms per message each: work, claim and completion)"
    # what more workers could use: a group takes one worker at a time, a worker needs a connection
    caps = []
    if f.spare_connections is not None:
        caps.append((f.workers + max(0, f.spare_connections), "all the connections the server allows"))
    if f.groups is not None:
        caps.append((f.groups, "one per group (a group takes one worker at a time)"))
    cap, why = min(caps) if caps else (None, "")
    if cap is not None and cap <= f.workers:
        if f.spare_connections is not None and f.spare_connections <= 0:
            fix = (
                f"the server and the role allow no more connections than these {f.workers} workers and"
                " the tool's own: raise max_connections (or the role's CONNECTION LIMIT), or put a pooler in"
                " front, before adding workers"
            )
        else:
            fix = (
                f"each of the {f.groups} groups has a worker already: more would wait for a group; spread"
                " the keys (more -orders), or shorten the work"
            )
        return ("workers", evidence, fix)
    target = f.offered_per_s if f.offered_per_s and not f.kept_up else None
    if target and f.service_ms:
        want = max(f.workers + 1, math.ceil(target * f.service_ms / 1000 / 0.8))  # 80% busy: bursts
        fix = f"add workers: about {want} serve {target:g}/s at 80% busy"
        if cap is not None and want > cap:
            fix = f"add workers up to {cap}, {why} (about {want} would serve {target:g}/s at 80% busy)"
            if f.spare_connections is not None and cap == f.workers + f.spare_connections:
                fix += ": raise max_connections, or put a pooler in front"
        return ("workers", evidence, fix)
    fix = f"add workers: each adds about {1000 / f.service_ms:.0f}/s" if f.service_ms else "add workers"
    return ("workers", evidence, fix + (f", up to {cap}, {why}" if cap is not None else ""))


def _producer(f: Figures) -> Found:
    if f.arrived_share is None or f.arrived_share >= KEPT_UP:
        return None
    return (
        "producer",
        f"the producer wrote {f.arrived_share:.0%} of the offered messages on time: the offered rate"
        " was not offered",
        "the producer set the pace: measure a higher rate with more producer throughput (a client host"
        " of its own), or take the achieved rate as the offered one",
    )


def server_cpu(cpu_s: float | None, seconds: float) -> tuple[float | None, int | None]:
    """The server's share of its cores, and its cores, where its CPU is read (the embedded server,
    on this machine)."""
    cores = os.cpu_count() if cpu_s is not None else None
    return (cpu_s / seconds / cores if cpu_s is not None and cores else None), cores


def run_figures(r: RunResult) -> Figures:
    """A whole run's figures, from its result."""
    elapsed, workers = max(r.elapsed_s, 1e-9), max(1, len(r.workers))
    busy = sum(w.busy_share for w in r.workers) / workers
    claim, complete, work = r.claim_ms["p50"], r.complete_ms["p50"], r.work_mean_ms
    offered = arrived_share = None
    kept_up = False
    producer = r.producer
    if r.settings.paced and r.sweep is None and producer is not None:
        constant = r.settings.rate if r.settings.rate and not r.settings.rate_profile else None
        offered, arrived_share = constant or producer.offered / elapsed, producer.on_time_share
        backlog = r.timeline[-1].backlog if r.timeline else 0
        kept_up = arrived_share >= KEPT_UP and backlog <= max(2 * offered, 2 * workers)
    cost = r.server_cost
    cpu_share, cores = server_cpu(cost.cpu_s if cost else None, elapsed)
    busiest = r.client.busiest
    hot = None
    if r.keys is not None and r.keys.hottest and r.keys.hot_share and r.groups:
        group = r.keys.hottest[0]
        if r.keys.hot_share >= 2 / r.groups:  # twice an even share: a hot key
            share = r.keys.hot_share
            hot = f"group ({group.queue_type}, order_id {group.order_id}) has {share:.0%} of the messages"
    return Figures(
        workers=workers,
        achieved_per_s=r.throughput_per_s,
        offered_per_s=offered,
        arrived_share=arrived_share,
        kept_up=kept_up,
        busy=busy,
        service_ms=busy * workers * elapsed / r.processed * 1000 if r.processed else None,
        ordering_bound_per_s=r.ordering_bound_per_s,
        groups=r.groups or None,
        waits=r.waits,
        pooled=r.path is not None and r.path.pooled,
        pool_wait_share=r.pooler.waited_s / (workers * elapsed) if r.pooler else None,
        pool_servers=r.pooler.servers_active_max if r.pooler else r.worker_backends_max,
        claim_ms=claim,
        complete_ms=complete,
        work_ms=work,
        server_cpu_share=cpu_share,
        server_cores=cores,
        client_core_share=busiest.core_share if busiest else None,
        blocks_per_msg=cost.blocks_per_msg if cost else None,
        strategy=r.strategy,
        hot_group=hot,
        spare_connections=r.spare_connections,
        claim_skips_locked=r.claim_skips_locked,
        faults=r.faults,
        elapsed_s=r.elapsed_s,
        policies=policies_met(r.server_reasons, r.timeouts, run_shape(r.settings, r.claim_skips_locked)),
    )


def run_limit(r: RunResult) -> Limit:
    return judge(run_figures(r))


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
