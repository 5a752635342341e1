"""What a type's notifications tell its workers in this process (actors/wakeup's notify mode):
`TypeCredits`, the type's credits and what is known to wait, and `NotifySlot`, one worker's side of
them."""

from __future__ import annotations

import asyncio
import time

from pgmq_sim.actors.bells import Bell, Halt, Why
from pgmq_sim.actors.claim_reasons import (
    AFTER_COMPLETION,
    AT_FALLBACK,
    NO_SENDER,
    NOTIFIED,
    RETRY,
    SOURCE_REASON,
    START,
    ClaimTally,
    Credits,
)
from pgmq_sim.db.wire import LoopTime
from pgmq_sim.result.claims import ClaimBook

UNKNOWN = 1 << 60  # messages pending that no notification told of (a prefill, a listener lost)


class TypeCredits:
    """A type's wake-ups in this process.

    `known`: messages notified (or, at the start and after a lost listener, possibly present)
    that no claim of this process has taken yet. `credits`: notified messages whose claim has not
    been tried, at most `known`; each wakes one claim, and the claim it wakes is counted against
    the sender of its notification (result/claims). `claiming`: claims on their way, from the
    credit (or the completion) that makes each to its answer.

    A completion claims again, in its own round trip, for a credit or while more messages are
    known than claims are on their way: the group it frees may hold the next one. A message that a
    woken worker's claim is already taking is not claimed twice (two claims racing for it, one of
    them empty, was most of a steady rate's empty claims). A worker whose completion claims nothing
    holds its group until that completion is answered; then it claims for what arrived meanwhile,
    or lets the group go (`let_go`).

    A notification is a hint, never a debt: an empty claim ends the credits of everything notified
    before it started, so a session that announces 100,000 messages that are not there costs about
    one empty claim per idle worker, not 100,000. While no other worker of the type here claims or
    holds a message, and none let a group go, it also proves that nothing notified before it is
    claimable: `known` drops to what was notified since. Otherwise a held group may have hidden the
    next messages: its holder claims for them when its completion is answered, or, when it let the
    group go while the claim ran and no claim is on its way, the empty claim is tried once more.

    The fallback is one claim per interval for the whole type, by the worker that has waited
    longest (at least an interval): it bounds the cost of a wake-up missed for good, and 500 idle
    workers do not poll 500 times a second. One timer for the type, not one per waiting worker.
    """

    def __init__(self, halt: Halt, fallback: float, book: ClaimBook | None = None) -> None:
        self._halt = halt
        self._fallback = fallback
        self.book = book or ClaimBook()
        self.known = UNKNOWN
        self._credits = Credits()
        self.notified = 0  # ever, for what an empty claim can vouch for
        self.active = 0  # workers claiming or holding a message
        self.claiming = 0  # claims on their way here: credited (or chained) and not yet answered
        self.let_go = 0  # ever, workers letting their group go with no claim after it
        self._waiting: dict[Bell, float] = {}  # waiting workers, longest first, and since when
        self._fallback_at = time.monotonic()  # the type's last claim at the fallback
        self._timer: asyncio.TimerHandle | None = None

    @property
    def credits(self) -> int:
        return self._credits.count

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _wake(self, count: int, why: Why) -> None:
        """Ring the `count` longest waiting (one already rung counts for nothing)."""
        waiting = self._waiting
        while count > 0 and waiting:
            bell = next(iter(waiting))
            del waiting[bell]
            if bell.ring(why):
                count -= 1

    def arrived(self, count: int, sender: int = NO_SENDER) -> None:
        self.notified += count
        self.known = min(UNKNOWN, self.known + count)
        self._credits.add(sender, count)
        self._wake(count, Why.CREDIT)

    def unknown(self) -> None:
        """Notifications may have been lost: claim once more everywhere, chain until proven empty."""
        self.known = UNKNOWN
        short = len(self._waiting) - self._credits.count
        if short > 0:
            self._credits.add(NO_SENDER, short)
        self._wake(len(self._waiting), Why.CREDIT)

    def start(self) -> int:
        self.active += 1
        return self.notified

    def found(self, hit: int, notified_at_start: int, let_go_at_start: int, may_retry: bool = True) -> None:
        """A claim took `hit` messages (a batch spends the credits of the messages it took); an empty
        one may be tried once more (`may_retry`: it is not that retry)."""
        credits = self._credits
        if hit:
            self.known = max(0, self.known - hit)
            credits.keep(min(credits.count - (hit - 1), self.known))
            return
        since, let_go = self.notified - notified_at_start, self.let_go != let_go_at_start
        if self.active == 1 and not let_go:
            self.known = since
        # whatever else ran, what was notified before it began is claimed, in flight behind a held
        # group (`known` keeps it for the holder's completion) or never came: its credits wake no one
        credits.keep(min(since, self.known))
        if let_go and may_retry and not credits.count and self.known > self.claiming:
            credits.add(AFTER_COMPLETION, 1)  # a group let go as it ran, and no claim on its way
        self.active -= 1

    def due(self) -> int | None:
        """After a completion: where the claim it makes comes from (a credit's sender, or
        AFTER_COMPLETION), or None (no claim)."""
        if self._credits.count > 0:
            return self._credits.take()
        if self.known > self.claiming:  # a message known that no claim in flight may take
            return AFTER_COMPLETION
        return None

    def release(self) -> None:
        self.active -= 1

    async def wait(self, bell: Bell) -> int:
        """Until a credit (its sender), the stop, or the type's fallback falls to this worker
        (AT_FALLBACK)."""
        credits = self._credits
        if credits.count > 0:
            return credits.take()
        since = time.monotonic()
        try:
            while not self._halt.is_set():
                self._waiting[bell] = since
                self._arm()
                why = await bell.wait(None)
                if why is Why.FALLBACK:
                    return AT_FALLBACK
                if self._halt.is_set():
                    break
                if credits.count > 0:
                    return credits.take()
                # a credit another claim took first (or a ring for something else): wait on
        finally:
            self._waiting.pop(bell, None)
        return NO_SENDER

    def _arm(self) -> None:
        """The fallback's timer, for when the longest-waiting worker will have waited an interval."""
        if self._timer is not None or not self._waiting:
            return
        since = next(iter(self._waiting.values()))
        due_in = max(self._fallback_at, since) + self._fallback - time.monotonic()
        self._timer = asyncio.get_running_loop().call_later(max(0.0, due_in), self._fallback_due)

    def _fallback_due(self) -> None:
        self._timer = None
        now = time.monotonic()
        if self._waiting:
            bell, since = next(iter(self._waiting.items()))
            if now - max(self._fallback_at, since) >= self._fallback * 0.999:
                del self._waiting[bell]
                if bell.ring(Why.FALLBACK):
                    self._fallback_at = now
        self._arm()


