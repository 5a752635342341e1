"""Live progress: bars on a terminal, a plain line every few seconds otherwise.

Every figure on screen is true: the total bar is processed of target (rounded down,
so 99.6% never reads 100%) with an ETA from the recent rate; a worker's bar is its
busy share, the one per-worker figure with a real 100%, beside its count and rate.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from pgmq_sim.stats import WorkerStats

PLAIN_EVERY_S = 5.0
RATE_WINDOW_S = 10.0


def floor_percent(done: int, total: int) -> str:
    """Rounded down to 0.1 %: a run that is not finished never shows 100 %."""
    if total <= 0:
        return "0.0%"
    return f"{math.floor(done * 1000 / total) / 10:.1f}%"


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

    def __init__(
        self,
        console: Console,
        workers: list[WorkerStats],
        target: int,
        produced: Callable[[], int],
        mode: str,
    ) -> None:
        self._console = console
        self._workers = workers
        self._target = target
        self._produced = produced
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
            self._total = self._bars.add_task("total", total=target, note="")
            self._per_worker = [self._bars.add_task(w.name, total=1.0, note=w.queue_type) for w in workers]
            self._bars.start()

    def processed(self) -> int:
        return sum(w.processed for w in self._workers)

    def update(self) -> None:
        done = self.processed()
        now = time.monotonic()
        rate = self._rate.add(now, done)
        elapsed = max(now - self._started, 1e-9)
        if self._bars is not None:
            self._bars.update(
                self._total,
                completed=done,
                note=f"{done}/{self._target} {floor_percent(done, self._target)}  {rate:.0f} msg/s"
                f"  {elapsed:.0f} s  {eta_text(self._target - done, rate)}",
            )
            for task, w in zip(self._per_worker, self._workers, strict=True):
                busy = min(1.0, w.busy_s / elapsed)
                self._bars.update(
                    task,
                    completed=busy,
                    note=f"{w.queue_type}  busy {busy:.0%}  {w.processed} msgs"
                    f"  {w.processed / elapsed:.0f}/s",
                )
        elif self._plain and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self._console.print(self.line(done, elapsed, rate), highlight=False)

    def line(self, done: int, elapsed: float, rate: float) -> str:
        return (
            f"progress: {done}/{self._target} processed ({floor_percent(done, self._target)}),"
            f" {rate:.0f} msg/s, backlog {max(0, self._produced() - done)}, {elapsed:.0f} s,"
            f" {eta_text(self._target - done, rate)}"
        )

    def close(self) -> None:
        if self._bars is not None:
            self.update()
            self._bars.stop()
