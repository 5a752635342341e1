"""A fault schedule the run injects into itself (-chaos SPEC), each fault recorded with its time.

SPEC is a comma list of faults:  KIND[*COUNT](@AT | /EVERY[@FROM])[+FOR]
  kill-connection*2/5s      terminate 2 worker backends every 5 s (from 5 s)
  kill-worker@3s            a worker dies mid-work at 3 s, without cleaning up
  restart-server@10s        restart the server at 10 s (embedded; -dsn needs -chaos-allow-restart)
  hold-xmin@5s+20s          a session holds a snapshot from 5 s for 20 s
  lock-table@10s+3s         a session holds an exclusive lock on the queue from 10 s for 3 s
  pause-pooler@5s+3s        the pooler pauses the run's database from 5 s for 3 s (PAUSE, RESUME)
  kill-pooler@5s            the pooler drops every client and server connection of it (KILL, RESUME)
  reconnect-pooler@5s       the pooler closes its server connections as each is released (RECONNECT)
  idle-in-tx@5s+10s         a session's transaction writes (takes an XID) and stays open for 10 s
  readers*4@5s+10s          4 sessions scan the queue's tables in REPEATABLE READ transactions, in a loop
  pool-exhaustion*20@5s+10s 20 idle sessions are held open (*0: every spare slot but the tool's own)
The pooler's faults go through its admin console (-pooler-admin).
Times are seconds since the workers started; a unit of s or ms may follow a number.
"""

from __future__ import annotations

import heapq
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.events import Fault
from pgmq_sim.model.kinds import FaultKind, choices
from pgmq_sim.model.pressure import PhaseSpec

NUMBER = r"(\d+(?:\.\d+)?)(ms|s)?"
FAULT = re.compile(
    rf"(?P<kind>[a-z-]+)(?:\*(?P<count>\d+))?"
    rf"(?:@(?P<at>{NUMBER})|/(?P<every>{NUMBER})(?:@(?P<start>{NUMBER}))?)"
    rf"(?:\+(?P<for>{NUMBER}))?"
)
EXAMPLE = (
    "e.g. kill-connection/5s,kill-worker@3s,restart-server@10s,hold-xmin@5s+20s,lock-table@10s+3s,"
    "pause-pooler@5s+3s"
)


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    match = re.fullmatch(NUMBER, text)
    assert match is not None
    value = float(match.group(1))
    return value / 1000 if match.group(2) == "ms" else value


@dataclass(frozen=True)
class FaultSpec:
    kind: FaultKind
    count: int
    at_s: float  # the first (or only) time
    every_s: float | None
    duration_s: float | None
    until_s: float | None = None  # a repeated fault's last time (a phase's end)

    def times(self, until_s: float) -> list[float]:
        if self.every_s is None:
            return [self.at_s]
        if self.until_s is not None:
            until_s = min(until_s, self.until_s - 1e-9)
        count = int((until_s - self.at_s) / self.every_s) + 1 if until_s >= self.at_s else 0
        return [self.at_s + i * self.every_s for i in range(max(0, count))]


def parse_chaos(text: str) -> list[FaultSpec]:
    faults = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = FAULT.fullmatch(item)
        if not match:
            raise UsageError(f"-chaos '{item}' is not a fault; write KIND[*N](@AT|/EVERY)[+FOR], {EXAMPLE}")
        try:
            kind = FaultKind(match.group("kind"))
        except ValueError:
            raise UsageError(
                f"-chaos '{item}': unknown fault '{match.group('kind')}'; use one of: {choices(FaultKind)}"
            ) from None
        every = _seconds(match.group("every"))
        if every is not None and every <= 0:
            raise UsageError(f"-chaos '{item}': the interval must be above 0")
        duration = _seconds(match.group("for"))
        if kind.held != (duration is not None):
            need = "needs +DURATION" if kind.held else "takes no +DURATION"
            raise UsageError(f"-chaos '{item}': {kind} {need}, {EXAMPLE}")
        start = _seconds(match.group("start"))
        at = _seconds(match.group("at")) if every is None else (every if start is None else start)
        count = int(match.group("count") or 1)
        if count < (0 if kind == FaultKind.POOL_EXHAUSTION else 1):
            raise UsageError(f"-chaos '{item}': the count must be at least 1")
        faults.append(FaultSpec(kind, count, at or 0.0, every, duration))
    if not faults:
        raise UsageError(f"-chaos needs at least one fault, {EXAMPLE}")
    return faults


