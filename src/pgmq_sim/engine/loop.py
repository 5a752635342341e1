"""The run's event loop, on a thread of its own. Every connection of the message path is driven
from it (the workers', the producer's, the listener's, the housekeeper's, the heartbeat's), so one
wake-up serves every answer that is ready and no two threads hand the GIL back and forth per
message. The engine's phases stay on the main thread, where signals arrive and the watch ticks:
they hand the loop its tasks, and wait on what they asked for with bounds, never on the server
themselves. Under Locust's gevent (a master) the thread is the system's, not a greenlet, and the
main thread only polls what the loop left for it."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pgmq_sim.actors.bells import Halt, new_loop
from pgmq_sim.actors.tasks import Tasks
from pgmq_sim.engine.bounded import TICK_S, NotAnswering, Signals

T = TypeVar("T")
START_WAIT_S = 5.0
CLOSE_WAIT_S = 2.0
POLL_FIRST_S = 0.001  # the main thread's polls of the loop's answers grow from this to TICK_S


def start_thread(target: Callable[[], None], name: str) -> None:
    """A thread of the system's, even where gevent patched `threading` (a Locust master): the loop
    must not be a greenlet of gevent's hub."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        monkey.get_original("_thread", "start_new_thread")(target, ())
        return
    threading.Thread(target=target, name=name, daemon=True).start()


def poll(
    done: Callable[[], bool], timeout: float, signals: Signals | None = None, interrupt: bool = False
) -> bool:
    """Wait on this thread until `done()`, at most `timeout`; False past it. A second signal (or,
    if asked, the first) raises InterruptedError."""
    deadline = time.monotonic() + timeout
    pause = POLL_FIRST_S
    while not done():
        if signals is not None and (signals.hurry.is_set() or (interrupt and signals.interrupt.is_set())):
            raise InterruptedError("a signal")
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, TICK_S)
    return True


class RunLoop:
    """One run's loop and its tasks; `halt` is the run's stop as the tasks see it."""

    def __init__(self, halt: Halt, on_error: Callable[[str, BaseException], None]) -> None:
        self.halt = halt
        self._loop = new_loop()
        self.tasks = Tasks(halt, on_error)
        self._running = False
        self._ended = False
        start_thread(self._run, "run loop")
        if not poll(lambda: self._running, START_WAIT_S):
            raise RuntimeError("the run's event loop did not start")

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.call_soon(self._started)
        try:
            loop.run_forever()
            left = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in left:  # abandoned by the halt: cancelled now, their connections closed
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=CLOSE_WAIT_S))
        finally:
            self.halt.close()
            loop.close()
            self._ended = True

    def _started(self) -> None:
        self._running = True

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Run `function(*args)` on the loop, soon (from any thread)."""
        if not self._ended:
            self._loop.call_soon_threadsafe(function, *args)

    def start(self, name: str, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """One of the run's tasks, started on the loop."""
        self.call(lambda: self.tasks.start(name, body()))

    def run(
        self,
        body: Callable[[], Coroutine[Any, Any, T]],
        timeout: float,
        signals: Signals | None,
        what: str,
        interrupt: bool = False,
    ) -> T:
        """Run `body` on the loop and wait for it here, at most `timeout` seconds, and not at all
        once a second signal says to stop waiting (or, if asked, the first): then it is cancelled."""
        box: list[asyncio.Task[T]] = []
        self.call(lambda: box.append(self._loop.create_task(body(), name=what)))
        try:
            answered = poll(lambda: bool(box) and box[0].done(), timeout, signals, interrupt)
        except InterruptedError:
            self.call(lambda: box and box[0].cancel())
            raise InterruptedError(what) from None
        if not answered:
            self.call(lambda: box and box[0].cancel())
            raise NotAnswering(f"{what} got no answer within {timeout:g} s")
        return box[0].result()

    def halt_now(self) -> None:
        """The run is stopping: every task's waits end (from any thread)."""
        self.call(self.halt.set)

    def stop(self, grace_s: float) -> list[str]:
        """Halt and stop every task within bounds; the names of those left behind."""
        try:
            return self.run(lambda: self.tasks.stop(grace_s), 2 * grace_s + CLOSE_WAIT_S, None, "stopping")
        except NotAnswering:
            return ["the loop itself"]

    def close(self) -> None:
        """Stop the loop (after `stop`): the thread ends, the loop is closed."""
        self.call(self._loop.stop)
        poll(lambda: self._ended, 2 * CLOSE_WAIT_S)
