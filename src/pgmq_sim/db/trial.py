"""A design of its own folder, tried on the server before the run changes anything.

In one transaction that is rolled back: its schema runs (what it creates and what it drops is seen in
the catalog), its notify.sql runs, every statement is prepared as written with the arguments the
tool declares (the optional ones too: every completion form, fail.sql, pending.sql, recover.sql),
their plans name the tables they touch (EXPLAIN), and one message goes through: enqueued, listed
pending, claimed, completed (each completion form in turn), no longer pending; a second one failed;
the recovery run once. What the server refuses is one line naming the file and the server's
message; a fix is named only where the tool knows it (a claim without one of its columns, an id
not kept).

The enqueue may return the design's own id (`returning id as msg_id`: bigint, uuid, text): the
trial reads its type from the statement's description, and the message goes through under it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgmq_sim.db.claims import missing_columns, result_columns
from pgmq_sim.db.connection import ADMIN_LOCK_TIMEOUT_MS, is_connection_lost
from pgmq_sim.db.extensions import prepare_extension
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.statements import (
    CLAIM_ARGUMENTS,
    CLAIM_COLUMNS,
    ENQUEUE_ARGUMENTS,
    complete_arguments,
    fail_arguments,
)
from pgmq_sim.dsn import first_line
from pgmq_sim.errors import LockBusy, UsageError
from pgmq_sim.sqlfiles import statement

TRIAL_ID = 900_000_001  # a msg_id no run reaches in a check (the first run's ids start at 1)
TRIAL_OWNER = "pgmq-sim:trial"
# the server's refusals about a statement's parameters: there the arguments the tool passes help
PARAMETER_STATES = {"42P02", "42P18", "42804", "42883", "42725"}


@dataclass(frozen=True)
class DesignTrial:
    """What the trial saw: the tables the schema creates, the tables of others it would drop, the
    tables the statements use that it does not create, and the type of the design's own id when its
    enqueue returns one (None: the tool's $1 is the id), and what a design's `requires` found."""

    created: tuple[str, ...]
    dropped_foreign: tuple[str, ...]
    foreign_used: tuple[tuple[str, str], ...]  # (file, table)
    id_type: str | None = None
    required: str | None = None
    required_version: str | None = None  # which version of what it requires the run uses


@dataclass(frozen=True)
class DesignTexts:
    """A design's statements as the trial runs them (texts; the design's files name them)."""

    folder: str
    schema: str
    enqueue: str
    claim: str
    completions: tuple[tuple[str, str], ...]  # (file, text): the one the run uses first, then the others
    fail: str | None
    split: bool
    pending: str | None = None
    notify: str | None = None
    recover: str | None = None
    requires: str | None = None  # pgmq | pgq, made ready before the schema
    types: tuple[str, ...] = ("type1",)  # the run's types: current_setting('pgmq_sim.types')


def user_tables(conn: psycopg.Connection) -> dict[int, tuple[str, bool]]:
    """Every table outside the system schemas: oid -> (qualified name, created by this tool)."""
    return {int(oid): (str(name), bool(ours)) for oid, name, ours in conn.execute(statement("user_tables"))}


def try_design(sessions: Sessions, texts: DesignTexts) -> DesignTrial:
    """Run the design once and roll it back; a statement that fails is a UsageError naming its file."""
    with sessions.connection() as conn:
        try:
            conn.execute(f"set local lock_timeout = {ADMIN_LOCK_TIMEOUT_MS}")
            required = before_schema(conn, texts.requires, texts.types)
            before = user_tables(conn)
            _run(conn, texts.schema, texts, "schema.sql")
            after = user_tables(conn)
            created = {oid: name for oid, (name, _) in after.items() if oid not in before}
            dropped = sorted(name for oid, (name, ours) in before.items() if oid not in after and not ours)
            if not created:
                raise UsageError(
                    f"schema.sql of {texts.folder} creates no table; a design's schema creates the tables"
                    " its statements use (the run replaces only tables it created)"
                )
            if texts.notify is not None:
                _run(conn, texts.notify, texts, "notify.sql")
            known = set(created.values())
            trial = _Trial(conn, texts)
            foreign = trial.foreign(["enqueue.sql"], known)
            if not foreign:
                trial.enqueue_one()
                foreign = trial.foreign([f for f in trial.prepared if f != "enqueue.sql"], known)
            # PgQ hands a consumer only events committed before a tick: one transaction, rolled back,
            # cannot take a message through it (its statements are prepared and planned all the same)
            if not foreign and texts.requires != "pgq":
                trial.one_message()
            elif not foreign and "pending.sql" in trial.prepared:
                trial.pending()
            return DesignTrial(
                tuple(sorted(known)),
                tuple(dropped),
                tuple(foreign),
                trial.id_type,
                required[0] if required else None,
                required[1] if required else None,
            )
        finally:
            if not conn.closed:
                conn.rollback()


def before_schema(
    conn: psycopg.Connection, requires: str | None, types: tuple[str, ...]
) -> tuple[str, str] | None:
    """In the open transaction, before a design's schema: what it requires made ready (said in the
    line returned), and the run's types for its schema (`current_setting('pgmq_sim.types')`)."""
    conn.execute(statement("set_types"), (",".join(types),))
    try:
        return prepare_extension(conn, requires)
    except psycopg.Error as exc:
        if is_connection_lost(exc, conn.closed):
            raise
        raise UsageError(
            f"{requires}: preparing it in the run's database failed: {first_line(exc)}"
        ) from None


