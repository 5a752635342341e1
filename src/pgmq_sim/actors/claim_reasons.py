"""Why each claim was made, as the wake-up learns it: the credits a type's notifications give, each
kept with the backend pid that sent it, and a worker's count of its claims by reason and outcome,
with an empty claim's time on the loop (result/claims)."""

from __future__ import annotations

from collections import deque

from pgmq_sim.db.wire import LoopTime
from pgmq_sim.result.claims import INDEX, ClaimBook, ClaimReason

# each reason as its index in the book's counts (on every claim's path)
START, NOTIFIED, POLL, FALLBACK, COMPLETION, RETRY = (INDEX[r] for r in ClaimReason)
# where a claim's credit came from, beside a sender's backend pid (> 0)
NO_SENDER = 0  # a credit no notification gave: the start, a lost listener
AT_FALLBACK = -1  # the type's fallback woke the worker
AFTER_COMPLETION = -2  # a completion claims again with no credit: the group it freed may hold the next
SOURCE_REASON = {NO_SENDER: START, AT_FALLBACK: FALLBACK, AFTER_COMPLETION: COMPLETION}


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


TIMED_EVERY = 16  # of a worker's claims, one in this many has its own time measured (a clock read costs)


class ClaimTally:
    """A slot's count of its worker's claims by reason and outcome (actors' side of result/claims),
    and, for one claim in TIMED_EVERY, an empty claim's own CPU time on the loop (db/wire LoopTime:
    from the wake-up that sent it, or its completion's answer when it rode one, through its round
    trips' sends and reads, to the worker's next wait). On every claim's path: a reason is kept as
    its index, and a clock is read only around a sampled claim, and no more once it took a message."""

    __slots__ = ("_claims", "_empty", "book", "reason", "sender", "time")

    def __init__(self, book: ClaimBook) -> None:
        self.book = book
        self.reason = START
        self.sender = NO_SENDER  # the pid whose notification woke the claim (reason NOTIFIED)
        self.time = LoopTime()  # the worker's session's, once it has one (db/claims)
        self._claims = 0
        self._empty = False  # an empty claim's answer, until the next wait starts

    def woke(self, reason: int, sender: int = NO_SENDER, running: bool = False) -> None:
        """Why the next claim is made (an index of REASONS), and whose credit it spends; `running`:
        the worker just woke to make it (its own time starts now, else at its next answer)."""
        self.reason, self.sender = reason, sender
        self._empty = False
        self._claims += 1
        spent = self.time
        spent.armed = armed = self._claims % TIMED_EVERY == 0
        if armed:
            spent.start(running)

    def answered(self, found: int) -> None:
        book, i, pid = self.book, self.reason, self.sender
        if found:
            self.time.armed = False  # its work and completion are not a claim's
            book.took[i] += 1
            if pid > 0 and (sender := book.senders.get(pid)) is not None:
                sender.took += 1
            return
        book.empty[i] += 1
        if pid > 0 and (sender := book.senders.get(pid)) is not None:
            sender.empty += 1
        self._empty = True

    def waiting(self) -> None:
        """The worker starts to wait: an empty claim's own time ends here."""
        if self._empty:
            self._empty = False
            spent = self.time
            if spent.armed:
                spent.pause()
                spent.armed = False
                self.book.empty_s[self.reason] += spent.spent
                self.book.empty_timed[self.reason] += 1
