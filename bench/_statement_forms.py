"""statements.py's client loops: raw round trips on one connection (Link), one loop per form (loop_of)."""

from __future__ import annotations

import itertools
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import _pgbench as pgb
import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from pgmq_sim.db.statements import CLAIM, COMPLETE, call, create_function, prepare, worker_statements
from pgmq_sim.db.values import SessionPlan
from pgmq_sim.designs.design import QueueDesign

WAIT_MS = 100
TUPLES_OK, COMMAND_OK = pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK
PIPELINE_SYNC = pq.ExecStatus.PIPELINE_SYNC


# --- one connection at libpq's level ----------------------------------------------------------


class Link:
    """Raw round trips on a psycopg connection's libpq handle (as pgmq_sim.db.wire does): send, poll
    the socket, read every result; the first error raised after the round trip is read to its end."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.pg = conn.pgconn
        self.encoding = conn.info.encoding
        self.poller = select.poll()
        self.poller.register(self.pg.socket, select.POLLIN)

    def _flush(self) -> None:
        while self.pg.flush():
            select.select([], [self.pg.socket], [], WAIT_MS / 1000)

    def _next(self) -> pq.abc.PGresult | None:
        pg = self.pg
        while pg.is_busy():
            if self.poller.poll(WAIT_MS):
                pg.consume_input()
        return pg.get_result()

    def _check(self, results: list[pq.abc.PGresult]) -> list[pq.abc.PGresult]:
        for result in results:
            if result.status not in (TUPLES_OK, COMMAND_OK, PIPELINE_SYNC):
                if result.status == pq.ExecStatus.PIPELINE_ABORTED:
                    continue
                raise error_from_result(result, encoding=self.encoding)
        return results

    def _read(self) -> list[pq.abc.PGresult]:
        """Every result of one query (simple or extended, not pipelined)."""
        results = []
        while (result := self._next()) is not None:
            results.append(result)
        return self._check(results)

    def simple(self, text: bytes) -> list[pq.abc.PGresult]:
        self.pg.send_query(text)
        self._flush()
        return self._read()

    def unnamed(self, text: bytes, params: Sequence[bytes | None]) -> pq.abc.PGresult:
        self.pg.send_query_params(text, params)
        self._flush()
        return self._read()[-1]

    def prepare(self, name: bytes, text: bytes) -> None:
        self.pg.send_prepare(name, text)
        self._flush()
        self._read()

    def prepared(self, name: bytes, params: Sequence[bytes | None]) -> pq.abc.PGresult:
        self.pg.send_query_prepared(name, params)
        self._flush()
        return self._read()[-1]

    # pipeline mode: queue statements, then one Sync and read up to it

    def enter_pipeline(self) -> None:
        self.pg.enter_pipeline_mode()

    def exit_pipeline(self) -> None:
        self.pg.exit_pipeline_mode()

    def queue(self, name_or_text: bytes, params: Sequence[bytes | None], named: bool) -> None:
        if named:
            self.pg.send_query_prepared(name_or_text, params)
        else:
            self.pg.send_query_params(name_or_text, params)

    def sync(self) -> list[pq.abc.PGresult]:
        """Send the Sync and read every queued statement's result up to it (one per statement)."""
        self.pg.pipeline_sync()
        self._flush()
        results: list[pq.abc.PGresult] = []
        while True:
            result = self._next()
            if result is None:  # the end of one statement's results
                continue
            if result.status == PIPELINE_SYNC:
                return self._check(results)
            results.append(result)


# --- the worker loop ---------------------------------------------------------------------------


@dataclass
class Shared:
    """What the threads of one run share: the stop condition, the first error, the counter."""

    target: int
    done: threading.Event = field(default_factory=threading.Event)
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    errors: list[str] = field(default_factory=list)

    def completed(self) -> None:
        if next(self.counter) >= self.target:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        self.errors.append(
            f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
        )
        self.done.set()


