"""Live progress: bars on a terminal, a plain line every few seconds otherwise.

Every figure on screen is true: the total bar is processed of target (rounded down,
so 99.6% never reads 100%) with an ETA from the recent rate; a worker's bar is its
busy share, the one per-worker figure with a real 100%, beside its count and rate.
"""

from __future__ import annotations

import math
import time
from collections import deque

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from pgmq_sim.model.quantities import count_text
from pgmq_sim.result.audit import LiveAudit
from pgmq_sim.result.observer import LiveFigures
from pgmq_sim.result.stats import WorkerCounters

PLAIN_EVERY_S = 5.0
RATE_WINDOW_S = 10.0


def floor_percent(done: int, total: int) -> str:
    """Rounded down to 0.1 %: a run that is not finished never shows 100 %."""
    if total <= 0:
        return "0.0%"
    return f"{math.floor(done * 1000 / total) / 10:.1f}%"


def audit_text(audit: LiveAudit) -> str:
    """The live audit so far, once a window closed: 'ok 12,000 checked in 4 windows' or what failed."""
    if not audit.windows:
        return "waiting for its first window"
    bad = [f"{count_text(n)} {what}" for n, what in ((audit.lost, "lost"), (audit.duplicated, "duplicated"),
           (audit.out_of_order, "out of order")) if n]  # fmt: skip
    verdict = "FAIL " + ", ".join(bad) if bad or audit.failed_windows else "ok"
    return f"{verdict} {count_text(audit.checked)} checked in {count_text(audit.windows)} window(s)"


def eta_text(remaining: int, rate: float) -> str:
    if remaining <= 0:
        return "done"
    if rate <= 0:
        return "ETA -"
    seconds = int(remaining / rate)
    return f"ETA {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class RecentRate:
    """Messages per second over the last few seconds (the ETA should follow the run's pace now)."""

    def __init__(self) -> None:
        self._points: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> float:
        self._points.append((now, done))
        while len(self._points) > 2 and now - self._points[0][0] > RATE_WINDOW_S:
            self._points.popleft()
        first_at, first_done = self._points[0]
        return (done - first_done) / (now - first_at) if now > first_at else 0.0


class RunProgress:
    """Drawn from the main thread only; reads the workers' counters."""

    def __init__(self, console: Console, figures: LiveFigures, mode: str) -> None:
        self._console = console
        self._workers = list(figures.workers)
        self._target = figures.target
        self._duration = figures.duration_s
        self._produced = figures.produced
        self._phase = figures.phase
        self._audit = figures.audit
        self._limit = figures.limit
        self._started = time.monotonic()
        self._last_plain = self._started
        self._rate = RecentRate()
        live = mode == "bars" or (mode == "auto" and console.is_terminal)
        self._plain = mode == "plain" or (mode == "auto" and not console.is_terminal)
        self._bars: Progress | None = None
        if live:
            self._bars = Progress(
                TextColumn("{task.description:>10}"),
                BarColumn(),
                TextColumn("{task.fields[note]}"),
                console=console,
                transient=False,
            )
            total = self._target if self._target is not None else self._duration
            self._total = self._bars.add_task("total", total=total, note="")
            self._per_worker = [
                self._bars.add_task(w.name, total=1.0, note=w.queue_type) for w in self._workers
            ]
            self._bars.start()

    def processed(self) -> int:
        return WorkerCounters.total(self._workers).processed

    def update(self) -> None:
        done = self.processed()
        now = time.monotonic()
        rate = self._rate.add(now, done)
        elapsed = max(now - self._started, 1e-9)
        if self._bars is not None:
            counted = self._target is not None
            self._bars.update(
                self._total,
                completed=done if counted else min(elapsed, self._duration or elapsed),
                note=self.summary(done, elapsed, rate),
            )
            for task, w in zip(self._per_worker, self._workers, strict=True):
                busy = min(1.0, w.busy_s / elapsed)
                self._bars.update(
                    task,
                    completed=busy,
                    note=f"{w.queue_type}  busy {busy:.0%}  {count_text(w.processed)} msgs"
                    f"  {w.processed / elapsed:.0f}/s",
                )
        elif self._plain and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self._console.print(self.line(done, elapsed, rate), highlight=False)

    def summary(self, done: int, elapsed: float, rate: float) -> str:
        phase = self._phase()
        if self._target is not None:
            said = f"{count_text(done)}/{count_text(self._target)} {floor_percent(done, self._target)}"
            text = f"{said}  {rate:.0f} msg/s  {elapsed:.0f} s  {eta_text(self._target - done, rate)}"
        else:
            text = f"{count_text(done)} processed  {rate:.0f} msg/s  {self._seconds(elapsed, '/')}"
        return text + (f"  {phase}" if phase else "") + "".join(f"  {said}" for said in self._judged())

    def line(self, done: int, elapsed: float, rate: float) -> str:
        backlog = max(0, self._produced() - done)
        phase = self._phase()
        if self._target is not None:
            of = f"{count_text(done)}/{count_text(self._target)}"
            text = f"progress: {of} processed ({floor_percent(done, self._target)}),"
            eta = eta_text(self._target - done, rate)
            text += f" {rate:.0f} msg/s, backlog {count_text(backlog)}, {elapsed:.0f} s, {eta}"
        else:
            text = f"progress: {count_text(done)} processed, {rate:.0f} msg/s, backlog {count_text(backlog)},"
            text += f" {self._seconds(elapsed, ' of ')}"
        return text + (f", {phase}" if phase else "") + "".join(f", {said}" for said in self._judged())

    def _judged(self) -> list[str]:
        """The audit so far and the last window's limit, once a window closed."""
        audit, limit = self._audit(), self._limit()
        said = [f"audit {audit_text(audit)}"] if audit else []
        return said + ([f"limit {limit.resource}"] if limit is not None else [])

    def _seconds(self, elapsed: float, of: str) -> str:
        """'12 of 60 s' for a run of a known length; '12 s' for one that ends when its goal says (a
        sweep, phases)."""
        return f"{elapsed:.0f}{of}{self._duration:g} s" if self._duration else f"{elapsed:.0f} s"

    def close(self) -> None:
        if self._bars is not None:
            self.update()
            self._bars.stop()


class TerminalObserver:
    """The command line's observer: lines on the console, live progress while the workers run."""

    def __init__(self, console: Console, mode: str) -> None:
        self._console = console
        self._mode = mode
        self._progress: RunProgress | None = None

    def say(self, line: str) -> None:
        self._console.print(line, highlight=False, markup=False)  # server text may hold [brackets]

    def watching(self, figures: LiveFigures) -> None:
        self._progress = RunProgress(self._console, figures, self._mode)

    def tick(self) -> None:
        if self._progress is not None:
            self._progress.update()

    def stopped_watching(self) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress = None
