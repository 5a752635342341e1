"""Why nothing moves: the stall diagnosis, read from the queue and the server's views."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from pgmq_sim.server import first_line
from pgmq_sim.sqlfiles import statement


@dataclass(frozen=True)
class TableHealth:
    live_tuples: int
    dead_tuples: int
    autovacuum_runs: int
    autoanalyze_runs: int
    table_bytes: int
    index_bytes: int

    def as_json(self) -> dict[str, int]:
        return {
            "live_tuples": self.live_tuples,
            "dead_tuples": self.dead_tuples,
            "autovacuum_runs": self.autovacuum_runs,
            "autoanalyze_runs": self.autoanalyze_runs,
            "size_bytes": self.table_bytes,
            "index_bytes": self.index_bytes,
        }


def table_health(conn: psycopg.Connection) -> TableHealth:
    row = conn.execute(statement("table_health")).fetchone()
    conn.rollback()
    return TableHealth(*(int(v) for v in row))


def _session(pid: int, app: str, state: str, age: float, query: str) -> str:
    return (
        f"pid {pid} ({app or 'no application_name'}, {state}, transaction open {age:.0f} s: {query!r});"
        f" end that transaction or pg_terminate_backend({pid})"
    )


def stall_causes(conn: psycopg.Connection, served_types: set[str], our_pids: list[int]) -> list[str]:
    """Name what keeps the pending messages from being claimed, most specific first.

    Sessions blocking our workers are named first: the queue itself may be locked, and then
    the queries that inspect it would wait too (the caller's session has a lock_timeout).
    """
    causes: list[str] = []
    try:
        _find_causes(psycopg.RawCursor(conn), served_types, our_pids, causes)
    except psycopg.Error as exc:
        causes.append(f"could not inspect the queue: {first_line(exc)}")
    finally:
        conn.rollback()
    return causes or ["no cause found in the queue or the server's lock views"]


def _find_causes(
    cur: psycopg.RawCursor, served_types: set[str], our_pids: list[int], causes: list[str]
) -> None:
    waiting: dict[tuple, list[str]] = {}
    for worker_pid, *blocker in cur.execute(statement("blocked_sessions"), (our_pids,)).fetchall():
        waiting.setdefault(tuple(blocker), []).append(str(worker_pid))
    for (pid, app, state, age, query), worker_pids in waiting.items():
        causes.append(
            f"worker session(s) pid {', '.join(worker_pids)} wait on a lock held by"
            f" {_session(pid, app, state, age, query)}"
        )
    for queue_type, count in cur.execute(statement("pending_by_type")).fetchall():
        if queue_type not in served_types:
            causes.append(f"{count} pending message(s) of type '{queue_type}' but no worker serves that type")
    heads = [h for h in cur.execute(statement("group_heads")).fetchall() if h[0] in served_types]
    unlocked = {r[0] for r in cur.execute(statement("unlocked_heads"), ([h[2] for h in heads],))}
    cur.connection.rollback()
    sessions = cur.execute(statement("lock_holders"), (our_pids,)).fetchall()
    by_xid = {s[4]: s for s in sessions if s[4]}
    for queue_type, order_id, msg_id, time_tied, xmax in heads:
        group = f"group ({queue_type}, order_id {order_id})"
        if msg_id not in unlocked:
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
    for pid, app, state, age, _, query, ours in sessions:
        if not ours and age > 5 and not any(f"pid {pid} " in c for c in causes):
            causes.append(f"session {_session(pid, app, state, age, query)}")