@dataclass
class Worker:
    """One thread's connection and what it completed (msg_ids; misses: completions that found no row)."""

    conn: psycopg.Connection
    queue_type: str
    done_ids: list[int] = field(default_factory=list)
    misses: int = 0


@dataclass(frozen=True)
class Texts:
    """The statements in every form this bench sends."""

    claim_sql: bytes  # the wrapped claim, $1 the type
    complete_sql: bytes  # complete_mark, $1 the msg_id
    prepare_sql: list[str]  # PREPARE pgmq_sim_claim(...) ..., PREPARE pgmq_sim_complete(...)
    functions_ddl: list[str]  # CREATE FUNCTION pgmq_sim_claim ..., pgmq_sim_complete ...


# what the seed table's claims return, as a function declares it (the tool reads it from the claim's
# description at the install)
SEED_CLAIM_RETURNS = "msg_id integer, queue_type character varying(10), order_id integer"


def texts_of(strategy: QueueDesign) -> Texts:
    plan = SessionPlan(
        strategy.claim.text,
        False,
        False,
        complete_sql=strategy.complete.text,
        claim_returns=SEED_CLAIM_RETURNS,
    )
    found = worker_statements(plan)
    assert [s.name for s in found] == [CLAIM, COMPLETE]
    return Texts(
        strategy.claim.text.encode(),
        pgb.seed_completion().encode(),
        [prepare(s) for s in found],
        [ddl for s in found for ddl in create_function(s)],
    )


def first_id(result: pq.abc.PGresult) -> int | None:
    """The claimed msg_id (first column of the first row), or None: nothing free."""
    if result.ntuples == 0:
        return None
    value = result.get_value(0, 0)
    return int(value) if value is not None else None


def sql_text_loop(w: Worker, s: Shared, texts: Texts, functions: bool, chained: bool) -> None:
    """The tool's forms: SQL text in simple-query messages, EXECUTE of SQL-level prepared statements
    or SELECT from SQL functions; chained = the next claim rides with the commit."""
    link = Link(w.conn)
    if not functions:
        link.simple(b"deallocate all")
        for text in texts.prepare_sql:
            link.simple(text.encode())
    quoted = f"'{w.queue_type}'"
    claim = call(CLAIM, f"{quoted}, 1, null, null, null", functions).encode()
    begin_claim = b"begin; " + claim
    msg_id = first_id(link.simple(begin_claim)[-1])
    while not s.done.is_set():
        if msg_id is None:
            link.simple(b"commit")
            time.sleep(0.001)
            msg_id = first_id(link.simple(begin_claim)[-1])
            continue
        complete = call(COMPLETE, str(msg_id), functions).encode() + b"; commit"
        results = link.simple(complete + b"; " + begin_claim if chained else complete)
        if results[0].ntuples != 1:
            w.misses += 1
        w.done_ids.append(msg_id)
        s.completed()
        if chained:
            msg_id = first_id(results[-1])
        elif not s.done.is_set():
            msg_id = first_id(link.simple(begin_claim)[-1])
        else:
            msg_id = None
    link.simple(b"rollback")  # a chained claim still open: back to the queue


def extended_loop(w: Worker, s: Shared, texts: Texts, named: bool) -> None:
    """begin; claim; complete; commit: one round trip each (extended protocol, unnamed or named)."""
    link = Link(w.conn)
    param = [w.queue_type.encode(), b"1"]  # the type, a batch of one
    if named:
        link.prepare(b"claim", texts.claim_sql)
        link.prepare(b"complete", texts.complete_sql)

        def claim() -> pq.abc.PGresult:
            return link.prepared(b"claim", param)

        def complete(msg_id: int) -> pq.abc.PGresult:
            return link.prepared(b"complete", [str(msg_id).encode()])
    else:

        def claim() -> pq.abc.PGresult:
            return link.unnamed(texts.claim_sql, param)

        def complete(msg_id: int) -> pq.abc.PGresult:
            return link.unnamed(texts.complete_sql, [str(msg_id).encode()])

    while not s.done.is_set():
        link.simple(b"begin")
        msg_id = first_id(claim())
        if msg_id is None:
            link.simple(b"commit")
            time.sleep(0.001)
            continue
        if complete(msg_id).ntuples != 1:
            w.misses += 1
        link.simple(b"commit")
        w.done_ids.append(msg_id)
        s.completed()


