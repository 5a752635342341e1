"""Which of a process's workers may claim now (a worker sweep parks the rest), and how many hold a
message."""

from __future__ import annotations

from pgmq_sim.actors.bells import Bell, Why


class ClaimGate:
    """Which of a process's workers may claim now: all of them, the first few (a worker sweep), or
    none (a timed run draining its work in flight). Counts the workers holding a message. Changed
    on the run's loop; `busy` may be read from any thread."""

    PARK_S = 0.2

    def __init__(self, allowed: int) -> None:
        self._allowed = allowed
        self._parked: set[Bell] = set()
        self._holding: dict[int, bool] = {}  # by worker index; each worker writes only its own

    def allow(self, count: int) -> None:
        self._allowed = count
        for bell in list(self._parked):
            bell.ring(Why.GATE)

    def allows(self, index: int) -> bool:
        return index < self._allowed

    async def park(self, index: int, bell: Bell) -> None:
        """Wait (a short while) to be allowed again; the caller checks its stop between waits."""
        if index < self._allowed:
            return
        self._parked.add(bell)
        try:
            await bell.wait(self.PARK_S)
        finally:
            self._parked.discard(bell)

    def hold(self, index: int) -> None:
        self._holding[index] = True

    def release(self, index: int) -> None:
        self._holding[index] = False

    @property
    def busy(self) -> int:
        return sum(self._holding.copy().values())
