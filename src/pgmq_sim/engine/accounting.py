"""The latency account kept as the run goes (result/running_account): after each window of the live
audit, on its session and thread, the journal's claims up to the cut-off (every claim before it is
journaled, db/account.read_cutoff) are read as one chunk and split; the run's end reads only the
rest. A message enqueued before what the account forgot, an error, or the slowest 1% moving below
the messages whose hidden seconds were kept leave the end to read the whole journal, as before."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg

from pgmq_sim.db.account import read_live_chunk
from pgmq_sim.db.queue import QueueDatabase
from pgmq_sim.result.account import LatencyAccount
from pgmq_sim.result.running_account import RunningAccount

LOOKBACK_S = 60.0  # the account keeps the spans of at least this long before its cut-off
LOOKBACK_WAITS = 3.0  # and of three times the longest wait so far


class LiveAccount:
    def __init__(self, ordered: bool, workers: Sequence[str], offset_s: Callable[[], float | None]) -> None:
        self._ordered, self._workers, self._offset_s = ordered, list(workers), offset_s
        self._running: RunningAccount | None = None
        self._origin: float | None = None
        self._after = 0.0  # the last cut-off: the server's epoch
        self.failed: str | None = None  # why the end reads the whole journal

    @property
    def chunks(self) -> int:
        return self._running.chunks if self._running is not None else 0

    def step(self, conn: psycopg.Connection) -> None:
        """The journal's claims since the last cut-off, up to the next, in one snapshot."""
        if self.failed is not None:
            return
        try:
            read = read_live_chunk(conn, self._origin, self._after, self._workers)
        except psycopg.Error as exc:
            self.failed = f"the journal was not read as the run went ({type(exc).__name__})"
            return
        if read is None:
            return
        self._origin, cutoff, (journeys, free, claims) = read
        running = self._running = self._running or self._open(self._origin)
        upto = cutoff - self._origin
        floor = upto - max(LOOKBACK_S, LOOKBACK_WAITS * running.longest_s)
        running.feed(journeys, free, claims, upto, floor)
        self._after = cutoff

    def finish(
        self, db: QueueDatabase, free_at_end: list[tuple[str, str]], timeout_s: float
    ) -> LatencyAccount | None:
        """The rest of the journal, and the account; None where the end must read the whole journal."""
        running, origin = self._running, self._origin
        if self.failed is not None or running is None or origin is None:
            return None
        journeys, free, claims = db.account_chunk(origin, self._after, free_at_end)
        running.feed(journeys, free, claims, float("inf"), float("inf"))
        account = running.finish(timeout_s)
        if account is None:
            self.failed = (
                f"msg_id {running.missed} was enqueued before what the account had let go"
                if running.missed is not None
                else "the account kept as the run went could not be closed"
            )
        return account

    def _open(self, origin: float) -> RunningAccount:
        offset = self._offset_s()
        return RunningAccount(self._ordered, None if offset is None else origin - offset)
