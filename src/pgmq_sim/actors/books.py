"""What a worker counts and logs of the messages it finishes: its own stats, the run's timeline, the
processed count every worker of the process adds to, and the run log. Kept apart from how the
worker finishes them (actors/worker)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from pgmq_sim.db.claims import Completion
from pgmq_sim.db.values import Claimed
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.runlog import RunLog


class ProcessedCounter:
    """Messages committed as processed, across workers; sets `done` at the target. Written on the
    run's loop only (or, on a Locust master, from the worker processes' reports); read anywhere.

    A completion whose commit outcome is unknown and could not be checked (no journal)
    is counted apart, so the run can ask the database before it calls itself done."""

    def __init__(self, target: int | None, done: threading.Event | None = None) -> None:
        self._count = 0
        self._in_doubt = 0
        self._target = target
        self._done = done

    def add(self) -> None:
        self._count += 1
        if self._target is not None and self._count >= self._target and self._done is not None:
            self._done.set()

    def add_in_doubt(self) -> None:
        self._in_doubt += 1

    def set_totals(self, count: int, in_doubt: int) -> None:
        """The count as reported by workers elsewhere (a total, not a stream)."""
        self._count, self._in_doubt = count, in_doubt
        if self._target is not None and self._count >= self._target and self._done is not None:
            self._done.set()

    @property
    def count(self) -> int:
        return self._count

    @property
    def in_doubt(self) -> int:
        return self._in_doubt


class WorkerBooks:
    """What one worker counts and logs of the messages it finished (its stats, the run's timeline,
    the processed count, the run log): apart from how it finishes them."""

    def __init__(
        self,
        stats: WorkerStats,
        timeline: Timeline,
        counter: ProcessedCounter,
        log: RunLog,
        clock: Callable[[], float],
    ) -> None:
        self.stats = stats
        self._timeline = timeline
        self._counter = counter
        self._log = log
        self._clock = clock

    def completed(self, claimed: Sequence[Claimed], done: Completion, busy_s: float, work_s: float) -> None:
        """A completion's commit answered: each message it finished, counted and logged."""
        stats = self.stats
        share = 1 / len(claimed)  # the claim's and the round trip's time, spread over its messages
        for index, message in enumerate(claimed):
            if not done.finished[index]:
                stats.lost_ownership += 1  # recovered while we worked: another worker has it now
                self._log.event(
                    f"worker {stats.name}: msg_id {message.msg_id} was recovered from it; not completed"
                )
                continue
            e2e_ms = done.e2e_ms(index)
            stats.record_processed(e2e_ms, busy_s * share, work_s * share)
            self._timeline.processed(self._clock(), e2e_ms)
            self._counter.add()
            self._log.message(
                stats.name,
                message.queue_type,
                message.msg_id,
                message.order_id,
                done.time_added[index],
                message.claimed_at,
                done.committed_at,
            )

    def settled(self, kind: str, claimed: Claimed, landed: bool | None) -> None:
        """A commit whose answer was lost, asked about after reconnecting (None: cannot tell): a
        completion is counted only if the journal has it. A failure's bookkeeping in doubt may have
        made a dead letter: the run asks the server at the end."""
        if landed is None:
            self._counter.add_in_doubt()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} {kind} outcome unknown")
        elif landed:
            self.stats.record_processed(None, 0.0, 0.0)
            self._timeline.processed(self._clock(), None)
            self._counter.add()
            self._log.event(f"worker {self.stats.name}: msg_id {claimed.msg_id} had committed")

    def failed(self, claimed: Claimed, dead: bool | None, busy_s: float, work_s: float) -> None:
        """A failed attempt recorded (None: the message was no longer this worker's)."""
        stats = self.stats
        stats.busy_s += busy_s
        stats.work_s += work_s
        if dead is None:
            stats.lost_ownership += 1
            return
        stats.failed_attempts += 1
        self._log.event(
            f"failed worker={stats.name} type={claimed.queue_type} msg_id={claimed.msg_id}"
            f" order_id={claimed.order_id} attempt={claimed.attempt}" + (" dead-letter" if dead else "")
        )
        if dead:
            stats.dead_lettered += 1
            self._counter.add()  # finished: the run ends when every message is processed or dead
