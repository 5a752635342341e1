"""The run's housekeeper, a task on the run's event loop with a connection of its own: once a
second it samples the table's dead tuples and the oldest snapshot on the server; many times a
second, what the run's backends wait on (the wait profile, -wait-sample-hz); in split mode it also
recovers messages whose owner is gone, every heartbeat or quarter lease, whichever is sooner. With
-pooler-admin, the pooler's watch reads the pool through its console each second, on a thread of
its own (below).

Recovery runs here, in one task, rather than in every claim: the claim stays the hot path it was,
and a message whose worker died comes back about a second after its owner's heartbeat stopped, or
when its lease expires (a worker alive but stuck).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import psycopg

from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.ownership import OWNER_TIMEOUT_S
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.db.connection import PRODUCER_APPLICATION
from pgmq_sim.db.pooler import PoolerConsole
from pgmq_sim.db.samples import SampleSession
from pgmq_sim.db.values import QueueShape
from pgmq_sim.model.events import PoolerView, SnapshotHold
from pgmq_sim.model.facts import PoolerPulse
from pgmq_sim.result.holders import LockCensusTally
from pgmq_sim.result.snapshots import SnapshotWatch
from pgmq_sim.result.timeline import PulseSample, Timeline
from pgmq_sim.result.waits import WaitTally
from pgmq_sim.runlog import RunLog

PULSE_EVERY_S = 1.0
CENSUS_EVERY_S = 0.5  # who holds the locks a claim may skip or wait on
CENSUS_ROWS_MAX_MB = 32.0  # the queue's rows are counted (a scan) while its tables are this small


class Housekeeper:
    def __init__(
        self,
        session: SampleSession,
        shape: QueueShape,
        timeline: Timeline,
        clock: Callable[[], float],
        halt: Halt,
        log: RunLog,
        recover_every_s: float | None,
        waits: tuple[WaitTally, float] | None = None,  # the tally, and the sampling interval
        census: LockCensusTally | None = None,
        producer_waits: WaitTally | None = None,  # the producer's sessions' samples, apart
    ) -> None:
        self._session = session
        self._producer_waits = producer_waits
        self._shape = shape
        self._timeline = timeline
        self._clock = clock
        self._halt = halt
        self._log = log
        self._recover_every_s = recover_every_s
        self.recovered = 0
        self.transactions = 0  # the tool's, on the server: pulses, recovery rounds, samples
        self.worker_backends_max = 0  # server connections seen serving workers at once
        self._snapshots = SnapshotWatch()
        self._waits = waits
        self._census = census
        self._table_mb: float | None = None  # the last pulse's

    async def run(self) -> None:
        bell = self._halt.bell()
        next_pulse = next_recovery = next_sample = next_census = time.monotonic()
        try:
            while not self._halt.is_set():
                now = time.monotonic()
                if now >= next_pulse:
                    next_pulse = now + PULSE_EVERY_S
                    await self._pulse()
                if self._recover_every_s is not None and now >= next_recovery:
                    next_recovery = now + self._recover_every_s
                    await self._recover()
                wake = min(next_pulse, next_recovery if self._recover_every_s is not None else next_pulse)
                if self._census is not None:
                    if now >= next_census:
                        next_census = now + CENSUS_EVERY_S
                        await self._take_census(self._census)
                    wake = min(wake, next_census)
                if self._waits is not None:
                    if now >= next_sample:
                        next_sample = max(next_sample + self._waits[1], now)
                        await self._sample()
                    wake = min(wake, next_sample)
                await self._halt.sleep(wake - time.monotonic(), bell)
        finally:
            self._halt.forget(bell)
            self._session.close()

    async def _sample(self) -> None:
        """Best effort, as the pulse: a sample missed is not counted (its tick neither)."""
        assert self._waits is not None
        tally = self._waits[0]
        self.transactions += 1
        try:
            sample = await self._session.waits()
        except (psycopg.Error, TimeoutError):
            return
        at = self._clock()
        tally.add_counts(sample.counts, sample.lock_events, sample.other_events, at)
        if self._producer_waits is not None:  # every sample a tick: the shares are per sample
            self._producer_waits.add_counts(*(sample.producer or ((0,) * len(sample.counts), {}, {})))
        if sample.blockers:
            tally.blocked(sample.blockers, at)
            if self._producer_waits is not None:
                self._producer_waits.blocked(b for b in sample.blockers if b.waiter == PRODUCER_APPLICATION)
            if self._census is not None:  # the census's holders: who blocked the run's sessions, when
                self._census.blocked(at, sample.blockers)

    async def _take_census(self, tally: LockCensusTally) -> None:
        """Best effort, as the samples; the queue's rows are counted only while its tables are small."""
        self.transactions += 1
        small = self._table_mb is not None and self._table_mb <= CENSUS_ROWS_MAX_MB
        try:
            sample = await self._session.census(self._shape.tables, count_rows=small)
        except (psycopg.Error, TimeoutError):
            return
        tally.add(self._clock(), sample)

    async def _pulse(self) -> None:
        """Best effort: a sample missed (the server restarting, a lock) is just a gap."""
        self.transactions += 1
        try:
            pulse = await self._session.pulse(self._shape.tables)
        except (psycopg.Error, TimeoutError):
            return
        at = self._clock()
        held_s = self._snapshots.see(at, pulse)  # the same backend_xmin as a second ago: held
        mb = self._table_mb = round(pulse.table_bytes / 2**20, 3)
        sample = PulseSample(pulse.dead_tuples, mb, pulse.autovacuums, round(held_s, 1), resident_mb())
        self._timeline.pulse(at, sample)
        self.worker_backends_max = max(self.worker_backends_max, pulse.worker_backends)

    async def _recover(self) -> None:
        """A round that cannot run (the queue locked elsewhere, the server away) is tried again
        at the next tick; recovery only needs to happen eventually."""
        self.transactions += 1
        try:
            recovered = await self._session.recover(self._shape, OWNER_TIMEOUT_S)
        except (psycopg.Error, TimeoutError) as exc:
            self._log.event(f"recovery round skipped: {type(exc).__name__}")
            return
        for msg_id, owner, expired in recovered:
            self.recovered += 1
            why = "its lease expired" if expired else "its owner stopped beating"
            self._log.event(f"recovered msg_id {msg_id} from {owner}: {why}")

    def longest_hold(self) -> SnapshotHold | None:
        return self._snapshots.longest()


