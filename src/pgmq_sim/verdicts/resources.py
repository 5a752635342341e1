"""Each resource's check: the figures read against the resource's limit (a threshold below which it
is not what bounds the run), its evidence in words, and the one fix that follows from it. A check
returns None when its resource did not bound the run."""

from __future__ import annotations

import math

from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.quantities import count_text, ms_text, seconds_text
from pgmq_sim.result.costs import ClientCost
from pgmq_sim.result.waits import BlockerSeen
from pgmq_sim.verdicts.cause import (
    MORE_WORKERS_CANNOT,
    SEED_CLAIM_FIX,
    MeasuredCause,
    Resource,
    foreign_holder_fix,
    notify_fix,
)
from pgmq_sim.verdicts.enqueue import enqueue_cause
from pgmq_sim.verdicts.figures import KEPT_UP, Figures
from pgmq_sim.verdicts.lock_holders import blocker_text, held_text, holder_text, notify_lock_note
from pgmq_sim.verdicts.outages import HELD, MET
from pgmq_sim.verdicts.server_waits import lock_text, other_text

WORKERS_BUSY = 0.85  # the workers' mean busy share at which more work could not be taken (a run's
# start and a drained queue's tail lower the mean of workers that were saturated)
ORDERING_SHARE = 0.8  # of the ordering bound, with each message's claim and completion (at p50)
WAIT_SHARE = 0.25  # of the backends' time in a transaction
MIN_WAIT_SAMPLES = 100  # backend-samples in a transaction: fewer are too few to judge a share by
POOL_WAIT_SHARE = 0.2  # of the workers' time, waiting for a server connection
SERVER_CPU_SHARE = 0.85  # of the server's cores
CLAIM_BLOCKS = 200  # buffers read per message: a claim that scans, not one that seeks
CLIENT_CORE_SHARE = 0.9  # of a core, the busiest client process's (one GIL per process)
CLIENT_LIMIT_SHARE = 0.85  # of a core: a Python process this busy is its own limit (one GIL)
OUTAGE_SHARE = 0.05  # of the run's time, the path down: the outage, not the queue, set the pace
POLICY_SHARE = 0.05  # of the messages' attempts, sessions a server policy ended: the policy set the pace

Found = MeasuredCause | None  # None: the resource did not bound the run


def client_limited(client: ClientCost) -> bool:
    """A client process near a full core: with one GIL per process it cannot go faster."""
    busiest = client.busiest
    return busiest is not None and busiest.core_share >= CLIENT_LIMIT_SHARE


def client_cpu(f: Figures) -> Found:
    share = f.client_core_share
    if share is None or share < CLIENT_CORE_SHARE:
        return None
    return MeasuredCause(
        Resource.CLIENT_CPU,
        f"the tool's busiest process used {share:.0%} of a core: the client set the pace, not the queue",
        "measure the queue with more worker processes (--processes N) or a client host of its own"
        " (--master/--worker)",
    )


def server_policy(f: Figures) -> Found:
    """A server policy (a timeout of the role, the database or the server) that ended the sessions of
    5% or more of the messages' attempts: the run's pace is the policy's, and it is no outage. A
    statement or lock timeout is evidence of what made the statements wait (a lock, a scan), which
    the other checks name; its rows say the setting."""
    ended = [p for p in f.policies if p.met.lost]
    if not ended or not f.elapsed_s:
        return None
    processed = f.achieved_per_s * f.elapsed_s
    top = ended[0]
    share = top.count / (processed + sum(p.count for p in ended))
    if share < POLICY_SHARE:
        return None
    evidence = "; ".join(p.evidence() for p in f.policies)
    evidence += (
        f"; {count_text(round(processed))} message(s) processed: {share:.0%} of the attempts ended by"
        f" {top.setting}"
    )
    return MeasuredCause(Resource.SERVER_POLICY, evidence, top.fix)


