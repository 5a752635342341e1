"""The run's tasks on its event loop (workers, listener, heartbeat, producer, housekeeper): one way
to report a failure and one way to stop them, within bounds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from pgmq_sim.actors.bells import Halt


class Tasks:
    """The tasks of one loop. A task's failure is reported (its first) and halts the others; a
    failure after the halt is the halt itself (a cancelled statement), not an error."""

    def __init__(self, halt: Halt, on_error: Callable[[str, BaseException], None]) -> None:
        self._halt = halt
        self._on_error = on_error
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, name: str, body: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """On the loop: run `body` as one of the run's tasks (the task itself: no coroutine wraps
        it, for every await of the message path resumes through each frame that awaits)."""
        task = asyncio.get_running_loop().create_task(body, name=name)
        task.add_done_callback(self._ended)
        self._tasks.append(task)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and not self._halt.is_set():
            self._on_error(task.get_name(), exc)
            self._halt.set()

    async def stop(self, grace_s: float) -> list[str]:
        """Halt, give the tasks a grace period together, then cancel those still waiting on the
        server (a lock held elsewhere, a frozen server: each one's statement is cancelled on the
        server and its connection closed) and give them another. Returns the names of the tasks
        left behind."""
        self._halt.set()
        pending = [task for task in self._tasks if not task.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for task in still:
                task.cancel()
            if still:
                _, left = await asyncio.wait(still, timeout=grace_s)
                return sorted(task.get_name() for task in left)
        return []
