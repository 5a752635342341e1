"""The figures a limit is judged from, for a whole run or a sweep's step: throughput against the
offered rate, the workers' busy time, the server's wait profile, the pooler's waits, CPU on both
sides, the claim's reads, the faults, and a whole run's latency account with what hid its
messages."""

from __future__ import annotations

import os
from dataclasses import dataclass

from pgmq_sim.model.events import Fault
from pgmq_sim.model.kinds import WakeupMode
from pgmq_sim.result.account import CohortSplit
from pgmq_sim.result.enqueues import EnqueueAccount
from pgmq_sim.result.holders import HolderSeen
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.waits import WaitProfile
from pgmq_sim.verdicts.hidden import HiddenAccount, hidden_account
from pgmq_sim.verdicts.policies import PolicyMet, policies_met, run_shape

KEPT_UP = 0.95  # of the offered rate
LOGIN_FAILING = ("server_login_retry", "server login has been failing")  # PgBouncer's, refused by the server


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
    pool_server_room: int | None = None  # pooled: the slots left the pooler, its own included
    slots: str = ""  # pooled: the server's max_connections and who held its slots before the run
    pooler_refused: str = ""  # the run's note of the pooler's own word that its server login failed
    claim_skips_locked: bool = False  # the claim passes over locked rows instead of waiting for them
    faults: tuple[Fault, ...] = ()  # injected or met, with their outages measured (a whole run's)
    elapsed_s: float | None = None
    p99: CohortSplit | None = None  # the latency account of the run's slowest 1% (a whole run's)
    hidden: HiddenAccount | None = None  # what hid messages from free workers, explained
    holders: tuple[HolderSeen, ...] = ()  # sessions outside the run the lock census saw holding locks
    policies: tuple[PolicyMet, ...] = ()  # the server's policies met, most often first (a whole run's)
    enqueue: EnqueueAccount | None = None  # the enqueues made while the workers ran (a whole run's)
    notifies: bool = False  # the run's wake-up notifies (its own notifications)


def server_cpu(cpu_s: float | None, seconds: float) -> tuple[float | None, int | None]:
    """The server's share of its cores, and its cores, where its CPU is read (the embedded server,
    on this machine)."""
    cores = os.cpu_count() if cpu_s is not None else None
    return (cpu_s / seconds / cores if cpu_s is not None and cores else None), cores


def _slots(r: RunResult) -> str:
    """e.g. 'max_connections = 12; 10 client session(s): 10 by application 'hog' as role bob' ('' unread)."""
    if r.census is None:
        return ""
    return f"{r.census.said('max_connections')}; {r.census.slots.said()}"


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
        pool_server_room=r.pool_server_room,
        slots=_slots(r),
        pooler_refused=next((n for n in r.notes if any(w in n for w in LOGIN_FAILING)), ""),
        claim_skips_locked=r.claim_skips_locked,
        faults=r.faults,
        elapsed_s=r.elapsed_s,
        p99=r.latency.p99 if r.latency else None,
        hidden=hidden_account(r),
        holders=r.locks.holders if r.locks else (),
        policies=policies_met(r.server_reasons, r.timeouts, run_shape(r.settings, r.claim_skips_locked)),
        enqueue=r.enqueue,
        notifies=r.settings.wakeup == WakeupMode.NOTIFY,
    )