@dataclass(frozen=True)
class FaultActions:
    """What the schedule may do to the run; the run supplies each one."""

    kill_connections: Callable[[int], str]
    kill_worker: Callable[[int], str]
    restart_server: Callable[[], str]
    # a held fault (count, seconds), told once it holds (its sessions' pids); what it did at the end
    hold: Callable[[FaultKind, int, float, Callable[[str], None]], str]
    pooler: Callable[[FaultKind, float | None], str]  # a pooler fault, and how long a pause lasts


class FaultSchedule(threading.Thread):
    """Fires each fault at its time; holds run on threads of their own so they overlap."""

    def __init__(
        self,
        faults: list[FaultSpec],
        actions: FaultActions,
        clock: Callable[[], float],
        stop: threading.Event,
        record: Callable[[Fault], None],
        describe: Callable[[BaseException], str],
        horizon_s: float = 86_400.0,
    ) -> None:
        super().__init__(name="chaos", daemon=True)
        self._actions = actions
        self._clock = clock
        self._halt = stop
        self._record = record
        self._describe = describe  # an error, fit to print (never the DSN's password)
        self._due: list[tuple[float, int, FaultSpec]] = []
        for index, spec in enumerate(faults):
            for at in spec.times(horizon_s)[:10_000]:
                self._due.append((at, index, spec))
        heapq.heapify(self._due)
        self._helpers: list[threading.Thread] = []

    def run(self) -> None:
        while self._due and not self._halt.is_set():
            at, _, spec = self._due[0]
            if self._halted_before(at):
                break
            heapq.heappop(self._due)
            helper = threading.Thread(target=self._fire, args=(spec,), name=f"chaos {spec.kind}", daemon=True)
            self._helpers.append(helper)
            helper.start()

    def _halted_before(self, at: float) -> bool:
        """Wait until the run's clock reaches `at` (a wait may end a hair early, and a fault's row
        must not fall in the phase before its own); True: the run halted first."""
        while (left := at - self._clock()) > 0:
            if self._halt.wait(left):
                return True
        return self._halt.is_set()

    def _fire(self, spec: FaultSpec) -> None:
        began = self._clock()
        started: list[float] = []
        try:
            if spec.kind == FaultKind.KILL_CONNECTION:
                detail = self._actions.kill_connections(spec.count)
            elif spec.kind == FaultKind.KILL_WORKER:
                detail = self._actions.kill_worker(spec.count)
            elif spec.kind == FaultKind.RESTART_SERVER:
                detail = self._actions.restart_server()
            elif spec.kind.pooler and not spec.kind.held:
                detail = self._actions.pooler(spec.kind, None)
            else:
                assert spec.duration_s is not None
                length = f"for {spec.duration_s:g} s"
                if spec.kind.pooler:
                    self._record(Fault(began, spec.kind, length))
                    detail = self._actions.pooler(spec.kind, spec.duration_s)
                else:

                    def holding(what: str) -> None:
                        started.append(began)
                        self._record(Fault(began, spec.kind, f"{length}: {what}"))

                    detail = self._actions.hold(spec.kind, spec.count, spec.duration_s, holding)
                self._record(Fault(self._clock(), spec.kind + " end", detail))
                return
        except Exception as exc:  # a fault that could not be injected is itself recorded
            if spec.kind.held and not spec.kind.pooler and started:  # it held, then broke: its end
                detail = f"ended early: {type(exc).__name__}: {self._describe(exc)}"
                self._record(Fault(self._clock(), spec.kind + " end", detail))
                return
            if self._halt.is_set():
                detail = "not injected: the run ended first"
            elif isinstance(exc, SimError):  # the tool's own words: the reason as it is
                detail = f"not injected: {exc}"
            else:
                detail = f"not injected: {type(exc).__name__}: {self._describe(exc)}"
        self._record(Fault(began, spec.kind, detail))

    def join_helpers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for helper in self._helpers:
            helper.join(max(0.0, deadline - time.monotonic()))


def pressure_faults(phases: tuple[PhaseSpec, ...]) -> list[FaultSpec]:
    """The faults that make the phases' pressures, each over its phase (a burst is the phase's
    rate: no fault)."""
    faults, at = [], 0.0
    for phase in phases:
        pressure, length = phase.pressure, phase.duration_s
        kind = pressure.fault if pressure is not None else None
        if pressure is not None and kind is not None:
            amount = pressure.amount
            if kind == FaultKind.KILL_CONNECTION:  # R a second, over the phase
                faults.append(FaultSpec(kind, 1, at, 1 / (amount or 1), None, until_s=at + length))
            elif kind == FaultKind.RESTART_SERVER:
                faults.append(FaultSpec(kind, 1, at, None, None))
            else:
                faults.append(FaultSpec(kind, int(amount if amount is not None else 1), at, None, length))
        at += length
    return faults


def pick(rng: random.Random, items: list[int], count: int) -> list[int]:
    return rng.sample(items, min(count, len(items)))
