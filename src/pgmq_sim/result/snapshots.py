"""The oldest snapshot, timed by what holds vacuum back: the same backend_xmin, held by the same
session, seen in consecutive samples. A transaction's age (xact_start) is not its snapshot's: a
READ COMMITTED session idle in a transaction holds none, and the notifications a LISTEN session
reads are read in transactions PostgreSQL dates from its last statement, the LISTEN at the run's
start, though each holds its snapshot for a moment."""

from __future__ import annotations

import threading

from pgmq_sim.model.events import SnapshotHold
from pgmq_sim.model.facts import TablePulse


class SnapshotWatch:
    """Fed the oldest snapshot once a second (the housekeeper's pulse); keeps the longest hold."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chain: tuple[int, str] | None = None  # (pid, backend_xmin) seen in the last sample
        self._since = 0.0
        self._dead_before = 0
        self._longest: SnapshotHold | None = None
        self._longest_chain: tuple[int, str, float] | None = None

    def see(self, at_s: float, pulse: TablePulse) -> float:
        """This second's oldest snapshot and dead tuples; how long that snapshot has been held (0 the
        first time it is seen, and when nobody holds one)."""
        pid, xmin, dead = pulse.holder_pid, pulse.holder_xmin, pulse.dead_tuples
        with self._lock:
            if pid is None or xmin is None:
                self._chain = None
                return 0.0
            if self._chain != (pid, xmin):
                self._chain, self._since, self._dead_before = (pid, xmin), at_s, dead
            held = at_s - self._since
            chain = (pid, xmin, self._since)
            longest, same = self._longest, chain == self._longest_chain
            if held > 0 and (same or longest is None or held > longest.held_s):
                peak = max(dead, longest.dead_tuples_peak) if longest is not None and same else dead
                self._longest = SnapshotHold(
                    pid, pulse.holder_application, held, self._dead_before, peak, pulse.xmin_age
                )
                self._longest_chain = chain
            return held

    def longest(self) -> SnapshotHold | None:
        with self._lock:
            return self._longest
