"""A connection's round trips at libpq's level, on the run's event loop: a message is sent without
waiting, and a reader registered once on the connection's socket reads what arrives, result by
result, raw (no cursor, no row adaptation), and hands the whole answer over when the message's last
result is in. One wake-up per answer, and each statement's own result, so an error is placed
exactly (the completion, its commit or the next claim), even when the connection is lost halfway.

The reader stays registered while the connection idles, so a server that ends the session (a
restart, a kill, a pooler dropping its clients) is seen at once, and a notification (LISTEN) is
handed to its callback as it arrives. While a round trip is in flight the socket is also read every
`CHECK_S`: a backend that dies before reading a message resets the socket (ECONNRESET, POLLERR), and
libuv then stops the reader without calling it, so no answer, not even the loss, would ever come.
psycopg's own API (a COPY, a cursor) may use the connection only while the wire stands aside: it
registers readers of its own.

A session the server ends says why before it closes (a FATAL error, or a warning of class 57 from
a crash or an immediate shutdown; while the connection idles, libpq hands such a message to the
notice handler): the loss is that error, with its SQLSTATE, not the socket's end.

Values are the server's text (a worker's session keeps DateStyle ISO); callers convert what they
need. A round trip waits as long as the server makes it (a lock held elsewhere is what the run
measures); its bound is the caller's (`within`), and the run's halt, which cancels the task: the
statement is then cancelled on the server and its answer drained before the wire serves again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from pgmq_sim.db.connection import CANCEL_TIMEOUT_S
from pgmq_sim.model.reasons import ends_session

FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
BAD = pq.ConnStatus.BAD
CHECK_S = 0.1  # a round trip in flight reads its socket this often, whatever the reader does


class LoopTime:
    """A worker's own CPU time on the loop for one claim, where its connection's round trips count
    it: its code from the moment it woke to each send that waits for the server, the reads of the
    answers, and its code from an answer on (to the next send, or until it is read). The loop's own
    dispatch between them (the poll, waking the task) is not in it. The thread's CPU clock, not the
    wall's: another thread holding the interpreter, or the machine's other work, is not the claim's.
    Read only while `armed` (the claims its owner samples), so an unmeasured claim costs no clock."""

    __slots__ = ("_since", "armed", "spent")

    def __init__(self) -> None:
        self.armed = False
        self.spent = 0.0
        self._since = 0.0  # a stretch of the worker's code running since then (0: none)

    def start(self, running: bool) -> None:
        """A claim begins: from now (`running`: the worker's code is running for it), or from its
        next answer."""
        if self.armed:
            self.spent = 0.0
            self._since = time.thread_time() if running else 0.0

    def resume(self) -> None:
        if self.armed:
            self._since = time.thread_time()

    def pause(self) -> None:
        if self.armed and self._since:
            self.spent += time.thread_time() - self._since
            self._since = 0.0


class Answer(NamedTuple):
    """What came back for one message: each statement's result up to the first error (the server
    runs nothing after it), that error, and the error that cut the connection, if one did."""

    results: list[pq.abc.PGresult]
    error: psycopg.Error | None = None
    lost: psycopg.Error | None = None

    def failure(self) -> psycopg.Error | None:
        return self.lost or self.error


class Wire:
    """One connection's raw round trips on the running loop. The connection stays psycopg's (in
    autocommit mode); `aside()` lends it back to psycopg's API between round trips."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        on_notify: Callable[[pq.PGnotify], None] | None = None,
        on_lost: Callable[[psycopg.Error], None] | None = None,
    ) -> None:
        self.connection = conn
        self._pg = conn.pgconn
        self._fd = self._pg.socket
        self._encoding = conn.info.encoding
        self._loop = asyncio.get_running_loop()
        self._answer: asyncio.Future[Answer] | None = None  # in flight, or being drained
        self._results: list[pq.abc.PGresult] = []
        self._error: psycopg.Error | None = None
        self._drained: asyncio.Future[None] | None = None
        self._on_notify = on_notify
        self._on_lost = on_lost
        self._reading = False
        self._check: asyncio.TimerHandle | None = None  # armed while round trips are in flight
        self.lost: psycopg.Error | None = None
        self._ending: tuple[str | None, str] | None = None  # what the server said before it ended the session
        self.meter: LoopTime | None = None  # a worker's: its claims' own time (actors/claim_reasons)
        conn.add_notice_handler(self._noticed)
        self._read()

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def backend_pid(self) -> int:
        return self._pg.backend_pid

    @property
    def closed(self) -> bool:
        return self.lost is not None or self._pg.status == BAD

    @property
    def busy(self) -> bool:
        """A round trip is in flight, or its answer, given up on, is still being drained."""
        return self._answer is not None

    def _read(self) -> None:
        self._loop.add_reader(self._fd, self._readable)
        self._reading = True

    def _unread(self) -> None:
        if self._check is not None:
            self._check.cancel()
            self._check = None
        if self._reading:
            self._reading = False
            with contextlib.suppress(OSError, ValueError):
                self._loop.remove_reader(self._fd)
            with contextlib.suppress(OSError, ValueError):
                self._loop.remove_writer(self._fd)

    def _readable(self) -> None:
        meter = self.meter
        began = time.thread_time() if meter is not None and meter.armed else 0.0
        pg = self._pg
        try:
            pg.consume_input()
            if self._on_notify is not None:
                while (note := pg.notifies()) is not None:
                    self._on_notify(note)
            answer = self._answer
            if answer is None:  # nothing asked: a notice, a notification, or the session's end
                pg.is_busy()  # parsed now: a FATAL error sent while idle reaches the notice handler
                if pg.status == BAD:
                    raise psycopg.OperationalError("the server closed the connection")
                return
            while not pg.is_busy():
                result = pg.get_result()
                if result is None:
                    self._done(answer, Answer(self._results, self._error))
                    return
                if result.status == FATAL_ERROR:
                    if self._error is None:
                        self._error = error_from_result(result, encoding=self._encoding)
                elif self._error is None:
                    self._results.append(result)
        except psycopg.OperationalError as exc:
            self._fail(exc)
        finally:
            if began and meter is not None:  # a sampled claim's read
                meter.spent += time.thread_time() - began

    def _checkup(self) -> None:
        """Read the socket of a round trip still in flight, as its reader would (a lost connection
        raises there), and look again later while one is."""
        self._check = None
        if self._answer is None or not self._reading:
            return
        self._readable()
        if self._answer is not None and self._reading:
            self._check = self._loop.call_later(CHECK_S, self._checkup)

    def _done(self, answer: asyncio.Future[Answer], value: Answer) -> None:
        self._answer, self._results, self._error = None, [], None
        if not answer.done():  # else its caller gave up (a timeout, a halt): drained now
            answer.set_result(value)
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _noticed(self, diag: psycopg.errors.Diagnostic) -> None:
        if ends_session(diag.sqlstate, diag.severity_nonlocalized):
            self._ending = (diag.sqlstate, diag.message_primary or "")

    def _ended_by(self, exc: psycopg.OperationalError) -> psycopg.Error:
        """The error that ended the session: what the server said before it closed, or else the
        socket's end."""
        with contextlib.suppress(psycopg.Error):
            self._pg.is_busy()  # what arrived before the end, parsed: a notice reaches _noticed
        error = self._error
        if error is not None and ends_session(error.sqlstate, error.diag.severity_nonlocalized):
            return error
        if self._ending is not None:
            sqlstate, message = self._ending
            return said_error(sqlstate, message)
        return exc

    def _fail(self, exc: psycopg.OperationalError) -> None:
        cause = self._ended_by(exc)
        if self.lost is None:
            self.lost = cause
        self._unread()
        answer = self._answer
        if answer is not None:
            self._done(answer, Answer(self._results, self._error, cause))
        if self._on_lost is not None:
            self._on_lost(cause)

    def _flush(self) -> None:
        try:
            if self._pg.flush() == 0:
                self._loop.remove_writer(self._fd)
        except psycopg.OperationalError as exc:
            self._fail(exc)

    def _send(self, send: Callable[..., None], *args: Any) -> asyncio.Future[Answer]:
        answer: asyncio.Future[Answer] = self._loop.create_future()
        if self.lost is None and not self._reading:
            raise psycopg.InterfaceError("the connection is lent to psycopg (aside) or closed")
        if self._answer is not None:
            raise psycopg.InterfaceError("the connection is still reading the previous answer")
        if self.lost is None:
            try:
                send(*args)
                if self._pg.flush():  # a long message the socket did not take at once
                    self._loop.add_writer(self._fd, self._flush)
            except psycopg.OperationalError as exc:
                self._fail(exc)
        if self.lost is not None:
            answer.set_result(Answer([], None, self.lost))
        else:
            self._answer = answer
            if self._check is None:  # one timer for many round trips: it lapses when none is in flight
                self._check = self._loop.call_later(CHECK_S, self._checkup)
        meter = self.meter
        if meter is not None and meter.armed:  # the caller waits for the server from here
            meter.pause()
        return answer

    def roundtrip(self, query: bytes) -> asyncio.Future[Answer]:
        """One simple-query message: every statement's result (a future: no coroutine per call)."""
        return self._send(self._pg.send_query, query)

    def prepared(self, name: bytes, params: Sequence[bytes | None]) -> asyncio.Future[Answer]:
        """A PREPAREd statement with text parameters."""
        return self._send(self._pg.send_query_prepared, name, params)

    def params(
        self, query: bytes, params: Sequence[bytes | None], types: Sequence[int] | None = None
    ) -> asyncio.Future[Answer]:
        """One statement ($1, ...) with text parameters, their types given or inferred (an unnamed
        statement: any pooler)."""
        return self._send(self._pg.send_query_params, query, params, types)

    async def checked(self, query: bytes, params: Sequence[bytes | None] | None = None) -> Answer:
        """A round trip that must succeed as a whole: its failure raises."""
        answer = await (self.roundtrip(query) if params is None else self.params(query, params))
        meter = self.meter
        if meter is not None and meter.armed:
            meter.resume()
        failure = answer.failure()
        if failure is not None:
            raise failure
        return answer

    async def within(
        self, timeout: float, query: bytes, params: Sequence[bytes | None] | None = None
    ) -> Answer:
        """`checked`, bounded: past `timeout` the statement is cancelled and its answer drained
        (the wire serves again; a connection that does not drain is closed), and TimeoutError
        raises."""
        try:
            async with asyncio.timeout(timeout):
                return await self.checked(query, params)
        except TimeoutError:
            await self.settle()
            raise

    async def settle(self) -> None:
        """After a round trip given up on: cancel its statement on the server and drain its answer,
        or close the connection if it does not come within the cancel's bound."""
        if not self.busy or self.closed:
            return
        with contextlib.suppress(psycopg.Error, TimeoutError):
            async with asyncio.timeout(CANCEL_TIMEOUT_S):
                await self.connection.cancel_safe(timeout=CANCEL_TIMEOUT_S)
                if self._answer is not None:
                    drained: asyncio.Future[None] = self._loop.create_future()
                    self._drained = drained
                    await drained
        if self.busy:
            self.close()

    @contextlib.contextmanager
    def aside(self) -> Iterator[psycopg.AsyncConnection[Any]]:
        """Lend the connection to psycopg's API (a COPY, a cursor) between round trips."""
        if self._answer is not None:
            raise psycopg.InterfaceError("the connection is still reading the previous answer")
        self._unread()
        try:
            yield self.connection
        finally:
            if self.lost is None and not self.connection.closed:
                self._read()

    def close(self) -> None:
        """Close the connection as it is (the server rolls back what is open)."""
        self._unread()
        closed = psycopg.OperationalError("the connection was closed")
        if self.lost is None:
            self.lost = closed
        answer = self._answer
        if answer is not None:
            self._done(answer, Answer(self._results, self._error, closed))
        self._pg.finish()


def said_error(sqlstate: str | None, message: str) -> psycopg.Error:
    """The driver's error for what the server said (its class by SQLSTATE)."""
    try:
        kind: type[psycopg.Error] = psycopg.errors.lookup(sqlstate) if sqlstate else psycopg.OperationalError
    except KeyError:
        kind = psycopg.OperationalError
    return kind(message)
