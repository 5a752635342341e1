"""The enqueue side while the workers run: messages fall due at the rate profile's times (open loop:
nothing waits for a commit to offer the next), wait in the client, and the run's producer sessions
take them, one enqueue per transaction unless the application batches (-enqueue-batch). Every
enqueue is timed from its due time to its commit (result/enqueues)."""

from __future__ import annotations

import asyncio
import math
from array import array
from collections import deque
from collections.abc import Callable, Iterable

from pgmq_sim.actors.bells import Bell, Halt, Why
from pgmq_sim.actors.producer import Arrival, BatchWriter, MessageSource
from pgmq_sim.db.values import Message
from pgmq_sim.model.profiles import IDLE_WAIT_S, RateProfile
from pgmq_sim.result.enqueues import EnqueueTally, EnqueueTimes
from pgmq_sim.result.timeline import Timeline

FOLD_S = 0.1  # how often the enqueues' times are folded into the tally and the timeline
IDLE_S = 0.5  # a free session's longest wait between looks: the timer's session or a commit rings it


class WaitingArrivals:
    """The messages that fell due and wait in the client for a producer session, oldest first. Each
    is kept as its due time alone (8 bytes, not an Arrival's 185: a producer minutes behind holds
    millions) until a session looks at it; the source draws it then, in the same order, so a seed
    replays the same messages. Spread over processes, a process keeps only its own, so they are
    drawn as they fall due (`append`), and none is kept as a due time."""

    def __init__(self, source: MessageSource) -> None:
        self._source = source
        self._drawn: deque[Arrival] = deque()  # looked at (or drawn to be owned), before every undrawn one
        self._due = array("d")  # the undrawn ones' due times, from _first on
        self._first = 0

    def fall(self, due_s: float) -> None:
        self._due.append(due_s)

    def append(self, arrival: Arrival) -> None:
        assert self._first == len(self._due), "a drawn arrival after an undrawn one"
        self._drawn.append(arrival)

    @property
    def fallen(self) -> int:
        """Every message that fell due so far, drawn or not."""
        return self._source.drawn + len(self._due) - self._first

    def __len__(self) -> int:
        return len(self._drawn) + len(self._due) - self._first

    def head(self) -> Arrival:
        if not self._drawn:
            self._drawn.append(self._draw())
        return self._drawn[0]

    def popleft(self) -> Arrival:
        return self._drawn.popleft() if self._drawn else self._draw()

    def put_back(self, passed: list[Arrival]) -> None:
        """Arrivals taken off the front and passed over, back in their places."""
        self._drawn.extendleft(reversed(passed))

    def draws(self) -> Iterable[int]:
        """Their places in the draws (msg_ids spread over processes), oldest first."""
        yield from (a.draw for a in self._drawn)
        yield from range(self._source.drawn + 1, self.fallen + 1)

    def _draw(self) -> Arrival:
        due_s = self._due[self._first]
        self._first += 1
        if self._first == len(self._due):
            del self._due[:]
            self._first = 0
        elif self._first >= 4096 and self._first * 2 >= len(self._due):
            del self._due[: self._first]  # amortized: each due time is moved at most once more
            self._first = 0
        return self._source.draw(due_s)