class PoolerWatch(RunThread):
    """The pool as the pooler's console shows it, each second. On a thread of its own: the
    housekeeper's server samples go through the pooler and wait while it pauses; this must not."""

    def __init__(
        self,
        console: PoolerConsole,
        timeline: Timeline,
        clock: Callable[[], float],
        stop: threading.Event,
        on_error: Callable[[BaseException], None],
    ) -> None:
        super().__init__("pooler watch", stop, on_error)
        self._console = console
        self._timeline = timeline
        self._clock = clock
        self._last: PoolerPulse | None = None
        self._view: PoolerView | None = None  # so far
        self._lock = threading.Lock()

    def body(self) -> None:
        # one pulse as the run starts and one as it stops: the waits are counted between pulses, so
        # without them a short run's first and last second (most of it on a loaded host) go uncounted
        self._pulse()
        while not self._halt.wait(PULSE_EVERY_S):
            self._pulse()
        self._pulse()

    def _pulse(self) -> None:
        try:
            seen = self._console.pulse()
        except psycopg.Error:  # the pooler away (restarting): a gap
            return
        if seen is not None:
            self._add(seen)

    def _add(self, seen: PoolerPulse) -> None:
        self._timeline.pooler(self._clock(), seen)
        last, view = self._last, self._view or PoolerView(0, 0, 0.0, 0, 0.0)
        waited = 0.0
        if last is not None:  # a restarted pooler counts its waits from 0 again
            waited = seen.waited_s - (last.waited_s if seen.waited_s >= last.waited_s else 0.0)
        self._last = seen
        with self._lock:
            self._view = PoolerView(
                view.samples + 1,
                max(view.waiting_max, seen.waiting),
                max(view.longest_wait_ms, seen.longest_wait_ms),
                max(view.servers_active_max, seen.servers_active),
                view.waited_s + waited,
            )

    def view(self) -> PoolerView | None:
        with self._lock:
            return self._view


def resident_mb() -> float | None:
    """The tool's resident memory, from /proc (None where there is no /proc)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