def outage(f: Figures) -> Found:
    """The path down 5% of the run or more, whether the run injected the fault or met it: the
    throughput is then the outage's, not the queue's (an outage makes every later figure a symptom:
    idle workers, a producer behind, clients waiting at the pooler)."""
    faults = [x for x in f.faults if x.outage_s and x.kind != HELD]  # a lock held is read as a lock
    spans = sorted((x.at_s, x.at_s + (x.outage_s or 0.0)) for x in faults if not x.count)
    repeated = sum(x.outage_s or 0.0 for x in faults if x.count)  # one cause's outages, apart
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
    for x in sorted(faults, key=lambda x: -(x.outage_s or 0))[:3]:
        what = f"{x.kind} {x.when()} out {seconds_text(x.outage_s or 0)}" + (" in all" if x.count else "")
        what += ", not recovered by the end of the run" if x.open_at_end else ""
        what += f" ({x.detail})" if x.kind == MET else ""
        said.append(what)
    evidence = (
        f"the path was down {seconds_text(down)} of {seconds_text(f.elapsed_s)} ({share:.0%}): "
        + "; ".join(said)
    )
    if f.arrived_share is not None and f.arrived_share < KEPT_UP:
        evidence += f"; the producer wrote {f.arrived_share:.0%} of the offered messages on time"
    if any(x.kind == MET for x in faults):
        fix = (
            "the run met an outage it did not inject: its throughput is the outage's, not the queue's;"
            " find what took the path down at the time named, and measure again once it is steady"
        )
    else:
        fix = (
            "the injected faults' outages set the throughput: judge the queue's capacity from a run"
            " without them, and the faults by their outage and recovery"
        )
    return MeasuredCause(Resource.OUTAGE, evidence, fix)


def _pool(f: Figures) -> Found:
    if not f.pooled:
        return None
    servers = f.pool_servers or None  # none seen is not observed: a pulse may miss them all
    seen = (
        f"at most {count_text(servers)} server connections"
        if servers
        else "server connections (not observed)"
    )
    if f.pool_wait_share is not None:
        if f.pool_wait_share < POOL_WAIT_SHARE:
            return None
        evidence = (
            f"the workers spent {f.pool_wait_share:.0%} of their time waiting for a server connection"
            " (the pooler's console)"
        )
    else:  # without the console: a claim slow beside its completion, more workers than connections
        if (
            f.pool_servers is None
            or (servers or 0) >= f.workers
            or f.claim_ms is None
            or f.complete_ms is None
        ):
            return None
        if f.claim_ms < 2 * f.complete_ms or f.claim_ms < 0.5 * f.work_ms:
            return None
        evidence = (
            f"{count_text(f.workers)} workers shared {seen}, and the claim p50"
            f" {ms_text(f.claim_ms)} is mostly the wait for one (completion p50 {ms_text(f.complete_ms)})"
        )
    refused = _slots_refused(f, seen, evidence)
    if refused is not None:
        return refused
    share = f.pool_wait_share
    if share is None:  # without the console: the claim's excess over a completion is the wait
        claim, complete = f.claim_ms or 0.0, f.complete_ms or 0.0
        share = max(0.0, claim - complete) / max(1e-9, claim + f.work_ms + complete)
    want = min(f.workers, max((servers or 1) + 1, math.ceil((servers or 1) / max(0.05, 1 - share))))
    cap = 2 * f.server_cores if f.server_cores else None
    if cap is not None and want > cap:
        return MeasuredCause(
            Resource.POOL,
            evidence,
            f"the pool is as large as the server's {f.server_cores} cores serve well: run {count_text(cap)}"
            " workers",
        )
    return MeasuredCause(
        Resource.POOL,
        evidence,
        f"raise the pooler's pool size to about {want}"
        f" (server connections seen: {servers or 'not observed'})",
    )