class RateProducer:
    """The enqueue side while the workers run: `sessions` producer sessions, as an application's pool
    has, enqueue up to `total` messages as the rate profile has them due.

    Arrivals are open-loop: each message falls due at its time (the integral of the profile's rate,
    so pacing never drifts), whether or not an enqueue is still in flight, and waits in the client
    until a session is free. A session takes the oldest waiting message whose group has no enqueue in
    flight (an application that keeps a key's order enqueues its next message after the last one
    committed), and up to `batch` of them in one transaction only when asked (-enqueue-batch): a
    producer behind its rate never catches up with a batch the application would not send. Every
    enqueue is timed from its due time to its commit (result/enqueues); what fell due each second
    (offered) and what was written (arrived) go to the timeline.
    """

    def __init__(
        self,
        sessions: list[BatchWriter],
        source: MessageSource,
        total: int,
        profile: RateProfile,
        halt: Halt,
        clock: Callable[[], float],
        timeline: Timeline,
        tally: EnqueueTally,
        until_s: float | None = None,
        batch: int = 1,
        owns: Callable[[Arrival], bool] | None = None,
    ) -> None:
        ends = [s for s in (until_s, profile.end_s) if s is not None]
        self._until_s = min(ends) if ends else None  # nothing is due after it
        self._sessions = sessions
        self._source = source
        self._total = total
        self._profile = profile
        self._halt = halt
        self._clock = clock
        self._batch = batch
        self._owns = owns  # spread over processes: the arrivals of this process's groups (None: all)
        self._waiting = WaitingArrivals(source)  # due, not yet taken by a session
        self._ahead: deque[Arrival] = deque()  # spread over processes: own arrivals drawn, not yet due
        self._in_flight: set[tuple[int, int]] = set()  # groups with an enqueue in flight
        self._held: dict[tuple[int, int], list[float]] = {}  # a held group: [its last commit, messages held]
        self._idle: dict[Bell, None] = {}  # free sessions' bells, in the order they came
        self._timer: Bell | None = None  # the free session sleeping until the next message falls due
        self._looked_s = clock()  # when what was due was last drawn
        self._fixed = profile.fixed
        self._next_at = -math.inf  # when message _next_of + 1 falls due, kept while the profile is fixed
        self._next_of = -1
        self._closed = False  # nothing more falls due
        self.sent: list[list[Message]] = [[] for _ in sessions]  # per session, its rows in flight
        self.figures = EnqueueFigures(tally, timeline, profile, total)

    async def run(self) -> None:
        tasks = [asyncio.ensure_future(self._session(i, w)) for i, w in enumerate(self._sessions)]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    raise failure
        finally:
            self._closed = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in self._sessions:
                writer.close()
            # what fell due while a write waited (a path down until the end) was offered too
            at = self._clock() if self._until_s is None else min(self._clock(), self._until_s - 1e-6)
            self.figures.offer(at, min(self._total, self._profile.due(at)))
            self.figures.fold(at)

    def _arrive(self) -> float | None:
        """Every message due by now joins the waiting ones, each at its own due time; the seconds until
        the next falls due (None: nothing more will)."""
        source, profile, ahead, waiting = self._source, self._profile, self._ahead, self._waiting
        at = self._clock()
        # spread over processes, the last arrivals may be another's: this one's offers still run
        # to the last one's due time (the first process counts every arrival offered)
        fallen = waiting.fallen
        drawn_all = (
            fallen >= self._total and not ahead and (self._owns is None or profile.due(at) >= self._total)
        )
        if drawn_all or (self._until_s is not None and at >= self._until_s):
            self._closed = True  # the sessions write what fell due, then stop
            return None
        owns = self._owns
        if owns is None and at < self._next_at and fallen == self._next_of:
            # the usual look at a steady rate: the next message's due time is still ahead
            if int(at) > self.figures.noted_s:
                self.figures.offer(at, 0)
            self._looked_s = at
            return self._next_at - at
        due = min(self._total, profile.due(at))
        self.figures.offer(at, due)
        last = self._looked_s
        while ahead and ahead[0].draw <= due:
            waiting.append(ahead.popleft())
        kept, self._next_of = (self._next_at if self._next_of == fallen else None), -1
        # a fixed profile says each one's due time itself (next_due_in asks more), unless the rate
        # was 0 at the last look (next_due_in's lull bound then applies)
        timed = self._fixed and fallen < due and profile.rate_at(last) > 0
        while fallen < due:  # each at its own due time (at most `at`)
            when = kept if kept is not None else profile.due_time(fallen) if timed else None
            if when is not None:  # the first one's as asked at a look before, or the profile's
                due_s, kept = min(at, max(last, when)), None
            else:
                due_s = min(at, last + profile.next_due_in(last, fallen))
            if owns is None:
                waiting.fall(due_s)  # drawn when a session looks at it
            else:
                arrival = source.draw(due_s)
                if owns(arrival):
                    waiting.append(arrival)
            fallen += 1
        self._looked_s = at
        if owns is not None:
            return self._next_own_in(at)
        when = profile.due_time(fallen) if self._fixed else None
        if when is None or when - at >= IDLE_WAIT_S:  # a lull's bound, or nothing more is due
            return profile.next_due_in(at, fallen)
        self._next_at, self._next_of = when, fallen  # kept for the looks until it falls due
        return max(0.0, when - at)

    def _next_own_in(self, at: float) -> float:
        """Spread over processes: the seconds until this process's next own arrival falls due, drawn
        ahead (at most LOOK_AHEAD arrivals), so its timer does not wake for the others' arrivals."""
        source, profile, ahead, owns = self._source, self._profile, self._ahead, self._owns
        assert owns is not None
        stop = min(self._total, source.drawn + LOOK_AHEAD)
        while not ahead and source.drawn < stop:
            arrival = source.draw(at + profile.next_due_in(at, source.drawn))
            if owns(arrival):
                ahead.append(arrival)
        if ahead:
            return max(0.0, ahead[0].due_s - at)
        return profile.next_due_in(at, source.drawn)

    def _wake(self, count: int) -> None:
        idle = self._idle
        while idle and count > 0:
            bell, _ = idle.popitem()
            if bell.ring(Why.CREDIT):
                count -= 1

    def _take(self) -> list[Arrival]:
        """The oldest waiting messages whose group has nothing in flight (or held before them), up to
        a batch; a message passed over is held behind its group's enqueue."""
        waiting, in_flight = self._waiting, self._in_flight
        if not waiting:
            return []
        if self._batch == 1:  # the usual take: the oldest, its group free and nothing of it held
            head = waiting.head()
            group = head.group
            if not head.held and group not in in_flight:
                waiting.popleft()
                in_flight.add(group)
                return [head]
        taken: list[Arrival] = []
        passed: list[Arrival] = []
        held_groups: set[tuple[int, int]] = set()
        while waiting and len(taken) < self._batch and len(passed) < SCAN_HELD:
            arrival = waiting.popleft()
            group = arrival.group
            if group in in_flight or group in held_groups:
                held_groups.add(group)
                if not arrival.held:
                    arrival.held = True
                    self._held.setdefault(group, [arrival.due_s, 0])[1] += 1
                passed.append(arrival)
                continue
            if arrival.held:  # ready when its group's enqueue committed
                held = self._held[group]
                arrival.ready_s = max(arrival.due_s, held[0])
                held[1] -= 1
                if not held[1]:
                    del self._held[group]
            taken.append(arrival)
        waiting.put_back(passed)
        for arrival in taken:
            in_flight.add(arrival.group)
        return taken

    async def _session(self, index: int, writer: BatchWriter) -> None:
        """A free session looks for what fell due and takes the oldest it may; with nothing to take,
        one free session (the timer's) sleeps until the next message falls due, the others until a
        commit frees a group or the timer's session leaves to write."""
        halt, clock, figures = self._halt, self._clock, self.figures
        bell = halt.bell()
        try:
            while not halt.is_set():
                next_in = self._arrive() if not self._closed else None
                taken = self._take()
                if not taken:
                    if self._closed and not self._waiting:
                        self._wake(len(self._idle))  # the others see the end too
                        return
                    if next_in is not None and self._timer in (None, bell):
                        self._timer = bell
                        await halt.sleep(next_in, bell)
                        self._timer = None
                    else:
                        self._idle[bell] = None
                        await halt.sleep(IDLE_S, bell)
                        self._idle.pop(bell, None)
                    continue
                if self._timer is None:
                    self._wake(1)  # a free one keeps the clock while this one writes
                rows = self._source.stamp(taken)
                self.sent[index] = rows
                started = clock()
                await writer.write(rows)
                done = clock()
                self.sent[index] = []
                for arrival in taken:
                    group = arrival.group
                    self._in_flight.discard(group)
                    held = self._held.get(group)
                    if held is not None:
                        held[0] = done
                    figures.committed(started, done, arrival)
                if done - figures.folded_s >= FOLD_S:
                    figures.fold(done)
                if self._held:
                    self._wake(len(self._idle))  # a group freed: a held message may be taken now
        finally:
            halt.forget(bell)

    def owed_from(self) -> int:
        """Spread over processes: the lowest msg_id (draw place) this process may still owe; every own
        one below it committed (the run's count is the lowest of these, less one)."""
        owed = [rows[0].msg_id for rows in self.sent if rows]
        owed += [next(iter(self._waiting.draws()))] if self._waiting else []
        owed += [self._ahead[0].draw] if self._ahead else []
        return min(owed, default=self._source.drawn + 1)

    def owed(self) -> list[int]:
        """Spread over processes, at the end: the own msg_ids drawn and not known committed (in flight
        when the sessions stopped, still waiting, or drawn ahead)."""
        waiting = [*self._waiting.draws(), *(a.draw for a in self._ahead)]
        return sorted([row.msg_id for row in self.unsettled()] + waiting)

    def unsettled(self) -> list[Message]:
        """The rows sessions had in flight when they stopped: each landed or not."""
        return [row for rows in self.sent for row in rows]


