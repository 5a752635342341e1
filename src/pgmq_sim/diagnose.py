"""Why nothing moves: the stall diagnosis, read from the queue and the server's views."""

from __future__ import annotations

import re

import psycopg

from pgmq_sim.queue import QueueDatabase, StallFacts
from pgmq_sim.server import reason

STRING_LITERAL = re.compile(r"'(?:[^']|'')*'?")


def _session(pid: int, app: str, state: str, age: float, query: str) -> str:
    """Another session, named; string literals in its query are hidden (one may be a password)."""
    query = STRING_LITERAL.sub("'…'", query)
    return (
        f"pid {pid} ({app or 'no application_name'}, {state}, transaction open {age:.0f} s: {query!r});"
        f" end that transaction or pg_terminate_backend({pid})"
    )


def stall_causes(db: QueueDatabase, served_types: set[str], our_pids: list[int]) -> list[str]:
    """Name what keeps the pending messages from being claimed, most specific first."""
    try:
        facts = db.stall_facts(our_pids)
    except psycopg.Error as exc:
        return [f"could not inspect the queue: {reason(exc, db.dsn)}"]
    return explain_stall(facts, served_types) or ["no cause found in the queue or the server's lock views"]


def explain_stall(facts: StallFacts, served_types: set[str]) -> list[str]:
    causes: list[str] = []
    waiting: dict[tuple, list[str]] = {}
    for worker_pid, *blocker in facts.blocked:
        waiting.setdefault(tuple(blocker), []).append(str(worker_pid))
    for (pid, app, state, age, query), worker_pids in waiting.items():
        causes.append(
            f"worker session(s) pid {', '.join(worker_pids)} wait on a lock held by"
            f" {_session(pid, app, state, age, query)}"
        )
    for queue_type, count in facts.pending_by_type:
        if queue_type not in served_types:
            causes.append(f"{count} pending message(s) of type '{queue_type}' but no worker serves that type")
    by_xid = {s[4]: s for s in facts.lock_holders if s[4]}
    for queue_type, order_id, msg_id, time_tied, xmax in facts.heads:
        if queue_type not in served_types:
            continue
        group = f"group ({queue_type}, order_id {order_id})"
        if msg_id not in facts.unlocked_heads:
            holder = by_xid.get(xmax)
            if holder is None:
                causes.append(f"{group}: head msg_id {msg_id} is locked by a transaction that never commits")
            elif holder[6]:
                causes.append(
                    f"{group}: head msg_id {msg_id} is held by this run's worker pid {holder[0]},"
                    f" in its transaction for {holder[3]:.0f} s without committing"
                )
            else:
                pid, app, state, age, _, query, _ = holder
                causes.append(
                    f"{group}: head msg_id {msg_id} is locked by another session, "
                    + _session(pid, app, state, age, query)
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
    for pid, app, state, age, _, query, ours in facts.lock_holders:
        if not ours and age > 5 and not any(f"pid {pid} " in c for c in causes):
            causes.append(f"session {_session(pid, app, state, age, query)}")
    return causes
