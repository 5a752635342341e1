"""Why each claim was made, as the wake-up learns it: the credits a type's notifications give, each
kept with the backend pid that sent it, and a worker's count of its claims by reason and outcome,
with an empty claim's time on the loop (result/claims)."""

from __future__ import annotations

import time
from collections import deque

from pgmq_sim.result.claims import INDEX, ClaimBook, ClaimReason

# where a claim's credit came from, beside a sender's backend pid (> 0)
NO_SENDER = 0  # a credit no notification gave: the start, a lost listener
AT_FALLBACK = -1  # the type's fallback woke the worker
AFTER_COMPLETION = -2  # a completion claims again with no credit: the group it freed may hold the next
SOURCE_REASON = {
    NO_SENDER: ClaimReason.START,
    AT_FALLBACK: ClaimReason.FALLBACK,
    AFTER_COMPLETION: ClaimReason.COMPLETION,
}


class Credits:
    """Notified messages whose claim has not been tried, oldest first, each with the backend pid
    whose notification gave it (NO_SENDER: none did). Kept as runs of one sender's credits, so a
    steady arrival costs an append and a take, and a flood from one sender a single entry."""

    __slots__ = ("_runs", "count")

    def __init__(self) -> None:
        self._runs: deque[list[int]] = deque()
        self.count = 0

    def add(self, sender: int, count: int) -> None:
        runs = self._runs
        if runs and runs[-1][0] == sender:
            runs[-1][1] += count
        else:
            runs.append([sender, count])
        self.count += count

    def take(self) -> int:
        """The oldest credit's sender (there is one)."""
        run = self._runs[0]
        run[1] -= 1
        self.count -= 1
        if not run[1]:
            self._runs.popleft()
        return run[0]

    def keep(self, count: int) -> None:
        """Only the newest `count` (the older ones are spent or proven empty)."""
        drop = self.count - max(0, count)
        runs = self._runs
        while drop > 0:
            run = runs[0]
            taken = min(drop, run[1])
            run[1] -= taken
            drop -= taken
            self.count -= taken
            if not run[1]:
                runs.popleft()


class ClaimTimer:
    """A slot's count of its worker's claims by reason and outcome (actors' side of result/claims),
    and an empty claim's time on the loop: from the wake to the send, and from the empty answer to
    the next wait."""

    def __init__(self, book: ClaimBook) -> None:
        self.book = book
        self.why = ClaimReason.START
        self.sender = 0  # the pid whose notification woke the claim (why NOTIFIED)
        self._woke_at = 0.0  # 0: the claim was not woken from a wait (a completion's, the start)
        self._sent_at = 0.0
        self._empty_at = 0.0  # an empty claim's answer, until the next wait starts
        self._empty_pre = 0.0

    def woke(self, why: ClaimReason, sender: int = 0) -> None:
        self.why, self.sender = why, sender
        self._woke_at = time.perf_counter()

    def due(self, why: ClaimReason, sender: int = 0) -> None:
        self.why, self.sender = why, sender
        self._woke_at = 0.0

    def sending(self) -> None:
        self._sent_at = time.perf_counter()

    def answered(self, found: int) -> None:
        book, i = self.book, INDEX[self.why]
        sender = book.senders.get(self.sender) if self.why is ClaimReason.NOTIFIED else None
        if found:
            book.took[i] += 1
            if sender is not None:
                sender.took += 1
            return
        book.empty[i] += 1
        if sender is not None:
            sender.empty += 1
        self._empty_at = time.perf_counter()
        self._empty_pre = self._sent_at - self._woke_at if self._woke_at else 0.0

    def waiting(self) -> None:
        """The worker starts to wait: an empty claim's time ends here."""
        if self._empty_at:
            spent = self._empty_pre + time.perf_counter() - self._empty_at
            self._empty_at = 0.0
            self.book.empty_s[INDEX[self.why]] += spent