SCAN_HELD = 256  # messages a free session passes over (held behind their groups) before it waits
LOOK_AHEAD = 4096  # arrivals a process drawn ahead looks through for its next own one


class EnqueueFigures:
    """The producer's figures on their way to the tally and the timeline: what fell due each second
    (offered) and each enqueue's times, kept and folded in every FOLD_S and at the end. One by one
    they cost the client a tenth more CPU per message than all else the producer did (the tally's,
    the timeline's and its lock's code run cold between two wakes of the loop)."""

    def __init__(self, tally: EnqueueTally, timeline: Timeline, profile: RateProfile, total: int) -> None:
        self._tally = tally
        self._timeline = timeline
        self._profile = profile
        self._total = total
        self._offered = 0  # messages counted as fallen due
        self.noted_s = 0  # the second of the last look at what is due
        self._second, self._count = 0, 0  # a second, and what fell due in it not yet on the timeline
        self._timed: list[EnqueueTimes] = []  # enqueues committed, not yet folded
        self.folded_s = 0.0

    def offer(self, at: float, due: int) -> None:
        """What fell due is counted in the second it fell due in, however late the producer woke."""
        for boundary in range(self.noted_s + 1, int(at) + 1):
            # a message due at the boundary itself is the next second's
            by_then = min(self._total, self._profile.due(boundary - 1e-6))
            if by_then > self._offered:
                self._count_offered(boundary - 1, by_then - self._offered)
                self._offered = by_then
        if due > self._offered:
            self._count_offered(at, due - self._offered)
            self._offered = due
        self.noted_s = max(self.noted_s, int(at))

    def _count_offered(self, at: float, count: int) -> None:
        second = max(0, int(at))
        if second != self._second:
            self._flush_offered()
            self._second = second
        self._count += count

    def _flush_offered(self) -> None:
        if self._count:
            self._timeline.offered(self._second, self._count)
            self._count = 0

    def committed(self, started: float, done: float, arrival: Arrival) -> None:
        """An enqueue sent at `started` committed at `done` (the run's clock)."""
        self._timed.append((started, done, arrival.ready_s, arrival.due_s))

    def fold(self, at: float) -> None:
        timed, self._timed, self.folded_s = self._timed, [], at
        for second, latencies in self._tally.add(timed).items():
            self._timeline.enqueued(second, latencies)
        self._flush_offered()
