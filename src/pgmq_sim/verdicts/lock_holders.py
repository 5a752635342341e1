"""A session seen holding or blocking locks (result/holders, result/waits), named in words for a
verdict's evidence: its pid, application, database and state, and what it held or waited ahead
for. Every verdict that names a lock's holder says it this way."""

from __future__ import annotations

from pgmq_sim.model.facts import NOTIFY_QUEUE
from pgmq_sim.model.identity import Whose
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.holders import HolderSeen
from pgmq_sim.result.waits import BlockerSeen


def notify_lock_note(target: str) -> str:
    """What a lock on the notification queue means, said wherever one is named."""
    if target != NOTIFY_QUEUE:
        return ""
    return " (every notifying commit on the server takes this lock, whatever its database)"


def held_text(h: HolderSeen) -> str:
    """e.g. '60 advisory locks', 'ExclusiveLock on msg_queue', '12 rows of the queue'."""
    said = []
    if h.advisory_max:
        said.append(f"{count_text(h.advisory_max)} advisory lock{'s' * (h.advisory_max != 1)}")
    if h.relation:
        said.append(h.relation)
    if h.rows_max:
        said.append(f"{count_text(h.rows_max)} row{'s' * (h.rows_max != 1)} of the queue")
    if h.blocked:
        on = f" on {h.blocking_on}" if h.blocking_on and h.blocking_on != h.relation else ""
        said.append(f"a lock{on} the run's {_sessions(h.blocked)} waited for")
    return ", ".join(said) + notify_lock_note(h.blocking_on)


def holder_text(h: HolderSeen) -> str:
    """e.g. 'pid 4242 (blocker; idle in transaction) held 60 advisory locks from 4.1 s to 29.0 s'."""
    where = f"in database {h.database}" if h.database else ""
    about = "; ".join(p for p in (h.application or "no application_name", where, h.state) if p)
    return f"pid {h.pid} ({about}) held {held_text(h)} from {h.first_s:.1f} s to {h.last_s:.1f} s"


def blocker_text(b: BlockerSeen) -> str:
    """e.g. pid 4242 (report job; outside the run; idle in transaction) holding ExclusiveLock
    on msg_queue."""
    pooled = b.application.endswith(Whose.POOL)  # model/identity said so in its name
    whose = "" if pooled else "the run's own" if b.ours else "outside the run"
    where = f"in database {b.database}" if b.database else ""
    about = "; ".join(p for p in (b.application or "no application_name", whose, where, b.state) if p)
    said = (
        f"pid {b.pid} ({about}) holding {b.mode} on {b.target}"
        if b.mode
        else f"pid {b.pid} ({about}) ahead in the queue for {b.target}"
    )
    return said + notify_lock_note(b.target)


def _sessions(names: str) -> str:
    """The run's sessions by their application names, in words: 'producer and 6 workers'."""
    roles = [n.removeprefix("pgmq-sim ") for n in names.split(", ") if n]
    workers = [r for r in roles if r[:1] == "w" and r[1:].isdigit()]
    said = [r for r in roles if r not in workers]
    if workers:
        said.append(workers[0] if len(workers) == 1 else f"{count_text(len(workers))} workers")
    return " and ".join(said)
