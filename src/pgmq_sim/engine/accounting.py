"""The latency account kept as the run goes (result/running_account), in a process of its own:
after each window of the live audit, the journal's claims up to the cut-off (a margin before every
worker's latest journaled claim, db/account.read_live_chunk) are read on the process's session as
one chunk and split; the
run's end reads only the rest. Its own process, so that splitting never takes the workers'
interpreter lock, and its CPU is its own, reported apart from the run's (`live_cpu_s`); at the
lowest priority (nice 19), so that on cores the run fills it falls behind rather than slowing the
run (the chunks' reads still cost the server), and the end waits for what it left.

A message enqueued before what the account forgot, a span journaled after its chunk was read that
began before the chunk's end, an error, a process that died or did not finish in time, or a cohort
moving outside the messages it split leave the end to read the whole journal, as before, with the
reason."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import psycopg

from pgmq_sim.db.account import MARGIN_S, Seen, read_chunk, read_late, read_live_chunk
from pgmq_sim.db.connection import connect
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.running_account import RunningAccount

LOOKBACK_S = 30.0  # the account keeps the spans of this long before its cut-off, or of
LOOKBACK_MESSAGES = 30_000  # the time this many messages took at the run's rate so far, if shorter,
LOOKBACK_WAITS = 3.0  # or of three times the longest wait so far, if longer: its memory is this many
# messages' spans, not the rate's (replaying 1M at 1,357 msg/s, 60 s kept peaked at 97.8 MB, 20 s at 70.8)
START_S = 30.0  # the process's start (its imports) and a step's reply: waited at most this
IDLE_S = 1.0  # the process looks for its parent this often while it waits
NICE = 19  # the lowest scheduling priority: on cores the run fills, it falls behind instead
CHUNK_MOST = 10_000  # journeys in one read, and queued for the sweeps before the next is read: a
# process far behind the run holds these, not the run's backlog (the rest waits in the journal);
# replaying a 300,000 journal, its peak was 111 MB at 30,000, 82 at 10,000, 76 at 5,000


@dataclass(frozen=True)
class Kept:
    """The process's answer to a step, or its last: what it holds so far."""

    chunks: int
    failed: str | None
    cpu_s: float
    account: LatencyAccount | None = None
    last: bool = False
    upto: float = 0.0  # its last chunk's end (the server's epoch): every claim before it was read


