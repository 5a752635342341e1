"""The live audit: while the run goes, the messages behind a watermark (every enqueue below it
landed) are judged a window at a time, on a session and a thread of their own, by the audit's own
statements (db/windows); a window's messages still pending are carried to the next. Each closed
window is kept on the server, so a killed run keeps its verdicts and `pgmq-sim audit` goes on from
the watermark; the run's end judges only what the windows left."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.threads import RunThread
from pgmq_sim.db.connection import connect, limit_lock_waits
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.db.values import QueueShape
from pgmq_sim.db.windows import (
    ClosedWindow,
    compact_journal,
    drop_views,
    keep_window,
    open_views,
    read_window,
    summarize_journal,
)
from pgmq_sim.engine.accounting import LiveAccount
from pgmq_sim.model.facts import AuditCounts
from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.audit import AuditVerdict, AuditWindow, LiveAudit, LiveAuditRecord, after_windows
from pgmq_sim.settings import Settings
from pgmq_sim.verdicts.audit import SHOW

SHARE_OF_TIME = 10  # the next window waits at least this many times the last one's judging
Judge = Callable[[AuditCounts, int], AuditVerdict]  # a window's counts and its messages: its verdict


class LiveJudge(RunThread):
    """Closes a window every `every_s` seconds, up to the watermark: the highest msg_id below which
    every enqueue landed (`safe`)."""

    def __init__(
        self,
        dsn: str,
        shape: QueueShape,
        run_id: str,
        every_s: float,
        safe: Callable[[], int],
        judge: Judge,
        retrying: bool,
        views_kept: bool,
        clock: Callable[[], float],
        stop: threading.Event,
        on_error: Callable[[BaseException], None],
        on_failure: Callable[[BaseException], None],
        account: LiveAccount | None = None,
        account_from: int = 0,
        compact: bool = False,
        keep_s: float = 0.0,
    ) -> None:
        super().__init__("live audit", stop, on_error)
        self._account = account  # the latency account, read a chunk at a time after each window
        self._account_from = account_from  # once the windows have judged this many journal rows
        # the closed windows' journal rows deleted once every window so far passed and the account
        # read them: the journal holds the open windows only
        self._compact = compact and account is not None
        self._keep_s = keep_s  # a completion's row kept this long: a worker in doubt of its commit asks
        self._compacted_to = 0  # the msg_ids up to this one compacted, but for those left then
        self.compacted = 0  # journal rows deleted
        self.compaction_stopped: str | None = None  # why the journal is kept from then on
        self._dsn, self._shape, self._run_id = dsn, shape, run_id
        self._every_s, self._safe, self._judge = every_s, safe, judge
        self._retrying, self._clock, self._on_failure = retrying, clock, on_failure
        # its views made once a session; not behind a pooler, which may hand them to another client
        # with the server connection (a transaction's, or a session's without a reset): there, made
        # and dropped in each window's transaction
        self._views_kept = views_kept
        self._conn: psycopg.Connection | None = None
        self._windows: list[AuditWindow] = []
        self._lock = threading.Lock()
        self.failures = 0  # windows not closed for an error (the next tick tries again)
        self.transactions = 0  # its commits on the server: the tool's, not the queue's

    def connection(self) -> psycopg.Connection | None:
        return self._conn

    def windows(self) -> list[AuditWindow]:
        with self._lock:
            return list(self._windows)

    def live(self) -> LiveAudit:
        return LiveAudit.of(self.windows())

    def record(self, end_from: int) -> LiveAuditRecord:
        """What the run's result keeps of it, the end having judged msg_ids after `end_from`."""
        windows = tuple(self.windows())
        return LiveAuditRecord(
            self._every_s, windows, end_from, self.failures, self.compacted, self.compaction_stopped
        )

    def body(self) -> None:
        """A window every `every_s`, or less often: the judging takes at most a tenth of the run's
        time, so the audit never becomes the load it measures."""
        wait = self._every_s
        try:
            while not self._halt.wait(wait):
                began = time.monotonic()
                self.close_window()
                wait = max(self._every_s, SHARE_OF_TIME * (time.monotonic() - began))
        finally:
            if self._conn is not None:
                self._conn.close()

    def close_window(self) -> AuditWindow | None:
        """The next window: the messages enqueued since the last one, and those it carried; an error
        is counted and said once, and the next tick tries again on a new session."""
        windows = self.windows()
        after = windows[-1].hi if windows else 0
        carried = windows[-1].carried if windows else 0
        hi = max(after, self._safe())
        if hi == after and not carried:
            return None
        began = time.perf_counter()
        try:
            conn = self._conn = self._conn or self._open()
            limit_lock_waits(conn)
            conn.execute("set transaction isolation level repeatable read")
            if not self._views_kept:
                open_views(conn, self._shape)
            read = read_window(conn, self._shape, after, hi, SHOW, self._retrying)
            verdict = self._judge(read.counts, hi - after)
            window = AuditWindow(
                len(windows) + 1,
                after,
                hi,
                self._clock(),
                read.journal_rows,
                len(read.pending),
                verdict,
                time.perf_counter() - began,
            )
            keep_window(conn, self._run_id, window.number, read, verdict.passed, verdict.as_json())
            if not self._views_kept:
                drop_views(conn)
            conn.commit()
            self.transactions += 1
        except psycopg.Error as exc:
            self._failed(exc)
            return None
        with self._lock:
            self._windows.append(window)
        self._summarize(conn)
        if (
            self._account is not None
            and sum(w.journal_rows for w in windows) + window.journal_rows >= self._account_from
        ):
            self._account.step()
            self._compact_closed(conn, window, windows)
        return window

    def _compact_closed(
        self, conn: psycopg.Connection, window: AuditWindow, before: list[AuditWindow]
    ) -> None:
        """The closed windows' journal rows the account has read, deleted (the windows' records, the
        groups' marks and the account keep what the end needs), while every window passed and no
        completion came after its window closed; else the journal is kept from then on."""
        cut = self._account.read_through if self._account is not None else None
        if not self._compact or self.compaction_stopped is not None or cut is None:
            return
        failed = next((w for w in (*before, window) if not w.verdict.passed), None)
        if failed is not None:
            self.compaction_stopped = f"window {failed.number} failed: its journal rows kept"
            return
        try:
            limit_lock_waits(conn)
            conn.execute("set transaction isolation level repeatable read")
            late, gone, upto = compact_journal(
                conn, self._run_id, window.number, self._compacted_to, window.hi, cut, self._keep_s
            )
            conn.commit()
            self.transactions += 1
        except psycopg.Error:  # the next window tries again, on a new session where this one was lost
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            return
        if late:
            self.compaction_stopped = (
                f"{count_text(late)} completion(s) of closed windows' messages came after they closed: the"
                " journal kept"
            )
        self.compacted += gone
        self._compacted_to = upto

    def _open(self) -> psycopg.Connection:
        """The live audit's session, its views of the tool's tables made once where they may stay."""
        conn = connect(self._dsn, "live audit")  # application_name 'pgmq-sim live audit'
        if self._views_kept:
            limit_lock_waits(conn)
            open_views(conn, self._shape)
            conn.commit()
            self.transactions += 1
        return conn

    def _summarize(self, conn: psycopg.Connection) -> None:
        """The journal's new ranges summarized for the next read; a vacuum doing it meanwhile wins."""
        try:
            limit_lock_waits(conn)
            summarize_journal(conn)
            conn.commit()
            self.transactions += 1
        except psycopg.Error:  # a lost session is found, and opened again, by the next window
            with contextlib.suppress(psycopg.Error):
                conn.rollback()

    def _failed(self, exc: psycopg.Error) -> None:
        self.failures += 1
        if self.failures == 1:
            self._on_failure(exc)
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def counts_after_windows(
    db: QueueDatabase, run_id: str, expected: int, retrying: bool
) -> tuple[AuditCounts, list[ClosedWindow], str | None]:
    """The run's audit counts, going on from the closed windows the server kept where they passed
    and no completion came after they closed: the windows used, and else why none was."""
    windows, rows_now = db.closed_windows(run_id)
    compacted = sum(w.compacted_rows for w in windows)
    late = rows_now + compacted - sum(w.journal_rows for w in windows)
    why: str | None = None
    if compacted:  # the journal cannot be judged whole again
        rest = db.audit_rest(windows[-1].hi, max(expected, windows[-1].hi), SHOW, retrying)
        counts = after_windows(rest.counts, [w.audit for w in windows])
        if late:  # every closed window's message had finished: a completion after it is its second
            counts = dataclasses.replace(counts, duplicates=counts.duplicates + late)
            why = (
                f"{count_text(late)} completion(s) of a closed window's messages came after it closed:"
                f" counted as duplicates, as {count_text(compacted)} journal row(s) of the closed windows"
                " were compacted"
            )
        elif not all(w.passed for w in windows):
            why = (
                f"a window failed: {count_text(compacted)} journal row(s) compacted before it, so its own"
                " evidence stands"
            )
        return counts, windows, why
    if not windows:
        pass
    elif not all(w.passed for w in windows):
        why = "a window failed: the whole run judged again, for every id"
    elif late:
        why = (
            f"{count_text(late)} completion(s) of a closed window's messages came after it closed: judged"
            " again whole"
        )
    elif windows[-1].hi > expected:
        produced = count_text(expected)
        why = f"the windows reach msg_id {windows[-1].hi}, past the {produced} produced: judged again whole"
    else:
        rest = db.audit_rest(windows[-1].hi, expected, SHOW, retrying)
        return after_windows(rest.counts, [w.audit for w in windows]), windows, None
    return db.audit_counts(expected, SHOW, retrying), [], why


def journal_kept_whole(settings: Settings, shape: QueueShape, counts_from_journal: bool) -> str | None:
    """Why the end reads closed windows' journal rows again, so that none may be compacted."""
    if not judged_live(settings, shape):
        return "no live audit closes windows (-audit-window 0, -no-audit, or groups ordered by priority)"
    if settings.retrying:
        return "the end reads every failed attempt's group for its head-of-line blocking (retries)"
    if settings.phases or settings.sweep is not None:
        return "each phase's or sweep step's latency account reads its messages' rows at the end"
    if not shape.seed_table:
        return "the design keeps a log of its own, which the end counts against the journal"
    if counts_from_journal:
        return "a lost worker process's completions are counted from it"
    return None


def judged_live(settings: Settings, shape: QueueShape) -> bool:
    """The live audit runs where it was asked and a group's order is enqueue order (by priority, a
    later message may pass); a spread run's watermark is its processes' lowest msg_id still owed,
    less one."""
    return settings.live_audit_asked and not shape.by_priority
