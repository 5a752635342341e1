"""Waiting with a bound: the main thread never waits on the server itself. Each database operation
of a phase runs on a helper thread, at most so long, and not at all once a signal says to stop
waiting; a failure reported by any thread stops the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError, SimError
from pgmq_sim.model.kinds import Outcome

T = TypeVar("T")
TICK_S = 0.2


class Signals:
    """What the signal handler tells the run: stop cleanly (first), stop waiting (second)."""

    def __init__(self) -> None:
        self.interrupt = threading.Event()
        self.hurry = threading.Event()


class NotAnswering(SimError):
    exit_code = 3


def outcome_of(exc: BaseException) -> Outcome:
    """How an error ends a run: a server gone or silent is exit 3, anything else a failure."""
    if isinstance(exc, NotAnswering):
        return Outcome.SERVER_UNRESPONSIVE
    if isinstance(exc, ServerLostError):
        return Outcome.SERVER_LOST
    return Outcome.FAILED


class FirstError:
    """The first failure reported by any thread; it stops the run."""

    def __init__(self, stop: threading.Event) -> None:
        self._lock = threading.Lock()
        self._stop = stop
        self.error: tuple[str, BaseException] | None = None

    def report(self, where: str, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = (where, exc)
        self._stop.set()

    def reporter(self, where: str) -> Callable[[BaseException], None]:
        return lambda exc: self.report(where, exc)

    def describe(self, dsn: str, *others: str | None) -> tuple[Outcome, str] | None:
        """(outcome, one line) for the first failure, if any."""
        if self.error is None:
            return None
        where, exc = self.error
        if isinstance(exc, ServerLostError | NotAnswering):
            return outcome_of(exc), str(exc)
        if isinstance(exc, SimError):
            return Outcome.FAILED, f"{where}: {exc}"
        why = reason(exc, dsn, *others)
        return Outcome.FAILED, f"{where} failed: {why}; check the server and the SQL files"

    def raise_first(self, dsn: str, *others: str | None) -> None:
        """Raise the first failure again, as the error that ends the run the same way."""
        described = self.describe(dsn, *others)
        if described is not None:
            outcome, text = described
            kind = {Outcome.SERVER_LOST: ServerLostError, Outcome.SERVER_UNRESPONSIVE: NotAnswering}
            raise kind.get(outcome, SimError)(text)


def call_bounded(
    operation: Callable[[], T], timeout: float, signals: Signals, what: str, stop_on_interrupt: bool = False
) -> T:
    """Run a database operation on a helper thread and wait for it, at most `timeout` seconds,
    and not at all once a second signal says to stop waiting (or, if asked, the first)."""
    box: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            box.append(operation())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while thread.is_alive():
        thread.join(TICK_S)
        if signals.hurry.is_set() or (stop_on_interrupt and signals.interrupt.is_set()):
            raise InterruptedError(what)
        if time.monotonic() > deadline:
            raise NotAnswering(f"{what} got no answer within {timeout:g} s")
    if failure:
        raise failure[0]
    return box[0]