class NotifySlot:
    """A worker's side of its type's credits: whether it is counted as active (claiming or
    holding a message), whether its claim is on its way, from which notification its current
    claim vouches, and why it claims."""

    def __init__(self, credits: TypeCredits, bell: Bell) -> None:
        self._credits = credits
        self._bell = bell
        self._active = False
        self._notified_at_start = 0
        self._on_its_way = False  # a claim: counted in the type's `claiming`
        self._let_go_at_start = 0
        self._releasing = False  # completing its last message, with no claim chained behind it
        self._retry = False  # its claim is the one retry after a group let go while one ran
        self._claims = ClaimTally(credits.book)

    def _sent(self) -> None:
        if not self._on_its_way:
            self._on_its_way = True
            self._credits.claiming += 1
            self._let_go_at_start = self._credits.let_go

    def _answered(self) -> None:
        if self._on_its_way:
            self._on_its_way = False
            self._credits.claiming -= 1

    def claiming(self) -> None:
        if not self._active:  # else claim_due kept it active and opened the window
            self._active = True
            self._notified_at_start = self._credits.start()
        if not self._on_its_way:  # else counted since its credit, or its completion's claim
            self._sent()

    def claimed(self, found: int) -> None:
        self._claims.answered(found)
        self._answered()
        if self._active:
            self._credits.found(found, self._notified_at_start, self._let_go_at_start, not self._retry)
            self._active = found > 0
        self._retry = False

    def claim_due(self) -> bool:
        source = self._credits.due() if self._active else None
        self._releasing = self._active and source is None
        self._active = source is not None
        if source is not None:
            self._notified_at_start = self._credits.notified
            self._sent()
            self._claims.woke(SOURCE_REASON.get(source, NOTIFIED), source)
        return self._active

    def completed(self) -> bool:
        credits = self._credits
        if not self._releasing:
            return False
        self._releasing = False
        source = credits.due()  # what arrived since its completion was sent, that no claim is for
        if source is not None:
            self._active = True
            self._notified_at_start = credits.notified
            self._sent()
            self._claims.woke(SOURCE_REASON.get(source, NOTIFIED), source)
            return True
        credits.let_go += 1
        credits.release()
        return False

    def released(self) -> None:
        self._claims.woke(START)
        self._answered()
        if self._active or self._releasing:
            self._credits.let_go += 1
            self._active = self._releasing = False
            self._credits.release()

    def retrying(self) -> None:
        self._claims.woke(RETRY)

    async def wait(self, after_completion: bool) -> bool:
        self._claims.waiting()
        source = await self._credits.wait(self._bell)
        self._sent()  # it claims now: a claim another completion need not make
        self._retry = source == AFTER_COMPLETION
        self._claims.woke(SOURCE_REASON.get(source, NOTIFIED), source, running=True)
        return source == AT_FALLBACK

    def timed(self, meter: LoopTime) -> None:
        self._claims.time = meter
