"""Why nothing moves: the stall diagnosis, read from the queue and the server's views."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

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


def stall_causes(conn: psycopg.Connection, served_types: set[str], our_pids: list[int]) -> list[str]:
    """Name what keeps the pending messages from being claimed, most specific first."""
    cur = psycopg.RawCursor(conn)
    causes = []
    pending = cur.execute(statement("pending_by_type")).fetchall()
    for queue_type, count in pending:
        if queue_type not in served_types:
            causes.append(f"{count} pending message(s) of type '{queue_type}' but no worker serves that type")
    heads = [h for h in cur.execute(statement("group_heads")).fetchall() if h[0] in served_types]
    unlocked = {r[0] for r in cur.execute(statement("unlocked_heads"), ([h[2] for h in heads],))}
    conn.rollback()
    holders = cur.execute(statement("lock_holders"), (our_pids,)).fetchall()
    holder_by_xid = {h[4]: h for h in holders if h[4]}
    for queue_type, order_id, msg_id, time_tied, xmax in heads:
        group = f"group ({queue_type}, order_id {order_id})"
        if msg_id not in unlocked:
            holder = holder_by_xid.get(xmax)
            if holder:
                pid, app, state, age, _, query = holder
                causes.append(
                    f"{group}: head msg_id {msg_id} is locked by another session, pid {pid}"
                    f" ({app or 'no application_name'}, {state}, transaction open {age:.0f} s:"
                    f" {query!r}); end that transaction or pg_terminate_backend({pid})"
                )
            else:
                causes.append(f"{group}: head msg_id {msg_id} is locked and its holder never commits")
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
    for pid, blockers, query in cur.execute(statement("blocked_sessions")).fetchall():
        causes.append(f"session pid {pid} waits on a lock held by {blockers}: {query!r}")
    for pid, app, state, age, _, query in holders:
        if not any(f"pid {pid} " in c for c in causes) and age > 5:
            causes.append(
                f"session pid {pid} ({app or 'no application_name'}, {state}) has held a"
                f" transaction open for {age:.0f} s: {query!r}"
            )
    conn.rollback()
    return causes or ["no cause found in the queue or the server's lock views"]
