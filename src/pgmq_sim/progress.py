"""Live progress: bars on a terminal, a plain line every few seconds otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from pgmq_sim.stats import WorkerStats

PLAIN_EVERY_S = 5.0


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
        live = mode == "bars" or (mode == "auto" and console.is_terminal)
        self._plain = mode == "plain" or (mode == "auto" and not console.is_terminal)
        self._bars: Progress | None = None
        if live:
            self._bars = Progress(
                TextColumn("{task.description:>10}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            self._total = self._bars.add_task("total", total=target, note="")
            fair_share = max(1, -(-target // len(workers)))  # a worker's bar fills at its even share
            self._per_worker = [
                self._bars.add_task(w.name, total=fair_share, note=w.queue_type) for w in workers
            ]
            self._bars.start()

    def processed(self) -> int:
        return sum(w.processed for w in self._workers)

    def update(self) -> None:
        done = self.processed()
        now = time.monotonic()
        if self._bars is not None:
            elapsed = max(now - self._started, 1e-9)
            self._bars.update(self._total, completed=done, note=f"{done / elapsed:.0f} msg/s")
            for task, w in zip(self._per_worker, self._workers, strict=True):
                busy = min(1.0, w.busy_s / elapsed)
                self._bars.update(task, completed=w.processed, note=f"{w.queue_type} busy {busy:.0%}")
        elif self._plain and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self._console.print(self.line(done, now), highlight=False)

    def line(self, done: int, now: float) -> str:
        elapsed = now - self._started
        return (
            f"progress: {done}/{self._target} processed ({done / self._target:.0%}),"
            f" {done / max(elapsed, 1e-9):.0f} msg/s, backlog {max(0, self._produced() - done)},"
            f" {elapsed:.0f} s"
        )

    def close(self) -> None:
        if self._bars is not None:
            self.update()
            self._bars.stop()