def _slots_refused(f: Figures, seen: str, evidence: str) -> Found:
    """The pooler could not open the server connections its pool allows: the server's slots were
    taken (fewer were left for the pooler than the run's workers), or the pooler said its login to
    the server failed. The fix is the slots, never the pool's size, which the pooler could not fill."""
    room = f.pool_server_room  # with the pooler's connection that asked (the budget leaves it out)
    short = room is not None and room < f.workers
    if not short and not f.pooler_refused:
        return None
    said = []
    if short and room is not None:
        said.append(f"{count_text(room)} slot(s) were left for the pooler when the run began")
    said += [f"the pooler said: {f.pooler_refused}"] if f.pooler_refused else []
    held = f"; {f.slots}" if f.slots else ""
    return MeasuredCause(
        Resource.POOL,
        f"{evidence}; the pooler held {seen} for {count_text(f.workers)} workers, and the server refused it"
        " more:"
        f" {'; '.join(said)}{held}",
        "the server's connection slots are taken, not the pool: reserve slots for the pooler's role"
        " (reserved_connections with pg_use_reserved_connections, PostgreSQL 16+, or a CONNECTION LIMIT"
        " on what holds them), or shrink what holds them; a larger pool cannot be filled",
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
    fix = SEED_CLAIM_FIX if f.strategy == "seed" else "check the claim's plan with EXPLAIN"
    return MeasuredCause(
        Resource.CLAIM_PLAN,
        f"the server read {blocks:.0f} buffers per message and the claim p50 is {ms_text(f.claim_ms)}:"
        " the claim scans the backlog",
        fix,
    )


WAL_FLUSH = (
    "commits waited for the WAL flush (IO: WALSync, LWLock: WALWrite)",
    "a faster WAL device, or synchronous_commit = off for the queue's transactions where losing the"
    " last commits on a crash is acceptable; more workers only queue on the flush",
)
BLOCKERS_NAMED = 2  # the blockers an evidence names, most samples first
# the built-in claims a fix for row-lock queues names: every built-in claim skips locked rows (read
# from its SQL by designs/design.skips_locked; tests/test_designs.py holds it), these two also read
# only each group's head or take a lock no other claim waits for
SUGGESTED_CLAIMS = ("indexed", "advisory")


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
        evidence += f" ({lock_text(waits)})"
    named = waits.blocker_samples
    foreign = [b for b in waits.blockers if not b.ours][:BLOCKERS_NAMED]
    own = [b for b in waits.blockers if b.ours]
    said = [
        f"{blocker_text(b)} in {b.samples / named:.0%} of the samples that named a blocker" for b in foreign
    ]
    if own:
        share = sum(b.samples for b in own) / named
        said.append(f"{_own(own)} in {share:.0%} of the samples that named a blocker")
    evidence += ("; blocked by " + "; ".join(said)) if said else "; no sample named a blocking session"
    notifying = sum(b.samples for b in waits.blockers if b.target == NOTIFY_QUEUE)
    if notifying * 2 >= named > 0:  # the notification queue's lock: whoever holds it, every notifier's
        return MeasuredCause(
            Resource.LOCKS, evidence + notify_lock_note(NOTIFY_QUEUE), notify_fix(f.notifies)
        )
    top = foreign[0] if foreign else None
    if top is not None and top.samples * 2 >= sum(b.samples for b in own):
        what = f"{top.mode} on {top.target}" if top.mode else f"a lock on {top.target}"
        return MeasuredCause(
            Resource.LOCKS,
            evidence,
            foreign_holder_fix(top.pid, top.application, what, "the claims wait for it"),
        )
    rows = waits.row_lock_share() >= 0.5
    if rows and not f.claim_skips_locked:
        name, _, given = f.strategy.partition("+")
        if given:  # -next-msg replaced the strategy's claim, which skips them
            how = (
                f"add SKIP LOCKED to the -next-msg claim's FOR UPDATE, or drop -next-msg for the {name} claim"
            )
        else:
            others = [f"-claim {other}" for other in SUGGESTED_CLAIMS if other != name]
            how = f"use a claim that skips locked rows ({' or '.join(others)})"
        return MeasuredCause(Resource.LOCKS, evidence, f"claims queue behind each other's row locks: {how}")
    if own:  # the run's own sessions: the claim is not the cause, the holders are named
        remains = f"{_own(own)} ({lock_text(waits) or 'Lock'})"
    else:
        remains = f"{lock_text(waits) or 'Lock'} waits whose holder no sample named"
    lead = (
        "the claim already skips locked rows, so claims do not queue behind each other; "
        if f.claim_skips_locked
        else ""
    )
    return MeasuredCause(
        Resource.LOCKS,
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
    if share is None or (f.waits is not None and f.waits.share("other") > share):
        return None  # a larger wait of another kind (server_waits) is what held the commits up
    what, fix = WAL_FLUSH
    return MeasuredCause(
        Resource.WAL_FLUSH, f"{what} {share:.0%} of the backends' time in a transaction", fix
    )


def _server_waits(f: Figures) -> Found:
    """The statements' server time waiting on something not a lock, the WAL or IO (a trigger's or a
    function's sleep, IPC, an extension): named by its wait event."""
    share = _wait_share(f, "other")
    if share is None or f.waits is None:
        return None
    events = other_text(f.waits) or "waits not named"
    top = events.split(" ", 1)[0]
    return MeasuredCause(
        Resource.SERVER_WAITS,
        f"the backends spent {share:.0%} of their time in a transaction waiting on {events}: not a lock,"
        " the WAL or the disk",
        f"find what the queue's statements run that waits on {top}: a trigger or a function on the queue's"
        " tables, an extension, a synchronous replica (IPC:SyncRep): pg_stat_statements and"
        " pg_stat_user_functions (track_functions) show where their time goes",
    )


def _server_cpu(f: Figures) -> Found:
    share = f.server_cpu_share
    if share is None or share < SERVER_CPU_SHARE:
        return None
    return MeasuredCause(
        Resource.SERVER_CPU,
        f"the server's processes used {share:.0%} of its {f.server_cores} cores",
        "the server's CPU is the limit: a cheaper claim, fewer connections in flight, or more cores;"
        " more workers will not help",
    )


def ordering(f: Figures) -> Found:
    bound = f.ordering_bound_per_s
    if not bound or f.achieved_per_s < ORDERING_SHARE * bound:  # no bound (none measured, or zero)
        return None
    return MeasuredCause(
        Resource.ORDERING,
        f"{f.achieved_per_s:.0f}/s is {f.achieved_per_s / bound:.0%} of the ordering bound {bound:.0f}/s:"
        " each group takes one message at a time, and the busiest group sets the pace"
        + (f" ({f.hot_group})" if f.hot_group else ""),
        MORE_WORKERS_CANNOT,
    )


def _workers(f: Figures) -> Found:
    if f.busy < WORKERS_BUSY:
        return None
    evidence = f"the workers were busy {f.busy:.0%} of the time"
    if f.service_ms:
        evidence += f" ({ms_text(f.service_ms)} per message each: work, claim and completion)"
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
                "the server and the role allow no more connections than these"
                f" {count_text(f.workers)} workers and the tool's own: raise max_connections (or the role's"
                " CONNECTION LIMIT), or put a pooler in front, before adding workers"
            )
        else:  # the groups' cap: the connections' is above the workers
            fix = (
                f"each of the {count_text(cap)} groups has a worker already: more would wait for a"
                " group; spread the keys (more -orders), or shorten the work"
            )
        return MeasuredCause(Resource.WORKERS, evidence, fix)
    target = f.offered_per_s if f.offered_per_s and not f.kept_up else None
    if target and f.service_ms:
        want = max(f.workers + 1, math.ceil(target * f.service_ms / 1000 / 0.8))  # 80% busy: bursts
        fix = f"add workers: about {count_text(want)} serve {target:g}/s at 80% busy"
        if cap is not None and want > cap:
            fix = (
                f"add workers up to {count_text(cap)}, {why} (about {count_text(want)} would serve"
                f" {target:g}/s at 80% busy)"
            )
            if f.spare_connections is not None and cap == f.workers + f.spare_connections:
                fix += ": raise max_connections, or put a pooler in front"
        return MeasuredCause(Resource.WORKERS, evidence, fix)
    fix = f"add workers: each adds about {1000 / f.service_ms:.0f}/s" if f.service_ms else "add workers"
    return MeasuredCause(
        Resource.WORKERS, evidence, fix + (f", up to {count_text(cap)}, {why}" if cap is not None else "")
    )


def producer_held(f: Figures) -> Found:
    """The producer fell behind its rate while a session outside the run held a lock it waited for:
    the offered rate was not offered, and the lock, not the queue, is why."""
    if f.arrived_share is None or f.arrived_share >= KEPT_UP:
        return None
    holder = next((h for h in f.holders if "producer" in h.blocked), None)
    if holder is None:
        return None
    p99 = f.enqueue.latency_ms["p99"] if f.enqueue is not None else None
    waited = f" (enqueue p99 {ms_text(p99)})" if p99 is not None else ""
    return MeasuredCause(
        Resource.LOCKS,
        f"the producer wrote {f.arrived_share:.0%} of the offered messages on time{waited}:"
        f" {holder_text(holder)}",
        notify_fix(f.notifies)
        if holder.blocking_on == NOTIFY_QUEUE
        else foreign_holder_fix(
            holder.pid,
            holder.application,
            held_text(holder),
            "the producer's inserts wait for it (a lock on the queue, or a row a foreign key of the queue"
            " points to)",
        ),
    )


def _producer(f: Figures) -> Found:
    """The producer fell behind its rate: what its slowest enqueues waited for (the enqueue account),
    where it was measured."""
    if f.arrived_share is None or f.arrived_share >= KEPT_UP:
        return None
    if f.enqueue is not None:
        cause = enqueue_cause(f.enqueue, f.offered_per_s, f.groups, f.notifies)
        evidence = (
            f"the producer wrote {f.arrived_share:.0%} of the offered messages on time: {cause.evidence}"
        )
        return MeasuredCause(Resource.PRODUCER, evidence, cause.fix)
    return MeasuredCause(
        Resource.PRODUCER,
        f"the producer wrote {f.arrived_share:.0%} of the offered messages on time: the offered rate"
        " was not offered",
        "the producer set the pace: measure a higher rate with more producer throughput (a client host"
        " of its own), or take the achieved rate as the offered one",
    )


WAIT_JUDGES = (_locks, _wal, _server_waits)  # what the server's waits alone say (a stretch of a run)
CAPACITY = (_locks, _pool, _claim_plan, _wal, _server_waits, _server_cpu, ordering, _workers, _producer)
SERVICE = (_locks, _pool, _claim_plan, _wal, _server_waits, _server_cpu)  # what made the service itself slow
