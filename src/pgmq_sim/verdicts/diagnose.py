"""Why nothing moves: the stall diagnosis, read from what the queue and the server's views showed."""

from __future__ import annotations

import re

from pgmq_sim.model.facts import StallFacts
from pgmq_sim.model.quantities import count_text

STRING_LITERAL = re.compile(r"'(?:[^']|'')*'?")


def _session(pid: int, app: str, state: str, age: float, query: str, pooler: str | None = None) -> str:
    """Another session, named; string literals in its query are hidden (one may be a password)."""
    through = f"a server connection of the pooler at {pooler}, last serving " if pooler else ""
    if not state and not query:  # another role's session, to a role without pg_read_all_stats
        return (
            f"pid {pid} ({through}{app or 'no application_name'}; its state and query are hidden from this"
            f" role: pg_read_all_stats would show them); end that transaction or pg_terminate_backend({pid})"
        )
    query = STRING_LITERAL.sub("'…'", query)
    return (
        f"pid {pid} ({through}{app or 'no application_name'}, {state}, transaction open {age:.0f} s:"
        f" {query!r}); end that transaction or pg_terminate_backend({pid})"
    )


def explain_stall(
    facts: StallFacts,
    served_types: set[str],
    pooled: bool = False,
    producer_pids: frozenset[int] = frozenset(),
) -> list[str]:
    """Name what keeps the pending messages from being claimed (or, `producer_pids` among the
    sessions inspected, from being written), most specific first."""
    causes: list[str] = []
    # behind a pooler, every server connection comes from the pooler's address, as ours do
    poolers = {h[7] for h in facts.lock_holders if h[6] and h[7]} if pooled else set()

    def pooler(address: str) -> str | None:
        return address if address in poolers else None

    waiting: dict[tuple[int, str, str, float, str, str], list[str]] = {}
    for b in facts.blocked:
        blocker = (b.pid, b.application, b.state, b.xact_s, b.query, b.address)
        waiting.setdefault(blocker, []).append(str(b.waiter_pid))
    for (pid, app, state, age, query, address), waiting_pids in waiting.items():
        held = f"a lock held by {_session(pid, app, state, age, query, pooler(address))}"
        producers = [p for p in waiting_pids if int(p) in producer_pids]
        workers = [p for p in waiting_pids if int(p) not in producer_pids]
        if producers:
            causes.append(f"the producer's session pid {', '.join(producers)} waits on {held}")
        if workers:
            causes.append(f"worker session(s) pid {', '.join(workers)} wait on {held}")
    for queue_type, count in facts.pending_by_type:
        if queue_type not in served_types:
            causes.append(
                f"{count_text(count)} pending message(s) of type '{queue_type}' but no worker serves that"
                " type"
            )
    by_xid = {s[4]: s for s in facts.lock_holders if s[4]}
    for queue_type, order_id, msg_id, time_tied, xmax in facts.heads:
        if queue_type not in served_types:
            continue
        group = f"group ({queue_type}, order_id {order_id})"
        if msg_id not in facts.unlocked_heads:
            holder = by_xid.get(xmax)
            if holder is None:
                causes.append(
                    f"{group}: head msg_id {msg_id} is locked by a transaction that never commits"
                    + (" (a session this role cannot see)" if not facts.sees_all else "")
                )
            elif holder[6]:
                causes.append(
                    f"{group}: head msg_id {msg_id} is held by this run's worker pid {holder[0]},"
                    f" in its transaction for {holder[3]:.0f} s without committing"
                )
            else:
                pid, app, state, age, _, query, _, address = holder
                causes.append(
                    f"{group}: head msg_id {msg_id} is locked by another session, "
                    + _session(pid, app, state, age, query, pooler(address))
                )
        elif time_tied:
            causes.append(
                f"{group}: head msg_id {msg_id} shares its time_added with another pending message"
                " of the group, so the seed's claim query (time_added <=) never selects either;"
                " give messages distinct time_added"
            )
        else:
            causes.append(
                f"{group}: head msg_id {msg_id} is pending and unlocked but the claim query"
                " never selects it; check the claim SQL"
            )
    for pid, app, state, age, _, query, ours, address in facts.lock_holders:
        if not ours and age > 5 and not any(f"pid {pid} " in c for c in causes):
            causes.append(f"session {_session(pid, app, state, age, query, pooler(address))}")
    return causes
