"""A design of its own folder, tried on the server before the run changes anything.

In one transaction that is rolled back: its schema runs (what it creates and what it drops is seen in
the catalog), each statement is prepared with the arguments the tool declares, the plans of the
enqueue, the claim and the completion name the tables they touch (EXPLAIN), and one message goes
through: enqueued, claimed, completed (and, with fail.sql, a second one failed). What goes wrong is
one line naming the file, the server's message and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, is_connection_lost
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import (
    CLAIM_SIGNATURE,
    COMPLETE_ARGUMENTS,
    COMPLETE_SPLIT_ARGUMENTS,
    ENQUEUE_ARGUMENTS,
    FAIL_ARGUMENTS,
)
from pgmq_sim.dsn import first_line
from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.sqlfiles import statement

TRIAL_ID = 900_000_001  # a msg_id no run reaches in a check (the first run's ids start at 1)
TRIAL_OWNER = "pgmq-sim:trial"


@dataclass(frozen=True)
class DesignTrial:
    """What the trial saw: the tables the schema creates, the tables of others it would drop, and
    the tables the statements use that it does not create."""

    created: tuple[str, ...]
    dropped_foreign: tuple[str, ...]
    foreign_used: tuple[tuple[str, str], ...]  # (file, table)


@dataclass(frozen=True)
class DesignTexts:
    """A design's statements as the trial runs them (texts; the design's files name them)."""

    folder: str
    schema: str
    enqueue: str
    claim: str  # wrapped: msg_id, queue_type, order_id, the claim's clock
    complete: str
    fail: str | None
    split: bool


def user_tables(conn: psycopg.Connection) -> dict[int, tuple[str, bool]]:
    """Every table outside the system schemas: oid -> (qualified name, created by this tool)."""
    return {int(oid): (str(name), bool(ours)) for oid, name, ours in conn.execute(statement("user_tables"))}


def try_design(sessions: Sessions, texts: DesignTexts) -> DesignTrial:
    """Run the design once and roll it back; a statement that fails is a UsageError naming its file."""
    with sessions.connection() as conn:
        try:
            conn.execute(f"set local lock_timeout = {ADMIN_LOCK_TIMEOUT_MS}")
            before = user_tables(conn)
            _run(conn, texts.schema.encode(), texts, "schema.sql", "fix the SQL")
            after = user_tables(conn)
            created = {oid: name for oid, (name, _) in after.items() if oid not in before}
            dropped = sorted(name for oid, (name, ours) in before.items() if oid not in after and not ours)
            if not created:
                raise UsageError(
                    f"schema.sql of {texts.folder} creates no table; a design's schema creates the tables"
                    " its statements use (the run replaces only tables it created)"
                )
            prepared = _prepare_all(conn, texts)
            used = _relations(conn, prepared, texts)
            known = set(created.values())
            foreign = tuple(
                (file, table)
                for file, tables in used.items()
                for table in sorted(tables)
                if table not in known
            )
            if not foreign:
                _one_message(conn, texts)
            return DesignTrial(tuple(sorted(known)), tuple(dropped), foreign)
        finally:
            if not conn.closed:
                conn.rollback()


def _run(conn: psycopg.Connection, text: bytes, texts: DesignTexts, file: str, fix: str) -> Any:
    try:
        return conn.execute(text)
    except psycopg.errors.LockNotAvailable:
        raise SimError(
            f"{file} of {texts.folder} waited {ADMIN_LOCK_TIMEOUT_MS / 1000:g} s for a lock another session"
            " holds; end that session's transaction and run again"
        ) from None
    except psycopg.Error as exc:
        if is_connection_lost(exc, conn.closed):
            raise
        raise UsageError(f"{file} of {texts.folder} failed on the server: {first_line(exc)}; {fix}") from None


def _prepare_all(conn: psycopg.Connection, texts: DesignTexts) -> dict[str, str]:
    """Each statement prepared under a trial name, with the arguments the tool declares."""
    claim_arguments = CLAIM_SIGNATURE[: CLAIM_SIGNATURE.index(")") + 1]
    statements = {
        "enqueue.sql": (ENQUEUE_ARGUMENTS, texts.enqueue),
        "claim.sql": (claim_arguments, texts.claim),
        "complete.sql": (COMPLETE_SPLIT_ARGUMENTS if texts.split else COMPLETE_ARGUMENTS, texts.complete),
    }
    if texts.fail is not None:
        statements["fail.sql"] = (FAIL_ARGUMENTS, texts.fail)
    names = {}
    for file, (arguments, text) in statements.items():
        name = "pgmq_sim_trial_" + file.removesuffix(".sql")
        fix = (
            "it must return the columns msg_id, queue_type and order_id"
            if file == "claim.sql"
            else f"it takes the arguments {arguments} (a file may leave out what it does not use)"
        )
        _run(conn, f"prepare {name}{arguments} as {text}".encode(), texts, file, f"fix it: {fix}")
        names[file] = name
    return names


def _calls(texts: DesignTexts) -> dict[str, str]:
    """The trial's arguments per statement (one message, type1, order 1, due a second ago)."""
    owner = f", '{TRIAL_OWNER}'" if texts.split else ""
    return {
        "enqueue.sql": f"({TRIAL_ID}, 'type1', 1, 0, clock_timestamp() - interval '1 second', null)",
        "claim.sql": f"('type1', 1, null, '{TRIAL_OWNER}', 30)",
        "complete.sql": f"({TRIAL_ID}{owner})",
        "fail.sql": f"({TRIAL_ID + 1}, 1, 'trial failure', clock_timestamp() + interval '1 hour')",
    }