class AccountKeeper:
    """The account in the process: each step reads the next chunk, in one snapshot, on its session."""

    def __init__(
        self,
        dsn: str,
        ordered: bool,
        workers: Sequence[str],
        split_all: bool = False,
        most: int = CHUNK_MOST,
    ) -> None:
        self._dsn, self._ordered, self._workers, self._split_all = dsn, ordered, list(workers), split_all
        self._most = most
        self._conn: psycopg.Connection | None = None
        self._running: RunningAccount | None = None
        self._origin: float | None = None
        self._after = 0.0  # the last chunk's end: the server's epoch
        self._seen: Seen | None = None  # what each worker had journaled when it was read
        self._wanted = False  # a step's chunk is left to read (the sweeps were behind, or it was cut)
        self._offset_s: float | None = None  # the step's: the run's clock against the server's
        self.failed: str | None = None  # why the end reads the whole journal

    def kept(self, account: LatencyAccount | None = None, last: bool = False) -> Kept:
        chunks = self._running.chunks if self._running is not None else 0
        return Kept(chunks, self.failed, time.process_time(), account, last, self._after)

    def step(self, offset_s: float | None) -> bool:
        """The journal's claims since the last cut-off, up to the next; False: no chunk read now."""
        self._wanted, self._offset_s = True, offset_s
        return self.read_wanted()

    @property
    def waiting(self) -> bool:
        """A step's chunk is left to read once the sweeps have room."""
        return self._wanted and self.failed is None

    def read_wanted(self) -> bool:
        """The chunk a step asked for, once the sweeps hold at most `most` journeys (so the process
        holds one read, and the rest waits in the journal); a read cut at `most` journeys leaves the
        rest wanted, so a process behind the run reads on at its sweeps' pace, not a step's."""
        if not self.waiting or (self._running is not None and self._running.queued() > self._most):
            return False
        try:
            conn = self._conn = self._conn or connect(self._dsn, "latency account")
            read = read_live_chunk(conn, self._origin, self._after, self._seen, self._workers, self._most)
        except psycopg.Error as exc:
            self.failed = f"a chunk of the journal was not read ({type(exc).__name__})"
            return False
        self._wanted = read is not None and read.capped
        if read is None:
            return False
        if read.late:
            self.failed = late_text(read.late)
            return False
        origin, offset_s = read.origin, self._offset_s
        self._origin = origin
        running = self._running = self._running or RunningAccount(
            self._ordered, None if offset_s is None else origin - offset_s, self._split_all
        )
        upto = read.upto - origin
        floor = upto - max(lookback_s(running.messages, upto), LOOKBACK_WAITS * running.longest_s)
        journeys, free, claims = read.chunk
        running.feed(journeys, free, claims, upto, floor)
        self._after, self._seen = read.upto, read.seen
        return True

    def finish(self, free_at_end: list[tuple[str, str]], timeout_s: float) -> LatencyAccount | None:
        """The rest of the journal, and the account; None where the end must read the whole journal.
        The rest is read as the run's chunks were, a read of at most `most` journeys at a time while
        the sweeps catch up, up to the cut-off; what lies past it, in one read."""
        running, origin, conn = self._running, self._origin, self._conn
        if self.failed is not None or running is None or origin is None or conn is None:
            return None
        deadline = time.monotonic() + timeout_s
        while self.failed is None and time.monotonic() < deadline:
            if running.queued() > self._most:
                time.sleep(IDLE_S / 20)
            elif not self.step(None):
                break
        if self.failed is not None:
            return None
        try:
            late = read_late(conn, self._seen, self._after)
            journeys, free, claims = read_chunk(conn, origin, self._after, None, free_at_end)
        except psycopg.Error as exc:
            self.failed = f"the journal's rest was not read ({type(exc).__name__})"
            return None
        if late:
            self.failed = late_text(late)
            return None
        running.feed(journeys, free, claims, float("inf"), float("inf"))
        account = running.finish(timeout_s)
        if account is None:
            if running.missed is not None:
                self.failed = f"msg_id {running.missed} was enqueued before what the account had let go"
            elif running.moved is not None:
                self.failed = f"{running.moved or 'the run'}'s cohorts took messages it had not split"
            else:
                self.failed = "the account kept as the run went could not be closed"
        return account

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()


def lookback_s(messages: int, upto_s: float) -> float:
    """How long before its cut-off the account keeps spans, the longest wait aside: LOOKBACK_S, or
    the time LOOKBACK_MESSAGES took at the rate of the `messages` read by `upto_s`, if shorter."""
    if messages <= 0 or upto_s <= 0:
        return LOOKBACK_S
    return min(LOOKBACK_S, LOOKBACK_MESSAGES * upto_s / messages)


def late_text(late: int) -> str:
    return (
        f"{count_text(late)} worker span(s) of free or claim time, placed by the worker's own timing, began"
        f" more than {MARGIN_S:g} s before the cut-off they were journaled after"
    )


def keep_account(pipe: Connection, dsn: str, ordered: bool, workers: list[str], split_all: bool) -> None:
    """The process: steps until the end's message, or until its parent is gone. A signal is the run's
    to handle (a first Ctrl-C ends the run, which still asks for the account)."""
    for caught in (signal.SIGINT, signal.SIGTERM):
        signal.signal(caught, signal.SIG_IGN)
    with contextlib.suppress(OSError):  # where the cores are all busy, the run goes first
        os.nice(NICE)
    parent = os.getppid()
    keeper = AccountKeeper(dsn, ordered, workers, split_all)
    try:
        while os.getppid() == parent:
            if not pipe.poll(IDLE_S / 20 if keeper.waiting else IDLE_S):
                if keeper.read_wanted():
                    pipe.send(keeper.kept())
                continue
            what, *args = pipe.recv()
            if what == "step":
                keeper.step(*args)
                pipe.send(keeper.kept())
            elif what == "finish":
                account = keeper.finish(*args)
                pipe.send(keeper.kept(account, last=True))
                return
            else:
                return
    except (EOFError, OSError):  # the parent went: its end says what happened
        return
    finally:
        keeper.close()