def _run(conn: psycopg.Connection, text: str, texts: DesignTexts, file: str, hint: str = "") -> Any:
    """One statement of the design as written; the server's refusal names the file and its message."""
    try:
        return conn.execute(text.encode())
    except psycopg.errors.LockNotAvailable:
        raise LockBusy(
            f"{file} of {texts.folder} waited {ADMIN_LOCK_TIMEOUT_MS / 1000:g} s for a lock another session"
            " holds; end that session's transaction and run again"
        ) from None
    except psycopg.Error as exc:
        if is_connection_lost(exc, conn.closed):
            raise
        known = f"; {hint}" if hint and exc.sqlstate in PARAMETER_STATES else ""
        raise UsageError(f"{file} of {texts.folder} failed on the server: {first_line(exc)}{known}") from None


class _Trial:
    """The statements prepared under trial names, and one message through them."""

    def __init__(self, conn: psycopg.Connection, texts: DesignTexts) -> None:
        self.conn, self.texts = conn, texts
        self.prepared: dict[str, str] = {}  # file -> prepared name
        self.arguments: dict[str, str] = {}
        self.id_type: str | None = None
        self.key: str = str(TRIAL_ID)  # the first message's id as the statements take it (text)
        self._prepare("enqueue.sql", ENQUEUE_ARGUMENTS, texts.enqueue)
        self.id_type = dict(result_columns(conn, self.prepared["enqueue.sql"])).get("msg_id")
        ids = self.id_type or "bigint"
        self._prepare("claim.sql", CLAIM_ARGUMENTS, texts.claim)
        columns = [name for name, _ in result_columns(conn, self.prepared["claim.sql"])]
        missing = missing_columns(columns)
        if missing:
            raise UsageError(
                f"claim.sql of {texts.folder} returns no {', '.join(missing)} column (it returns"
                f" {', '.join(columns) or 'nothing'}); it must return {', '.join(CLAIM_COLUMNS)}: name them"
                " so (`returning id as msg_id, ...`)"
            )
        for file, text in texts.completions:
            self._prepare(file, complete_arguments(ids, texts.split), text)
        if texts.fail is not None:
            self._prepare("fail.sql", fail_arguments(ids), texts.fail)
        for file, optional in (("pending.sql", texts.pending), ("recover.sql", texts.recover)):
            if optional is not None:
                self._prepare(file, "", optional)

    def _prepare(self, file: str, arguments: str, text: str) -> None:
        name = "pgmq_sim_trial_" + file.removesuffix(".sql")
        hint = f"the tool passes it {arguments}" if arguments else ""
        _run(self.conn, f"prepare {name}{arguments} as {text}", self.texts, file, hint)
        self.prepared[file], self.arguments[file] = name, arguments

    def _literal(self, value: object) -> str:
        return sql.Literal(value).as_string(self.conn)

    def calls(self, file: str, key: str | None = None) -> str:
        """The trial's arguments for a file (one message, type1, order 1, due a second ago)."""
        ident = self._literal(key if key is not None else self.key)
        owner = f", '{TRIAL_OWNER}'" if self.texts.split else ""
        if file == "enqueue.sql":
            return f"({key or TRIAL_ID}, 'type1', 1, 0, clock_timestamp() - interval '1 second', null)"
        if file == "claim.sql":
            return f"('type1', 1, null, '{TRIAL_OWNER}', 30)"
        if file == "fail.sql":
            return f"({ident}, 1, 'trial failure', clock_timestamp() + interval '1 hour')"
        if file in ("pending.sql", "recover.sql"):
            return ""
        return f"({ident}{owner})"  # a completion form

    def execute(self, file: str, key: str | None = None) -> Any:
        return _run(self.conn, f"execute {self.prepared[file]}{self.calls(file, key)}", self.texts, file)

    def foreign(self, files: list[str], known: set[str]) -> list[tuple[str, str]]:
        """The tables these files' plans touch that the schema does not create (EXPLAIN)."""
        found = []
        for file in files:
            text = f"explain (verbose, format json) execute {self.prepared[file]}{self.calls(file)}"
            row = _run(self.conn, text, self.texts, file).fetchone()
            plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
            found += [
                (file, t) for t in sorted({f"{s}.{r}" for s, r in _plan_relations(plan)}) if t not in known
            ]
        return found

    def enqueue_one(self) -> None:
        """The first message: its id, the tool's or the one the enqueue returns."""
        done = self.execute("enqueue.sql", str(TRIAL_ID))
        if self.id_type is not None:
            rows = done.fetchall()
            if len(rows) != 1:
                raise UsageError(
                    f"enqueue.sql of {self.texts.folder} returned {len(rows)} rows for one message; it"
                    " must insert one message and return its id as msg_id (one row)"
                )
            self.key = _returned_id(done, rows[0])

    def pending(self) -> set[str]:
        cursor = self.execute("pending.sql")
        return {str(row[0]) for row in cursor.fetchall()}

    def one_message(self) -> None:
        """Enqueued, claimed with its id, pending, completed by each form, no longer pending; a second
        message failed; the recovery run once."""
        texts, folder = self.texts, self.texts.folder
        cursor = self.execute("claim.sql")
        rows = cursor.fetchall()
        if not rows:
            raise UsageError(
                f"claim.sql of {folder} claimed nothing after enqueue.sql wrote one message of type1,"
                " due a second ago: the claim must find what the enqueue wrote ($1 type, $2 batch)"
            )
        names = [d.name for d in cursor.description or ()]
        got = {c: rows[0][names.index(c)] for c in CLAIM_COLUMNS}
        if (str(got["msg_id"]), str(got["queue_type"]), str(got["order_id"])) != (self.key, "type1", "1"):
            kept = "return the id enqueue.sql returns as msg_id" if self.id_type else "store $1 as its id"
            raise UsageError(
                f"enqueue.sql of {folder} does not keep the tool's message: enqueued as msg_id"
                f" {self.key}, type1, order_id 1, the claim returned msg_id {got['msg_id']},"
                f" {got['queue_type']}, order_id {got['order_id']}; {kept}, store $2 and $3 and return"
                " them as msg_id, queue_type, order_id"
            )
        if "pending.sql" in self.prepared and self.key not in self.pending():
            raise UsageError(
                f"pending.sql of {folder} does not list the message enqueue.sql wrote and claim.sql"
                f" claimed (id {self.key}); it must return the id of every message not finished, as its"
                " first column"
            )
        forms = [file for file, _ in texts.completions]
        for index, file in enumerate(forms):
            last = index == len(forms) - 1
            if not last:
                self.conn.execute("savepoint pgmq_sim_form")
            changed = self.execute(file).rowcount
            if changed != 1:
                raise UsageError(
                    f"{file} of {folder} finished {changed} rows for the one message claimed;"
                    " it must update or delete exactly one row ($1 is the msg_id)"
                )
            if not last:
                self.conn.execute("rollback to savepoint pgmq_sim_form")
        if len(forms) > 1:  # the form the run uses, last, for good
            self.conn.execute("savepoint pgmq_sim_form")
            self.execute(forms[0])
            self.conn.execute("release savepoint pgmq_sim_form")
        if "pending.sql" in self.prepared and self.key in self.pending():
            raise UsageError(
                f"pending.sql of {folder} still lists the message {forms[0]} finished (id {self.key});"
                " it must return only the messages not finished"
            )
        if texts.fail is not None:
            second = self.execute("enqueue.sql", str(TRIAL_ID + 1))
            key = _returned_id(second, second.fetchone()) if self.id_type is not None else str(TRIAL_ID + 1)
            self.execute("fail.sql", key)
        if "recover.sql" in self.prepared:
            self.execute("recover.sql").fetchall()


def _returned_id(cursor: Any, row: Any) -> str:
    """The msg_id column of an enqueue's returned row, as text."""
    return str(row[[d.name for d in cursor.description].index("msg_id")])


def _plan_relations(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        if "Relation Name" in node:
            yield str(node.get("Schema", "public")), str(node["Relation Name"])
        for value in node.values():
            yield from _plan_relations(value)
    elif isinstance(node, list):
        for item in node:
            yield from _plan_relations(item)