def _relations(conn: psycopg.Connection, prepared: dict[str, str], texts: DesignTexts) -> dict[str, set[str]]:
    """The tables each statement's plan touches, from EXPLAIN (schema-qualified)."""
    found: dict[str, set[str]] = {}
    calls = _calls(texts)
    for file, name in prepared.items():
        row = conn.execute(f"explain (verbose, format json) execute {name}{calls[file]}".encode()).fetchone()
        assert row is not None
        plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
        found[file] = {f"{s}.{r}" for s, r in _plan_relations(plan)}
    return found


def _plan_relations(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        if "Relation Name" in node:
            yield str(node.get("Schema", "public")), str(node["Relation Name"])
        for value in node.values():
            yield from _plan_relations(value)
    elif isinstance(node, list):
        for item in node:
            yield from _plan_relations(item)


def _one_message(conn: psycopg.Connection, texts: DesignTexts) -> None:
    """Enqueue one message, claim it, complete it: the id kept, the columns there, one row finished."""
    calls = _calls(texts)
    _run(
        conn, f"execute pgmq_sim_trial_enqueue{calls['enqueue.sql']}".encode(), texts, "enqueue.sql", "fix it"
    )
    rows = _run(
        conn, f"execute pgmq_sim_trial_claim{calls['claim.sql']}".encode(), texts, "claim.sql", "fix it"
    ).fetchall()
    if not rows:
        raise UsageError(
            f"claim.sql of {texts.folder} claimed nothing after enqueue.sql wrote one message of type1,"
            " due a second ago: the claim must find what the enqueue wrote ($1 type, $2 batch)"
        )
    msg_id, queue_type, order_id = rows[0][0], rows[0][1], rows[0][2]
    if (msg_id, queue_type, order_id) != (TRIAL_ID, "type1", 1):
        raise UsageError(
            f"enqueue.sql of {texts.folder} does not keep the tool's message: enqueued as msg_id"
            f" {TRIAL_ID}, type1, order_id 1, the claim returned msg_id {msg_id}, {queue_type},"
            f" order_id {order_id}; store $1, $2 and $3 and return them as msg_id, queue_type, order_id"
        )
    done = _run(
        conn,
        f"execute pgmq_sim_trial_complete{calls['complete.sql']}".encode(),
        texts,
        "complete.sql",
        "fix it",
    )
    changed = done.rowcount
    if changed != 1:
        raise UsageError(
            f"complete.sql of {texts.folder} finished {changed} rows for the one message claimed;"
            " it must update or delete exactly one row ($1 is the msg_id)"
        )
    if texts.fail is not None:
        second = calls["enqueue.sql"].replace(str(TRIAL_ID), str(TRIAL_ID + 1), 1)
        _run(conn, f"execute pgmq_sim_trial_enqueue{second}".encode(), texts, "enqueue.sql", "fix it")
        _run(conn, f"execute pgmq_sim_trial_fail{calls['fail.sql']}".encode(), texts, "fail.sql", "fix it")
