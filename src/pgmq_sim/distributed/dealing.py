"""Which worker process runs which workers, and the plan each is sent: the master deals w1..wN in
contiguous blocks, so a process has every queue type once it has three workers or more; in a spread
run (distributed/producing), the -producers sessions too."""

from __future__ import annotations

import random
from dataclasses import asdict

from locust.runners import MasterRunner

from pgmq_sim.actors.worker import Assignment
from pgmq_sim.distributed import messages as m
from pgmq_sim.distributed.members import Member
from pgmq_sim.distributed.producing import deal_producers, kept_on_master, spreads
from pgmq_sim.engine.state import RunState
from pgmq_sim.errors import UsageError


def deal_workers(state: RunState, master: MasterRunner, members: list[Member], web: bool) -> None:
    """Contiguous blocks of w1..wN: losing one process rarely leaves a type without a worker."""
    settings, count = state.settings, len(members)
    if settings.workers < count:
        raise UsageError(f"-workers {settings.workers} is fewer than the {count} worker processes; give more")
    assert state.runners is not None and state.preflight is not None
    seeds = random.Random(state.rng.random())
    session = asdict(state.preflight.session)
    producing = deal_producers(state, count) if spreads(state, count) else [None] * count
    kept = kept_on_master(state) if settings.paced else None
    if kept is not None:
        state.note(f"the producer sessions stay on the master, not spread over the processes: {kept}")
    for r, member in enumerate(members):
        member.producing = share = producing[r]
        member.runner = f"p{r + 1}@{member.hello.host}"
        first, last = r * settings.workers // count, (r + 1) * settings.workers // count
        assignments = [Assignment(s.name, s.queue_type, seeds.random()) for s in state.stats[first:last]]
        member.names = [a.name for a in assignments]
        state.runners[first:last] = [member.runner] * (last - first)
        own = member.hello.own_dsn is not None
        plan = m.Plan(
            runner=member.runner,
            settings=settings.as_json(),
            session=session,
            dsn=None if own else state.server.dsn,
            listen_dsn=settings.listen_dsn,
            workers=assignments,
            logfile=numbered(settings.logfile, r + 1),
            fire_requests=web,
            producing=share.as_data() if share is not None else None,
        )
        source = f"its own PGMQ_SIM_DSN {member.hello.own_dsn}" if own else "sent by the master"
        state.log.event(
            f"worker process {member.runner} (pid {member.hello.pid}): {', '.join(member.names)};"
            f" database {source}"
            + (
                f"; producer sessions {share.sessions} (share {share.share + 1} of {share.shares})"
                if share
                else ""
            )
        )
        master.send_message(m.PLAN, plan.as_data(), client_id=member.client_id)


def numbered(name: str, number: int) -> str:
    """msg_queue.log -> msg_queue.p1.log: one log per worker process, beside the master's."""
    if name == "-":
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or "/" in suffix:
        return f"{name}.p{number}"
    return f"{stem}.p{number}.{suffix}"