class LiveAccount:
    """The run's side of the account's process: steps sent without waiting, the end waited, bounded."""

    def __init__(
        self,
        dsn: str,
        ordered: bool,
        workers: Sequence[str],
        offset_s: Callable[[], float | None],
        split_all: bool = False,
    ):
        self._dsn, self._ordered, self._workers, self._offset_s = dsn, ordered, list(workers), offset_s
        self._split_all = split_all  # every message split, not the candidates: the journal is not read again
        self._process: Any = None
        self._pipe: Connection | None = None
        self._last = Kept(0, None, 0.0)
        self.failed: str | None = None  # why the end reads the whole journal

    @property
    def chunks(self) -> int:
        return self._last.chunks

    @property
    def cpu_s(self) -> float:
        return self._last.cpu_s

    @property
    def read_through(self) -> float | None:
        """The server's epoch before which the process has read every claim, as it last said (None:
        nothing read yet, or it failed: the end may need the whole journal)."""
        if self.failed is not None or self._last.failed is not None:
            return None
        return self._last.upto or None

    def step(self) -> None:
        """After a window: the next chunk, read by the process as soon as it can."""
        if self.failed is not None:
            return
        try:
            if self._pipe is None:
                self._start()
            assert self._pipe is not None
            self._drain()
            self._pipe.send(("step", self._offset_s()))
        except (OSError, EOFError, ValueError) as exc:
            self._fail(f"the account's process could not be reached ({type(exc).__name__})")

    def finish(self, free_at_end: list[tuple[str, str]], timeout_s: float) -> LatencyAccount | None:
        """The rest of the journal and the account, from the process; None where the end must read
        the whole journal (`failed` says why)."""
        pipe = self._pipe
        if self.failed is not None or pipe is None:
            return None
        try:
            pipe.send(("finish", free_at_end, timeout_s))
            deadline = time.monotonic() + timeout_s + START_S
            while not self._last.last:
                if not pipe.poll(max(0.0, deadline - time.monotonic())):
                    self._fail(f"the account's process did not answer within {timeout_s + START_S:g} s")
                    return None
                self._last = pipe.recv()
        except (OSError, EOFError) as exc:
            self._fail(f"the account's process ended before it answered ({type(exc).__name__})")
            return None
        self.close()
        if self._last.account is None:
            self.failed = self._last.failed or "the account kept as the run went could not be closed"
        return self._last.account

    def close(self) -> None:
        """The process ended: asked, then made to (a run that ends in an error ends here too)."""
        process, pipe = self._process, self._pipe
        self._process = self._pipe = None
        if pipe is not None:
            with contextlib.suppress(OSError, ValueError):
                pipe.send(("stop",))
            pipe.close()
        if process is not None:
            process.join(START_S / 10)
            if process.is_alive():
                process.kill()
                process.join(START_S / 10)

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        mine, theirs = context.Pipe()
        process = context.Process(
            target=keep_account,
            args=(theirs, self._dsn, self._ordered, self._workers, self._split_all),
            name="pgmq-sim latency account",
            daemon=True,
        )
        process.start()
        theirs.close()
        self._process, self._pipe = process, mine

    def _drain(self) -> None:
        pipe = self._pipe
        while pipe is not None and pipe.poll(0):
            self._last = pipe.recv()
        if self._last.failed is not None:
            self._fail(self._last.failed)

    def _fail(self, why: str) -> None:
        self.failed = self.failed or why
        self.close()