def cursor_loop(w: Worker, s: Shared, texts: Texts, named: bool) -> None:
    """The same four round trips through psycopg cursors, execute(..., prepare=named); begin and
    commit with prepare=False (psycopg would prepare them after prepare_threshold uses)."""
    cur = psycopg.RawCursor(w.conn)
    claim, complete = texts.claim_sql.decode(), texts.complete_sql.decode()
    param = (w.queue_type, 1)  # the type, a batch of one
    while not s.done.is_set():
        cur.execute("begin", prepare=False)
        cur.execute(claim, param, prepare=named)
        row = cur.fetchone()
        if row is None:
            cur.execute("commit", prepare=False)
            time.sleep(0.001)
            continue
        msg_id = int(row[0])
        cur.execute(complete, (msg_id,), prepare=named)
        if cur.rowcount != 1:
            w.misses += 1
        cur.execute("commit", prepare=False)
        w.done_ids.append(msg_id)
        s.completed()


def pipeline_loop(w: Worker, s: Shared, texts: Texts, named: bool, chained: bool) -> None:
    """libpq pipeline mode, one Sync per round trip; begin and commit are statements too."""
    link = Link(w.conn)
    if named:
        link.prepare(b"claim", texts.claim_sql)
        link.prepare(b"complete", texts.complete_sql)
    claim_q = b"claim" if named else texts.claim_sql
    complete_q = b"complete" if named else texts.complete_sql
    param = [w.queue_type.encode(), b"1"]  # the type, a batch of one
    link.enter_pipeline()

    def begin_claim() -> None:
        link.queue(b"begin", [], False)
        link.queue(claim_q, param, named)

    def complete_commit(msg_id: int) -> None:
        link.queue(complete_q, [str(msg_id).encode()], named)
        link.queue(b"commit", [], False)

    begin_claim()
    msg_id = first_id(link.sync()[-1])
    while not s.done.is_set():
        if msg_id is None:
            link.queue(b"commit", [], False)
            link.sync()
            time.sleep(0.001)
            begin_claim()
            msg_id = first_id(link.sync()[-1])
            continue
        complete_commit(msg_id)
        if chained:
            begin_claim()
        results = link.sync()
        if results[0].ntuples != 1:
            w.misses += 1
        w.done_ids.append(msg_id)
        s.completed()
        if chained:
            msg_id = first_id(results[-1])
        elif not s.done.is_set():
            begin_claim()
            msg_id = first_id(link.sync()[-1])
        else:
            msg_id = None
    link.exit_pipeline()
    link.simple(b"rollback")


def loop_of(form: str, texts: Texts) -> Callable[[Worker, Shared], None]:
    loops: dict[str, Callable[[Worker, Shared], None]] = {
        "prepare-sql": lambda w, s: sql_text_loop(w, s, texts, functions=False, chained=True),
        "function-sql": lambda w, s: sql_text_loop(w, s, texts, functions=True, chained=True),
        "function-sql-2rt": lambda w, s: sql_text_loop(w, s, texts, functions=True, chained=False),
        "unnamed": lambda w, s: extended_loop(w, s, texts, named=False),
        "prepared": lambda w, s: extended_loop(w, s, texts, named=True),
        "cursor-unnamed": lambda w, s: cursor_loop(w, s, texts, named=False),
        "cursor-prepared": lambda w, s: cursor_loop(w, s, texts, named=True),
        "pipeline-unnamed": lambda w, s: pipeline_loop(w, s, texts, named=False, chained=True),
        "pipeline-prepared": lambda w, s: pipeline_loop(w, s, texts, named=True, chained=True),
        "pipeline-unnamed-2rt": lambda w, s: pipeline_loop(w, s, texts, named=False, chained=False),
    }
    return loops[form]
