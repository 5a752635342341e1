"""The audit's counts, on the server: the journal, the queue (the seed's table) or the tool's log of
what it enqueued and the design's pending.sql (a folder's), and the evidence of the first
duplicates and order violations that a failed audit's cause is read from (verdicts/audit judges)."""

from __future__ import annotations

from typing import Any

import psycopg

from pgmq_sim.db.values import QueueShape
from pgmq_sim.model.facts import AuditCounts, DuplicateClaims, OrderFacts, OrderViolation
from pgmq_sim.sqlfiles import statement


def count_audit(
    conn: psycopg.Connection, shape: QueueShape, expected: int, show: int, retrying: bool, after: int = 0
) -> AuditCounts:
    """The counts of a run that produced msg_ids up to `expected`, the first `show` of each kind.
    `after`: ids 1..after were judged already (the live audit's closed windows, db/windows): in its
    views, the evidence reads each group's last completed message before them."""
    if not shape.seed_table:
        return _logged_counts(conn, shape, expected, show, after)
    suffix = "_retry" if retrying else ""
    row = conn.execute(statement("audit_counts" + suffix), (expected, after)).fetchone()
    assert row is not None
    processed, duplicates, missing, left_behind, *retries = row
    duplicate_ids = [r[0] for r in conn.execute(statement("audit_duplicates"), (show,))]
    missing_ids = [r[0] for r in conn.execute(statement("audit_missing" + suffix), (expected, show, after))]
    retry_fields = ("dead_lettered", "redelivered", "attempts", "failed_attempts")
    return AuditCounts(
        processed=processed,
        duplicates=duplicates,
        missing=missing,
        left_behind=left_behind,
        duplicate_ids=tuple(duplicate_ids),
        missing_ids=tuple(missing_ids),
        **dict(zip(retry_fields, retries, strict=False)),
        **_evidence(conn, show, None, after=after),
    )


def _evidence(
    conn: psycopg.Connection, show: int, lease: float | None, by_priority: bool = False, after: int = 0
) -> dict[str, Any]:
    """The first duplicates and order violations; a group ordered by priority (then enqueue order)
    is judged by that order, and its overtakings by priority are counted apart, as promised. A redelivery
    after an at-least-once design's `lease` is not a duplicate's evidence."""
    if after:  # the window's journal with each group's mark before it: order across windows
        conn.execute(statement("window_marks_on"))
    claims = [
        DuplicateClaims(int(m), tuple(w), bool(o), float(g))
        for m, w, o, g in conn.execute(statement("audit_duplicate_claims"), (show, lease))
    ]
    kind = "audit_violations_priority" if by_priority else "audit_violations"
    rows = conn.execute(statement(kind), (show,)).fetchall()
    pairs = [OrderViolation(str(t), int(o), int(m), int(p), str(w), str(pw), float(s), bool(v))
             for t, o, m, p, w, pw, s, v, _ in rows]  # fmt: skip
    if by_priority:
        violations = [int(r[2]) for r in conn.execute(statement(kind), (2**31 - 1,))]
        promised = conn.execute(statement("audit_priority_overtakings")).fetchone()
        extra = {"priority_overtakings": int(promised[0]) if promised else 0}
    else:
        violations = [r[0] for r in conn.execute(statement("audit_order"))]
        extra = {}
    return extra | {
        "order_violation_ids": tuple(violations[:show]),
        "order_violations": len(violations),
        "overtaking": int(rows[0][8]) if rows else 0,
        "duplicate_claims": tuple(claims),
        "violations": tuple(pairs),
    }


def _logged_counts(
    conn: psycopg.Connection, shape: QueueShape, expected: int, show: int, after: int
) -> AuditCounts:
    """A folder design's audit: the tool's log, journal and failures, and the design's pending.sql."""
    # the design's pending messages, once, for both statements (dropped with the transaction)
    load_pending(conn, shape)
    lease = shape.redelivery_lease_s
    row = conn.execute(statement("audit_counts_log"), (expected, lease)).fetchone()
    assert row is not None
    names = ("processed", "duplicates", "missing", "left_behind", "dead_lettered", "redelivered")
    fields = (*names, "attempts", "failed_attempts", "early")
    counts: dict[str, Any] = dict(zip(fields, (int(v) for v in row), strict=True))
    ids: dict[str, list[int]] = {}
    for kind, msg_id in conn.execute(statement("audit_ids_log"), (expected, lease, show)):
        ids.setdefault(str(kind), []).append(int(msg_id))
    evidence = _evidence(conn, show, lease, shape.by_priority, after)
    return AuditCounts(
        **counts,
        duplicate_ids=tuple(ids.get("duplicate", ())),
        missing_ids=tuple(ids.get("missing", ())),
        redelivered_ids=tuple(ids.get("redelivered", ())),
        early_ids=tuple(ids.get("early", ())),
        order_facts=_order_facts(conn) if evidence["order_violations"] else None,
        **evidence,
    )


def _order_facts(conn: psycopg.Connection) -> OrderFacts:
    """The order violations' pairs as their rows in the tool's log of what it enqueued say."""
    row = conn.execute(statement("audit_order_facts")).fetchone()
    assert row is not None
    pairs, overtook, keyed, inverted, same_ms, apart_ms, due_earlier, ranked_higher, example = row
    return OrderFacts(
        pairs, overtook, bool(keyed), inverted, same_ms, float(apart_ms), due_earlier, ranked_higher,
        tuple(str(v) for v in (example[0] if example else ())),
    )  # fmt: skip


PENDING = "pgmq_sim_pending"


def load_pending(conn: psycopg.Connection, shape: QueueShape) -> None:
    """The temporary table `pending_messages(msg_id)` (dropped at commit): the design's pending.sql
    run as written (PREPAREd, its rows kept by CREATE TABLE AS EXECUTE), its ids the tool's numbers
    (a design of its own ids is mapped through the tool's log); without one, the tool's tables say."""
    if shape.pending_sql is None:
        conn.execute(statement("unfinished_pending"))
        return
    conn.execute(f"prepare {PENDING} as {shape.pending_sql}".encode())  # gone with the connection
    table = "pending_design (id)" if shape.keyed else "pending_messages (msg_id)"
    conn.execute(f"create temp table {table} on commit drop as execute {PENDING}".encode())
    conn.execute(f"deallocate {PENDING}".encode())
    if shape.keyed:
        conn.execute(statement("pending_keyed"))
