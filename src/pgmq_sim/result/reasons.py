"""The server's reasons met during the run, counted by cause as they come (from the workers, the
producer and the listener, on the run's loop, or relayed by a worker process): a repeated cause is
one count, with its first and last time and the sessions it met. Memory stays bounded however
often a cause repeats."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from pgmq_sim.model.reasons import Cause, ReasonCount, ServerReason

MAX_LOSSES = 10_000  # the newest losses' times and causes kept, to name a met outage's cause
MAX_PIDS = 100_000  # distinct sessions told apart per cause; beyond, each event counts as one


@dataclass
class _Tally:
    message: str
    first_s: float
    last_s: float
    count: int = 0
    lost: int = 0
    pids: set[int] = field(default_factory=set)
    more_sessions: int = 0
    workers: set[str] = field(default_factory=set)


Relayed = tuple[str, str | None, str, str, int | None, bool]  # cause, sqlstate, message, who, pid, lost


class ReasonTally:
    def __init__(self, relay: bool = False) -> None:
        self._lock = threading.Lock()
        self._by: dict[tuple[Cause, str | None], _Tally] = {}
        self._losses: deque[tuple[float, Cause]] = deque(maxlen=MAX_LOSSES)
        self._relayed: list[Relayed] | None = [] if relay else None  # a worker process's, for its report

    def met(self, at_s: float, reason: ServerReason, who: str, pid: int | None, lost: bool) -> None:
        """A statement or a session (lost: the session) ended for this reason."""
        with self._lock:
            key = (reason.cause, reason.sqlstate)
            tally = self._by.get(key)
            if tally is None:
                tally = self._by[key] = _Tally(reason.message, at_s, at_s)
            tally.count += 1
            tally.first_s, tally.last_s = min(tally.first_s, at_s), max(tally.last_s, at_s)
            tally.workers.add(who)
            if lost:
                tally.lost += 1
            if pid is None or (lost and pid in tally.pids) or len(tally.pids) >= MAX_PIDS:
                tally.more_sessions += 1  # a session ends once: another pid's, or a pid used again
            else:
                tally.pids.add(pid)
            if lost and not reason.policy:
                self._losses.append((at_s, reason.cause))
            if self._relayed is not None:
                self._relayed.append((str(reason.cause), reason.sqlstate, reason.message, who, pid, lost))

    def take(self) -> list[Relayed]:
        """What was met since the last take (a worker process reports it to the master)."""
        with self._lock:
            taken, self._relayed = self._relayed or [], [] if self._relayed is not None else None
        return taken

    def relayed(self, at_s: float, met: Relayed) -> ServerReason:
        """One reason a worker process met, counted here at the time its report came."""
        cause, sqlstate, message, who, pid, lost = met
        reason = ServerReason(Cause(cause), sqlstate, message)
        self.met(at_s, reason, who, pid, lost)
        return reason

    def counts(self) -> tuple[ReasonCount, ...]:
        """Each cause met, the first met first."""
        with self._lock:
            items = list(self._by.items())
        return tuple(
            sorted(
                (
                    ReasonCount(
                        cause,
                        sqlstate,
                        t.message,
                        t.count,
                        t.first_s,
                        t.last_s,
                        len(t.pids) + t.more_sessions,
                        tuple(sorted(t.workers, key=_worker_order)),
                        t.lost,
                    )
                    for (cause, sqlstate), t in items
                ),
                key=lambda c: c.first_s,
            )
        )

    def loss_causes(self) -> list[tuple[float, Cause]]:
        """When sessions were lost for a reason other than a policy, and why (the newest kept)."""
        with self._lock:
            return list(self._losses)


def _worker_order(name: str) -> tuple[int, str]:
    number = name.removeprefix("w")
    return (int(number), "") if number.isdigit() else (1 << 30, name)
