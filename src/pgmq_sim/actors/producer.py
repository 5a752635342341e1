"""The producer: writes messages with increasing msg_id and distinct, increasing time_added.

Times are assigned here rather than defaulted in SQL: the seed's claim query
never takes two messages of one group whose time_added are equal, and
clock_timestamp() repeats within a microsecond in a bulk insert. They follow the
server's clock (read once at start, advanced by this process's monotonic clock),
so end-to-end latency is measured on one clock wherever the workers run.

Each write is shaped as an application's enqueue: one statement in a transaction of its own (see
db/batches). A message counts as produced once its write has committed; a write whose commit
answer was lost is looked for in the queue before it is written again, so it lands once. A
write the server ended without ending the session (a statement or lock timeout, a deadlock) rolled
back: it is counted by its reason and written again. The producer is a task on the run's event
loop, paced by the loop's timers.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg

from pgmq_sim.actors.waits import Bell, Halt
from pgmq_sim.db.batches import Evidence, landed, open_writer, record_produced, write_batch, write_logged
from pgmq_sim.db.connection import is_connection_lost, reconnecting_async, server_reason
from pgmq_sim.db.values import Message
from pgmq_sim.db.wire import Wire
from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.profiles import RateProfile
from pgmq_sim.model.skew import KeySampler
from pgmq_sim.result.reasons import ReasonTally
from pgmq_sim.result.stats import Timeline
from pgmq_sim.settings import Payload

ONE_US = timedelta(microseconds=1)
PREFILL_CHUNK = 20_000  # a stop is noticed between chunks (well under a second each)


class MessageSource:
    """Generates messages: a random type, an order_id from the key sampler, an optional random
    payload, times on the server's clock. Draws from its own seeded rng in a fixed order per
    message, so a seed replays the same messages however they are batched."""

    def __init__(
        self,
        types: tuple[str, ...],
        keys: KeySampler,
        rng: random.Random,
        server_start: datetime,
        tally: GroupTally,
        payload: Payload | None = None,
        priority: PriorityRange | None = None,
        delay: Delay | None = None,
    ) -> None:
        self._types = types
        self._keys = keys
        self._rng = rng
        self._server_start = server_start
        self._mono_start = time.monotonic()
        self._payload = payload
        self._priority = priority
        self._delay = delay
        self.tally = tally
        self.next_id = 1
        self.last_added: datetime | None = None

    def take(self, count: int) -> list[Message]:
        now = self._server_start + timedelta(seconds=time.monotonic() - self._mono_start)
        rows: list[Message] = []
        rng, types, keys, payload, tally = self._rng, self._types, self._keys, self._payload, self.tally
        for _ in range(count):
            type_index = rng.randrange(len(types))  # as rng.choice(types) did: seeded runs replay
            order_id = keys.draw(rng)
            self.last_added = now if self.last_added is None else max(now, self.last_added + ONE_US)
            body = None
            if payload is not None:
                size = payload.min_bytes
                if payload.max_bytes > size:
                    size = rng.randint(size, payload.max_bytes)
                body = rng.randbytes(size)
            message = Message(self.next_id, types[type_index], order_id, self.last_added, body)
            if self._priority is not None or self._delay is not None:  # drawn only when asked: seeds replay
                later = self._delay.draw(rng) if self._delay is not None else None
                message = message._replace(
                    priority=self._priority.draw(rng) if self._priority is not None else 0,
                    due_at=None if later is None else self.last_added + timedelta(seconds=later),
                )
            rows.append(message)
            tally.add(type_index, order_id)
            self.next_id += 1
        return rows

    @property
    def generated(self) -> int:
        return self.next_id - 1


RECORD_EVERY_S = 1.0  # how often the run record learns the producer's count (for a killed run)


class BatchWriter:
    """The producer's connection, kept across writes and replaced when it is lost (on the run's
    loop; its halt is the run's)."""

    def __init__(
        self,
        dsn: str,
        reconnect_timeout: float,
        halt: Halt,
        log: Callable[[str], None],
        evidence: Evidence,
        enqueue: str,
        reasons: ReasonTally | None = None,  # the server's reasons met, counted
        clock: Callable[[], float] = lambda: 0.0,  # the run's
    ):
        self._dsn = dsn
        self._reasons = reasons
        self._clock = clock
        self._enqueue = enqueue  # the design's enqueue.sql
        self._reconnect_timeout = reconnect_timeout
        self._halt = halt
        self._bell: Bell | None = None
        self._log = log
        self._evidence = evidence
        self._wire: Wire | None = None
        self._doubt = False  # a write was sent and its answer lost: looked for before it is written again
        self._recorded_at = time.monotonic()
        self.prepared = True  # named statements for the one-message insert (not behind a tx pooler)
        self.id_type: str | None = None  # a folder design's own ids: its enqueue returns them
        self.committed = 0
        self.connections_lost = 0
        self.writes = 0  # the producer's transactions
        self.records = 0  # the tool's: the run record raised
        self.own = False  # the tool's own writes (the prefill): under its bounds, not the role's timeouts
        self.backend_pids: list[int] = []  # its sessions, one per connection: a notification's sender

    async def _sleep(self, seconds: float) -> bool:
        if self._bell is None:
            self._bell = self._halt.bell()
        return await self._halt.sleep(seconds, self._bell)

    async def write(self, rows: list[Message]) -> None:
        """Write the batch once, whatever the connection does, or raise past the deadline. A write
        the server ended (its statement or lock timeout, a deadlock) rolled back: it is counted by
        its reason and written again, after a short backoff when it repeats."""
        ended = 0
        while True:
            try:
                await self._write_once(rows)
                return
            except psycopg.Error as exc:
                if self._lost(exc) or not server_reason(exc, self._dsn).retried or self._halt.is_set():
                    raise
                self._met(exc, lost=False)
                if self.committed >= rows[-1].msg_id:  # it landed; the run record's count after it did not
                    return
                if len(rows) > 1 and not self.own:  # a catch-up batch the role's timeout ends: the
                    for row in rows:  # application's shape, one enqueue each, each ridden through
                        if row.msg_id > self.committed:
                            await self.write([row])
                    return
                ended += 1
                if ended > 1 and await self._sleep(min(1.0, 0.01 * 2 ** (ended - 2))):
                    raise

    async def _write_once(self, rows: list[Message]) -> None:
        wire = self._wire
        if wire is not None and not self._doubt:  # the usual case: one round trip, nothing in doubt
            try:
                await self._write(wire, rows)
                return
            except psycopg.Error as exc:
                if not self._lost(exc):
                    raise
                self._on_lost(exc, False)
                self._doubt = True
        await self._write_again(rows)

    def _met(self, exc: BaseException, lost: bool) -> None:
        """A write the server ended (lost: the session with it), counted by its reason and said."""
        said = server_reason(exc, self._dsn)
        if self._reasons is not None:
            self._reasons.met(self._clock(), said, "producer", None, lost)
        if lost:
            self._log(f"producer lost its connection: {said.text()}; reconnecting")
        else:
            self._log(f"producer: the server ended a write: {said.text()}; writing it again")

    async def _write(self, wire: Wire, rows: list[Message]) -> None:
        if self._evidence == Evidence.LOG:
            await write_logged(
                wire, rows, functions=not self.prepared, keyed=self.id_type is not None, own=self.own
            )
        else:
            await write_batch(wire, rows, self._evidence, self.prepared, self._enqueue, self.own)
        self.writes += 1
        self.committed = target = rows[-1].msg_id
        if self._evidence != Evidence.RECORD and time.monotonic() - self._recorded_at >= RECORD_EVERY_S:
            self._recorded_at = time.monotonic()
            await record_produced(wire, target)
            self.records += 1

    def _lost(self, exc: BaseException) -> bool:
        closed = self._wire is not None and self._wire.closed
        return not self._halt.is_set() and is_connection_lost(exc, closed)

    def _on_lost(self, exc: BaseException, in_doubt: bool) -> None:
        self.close()
        if not in_doubt:
            self.connections_lost += 1
            self._met(exc, lost=True)

    async def _write_again(self, rows: list[Message]) -> None:
        """Connect (again), and write the batch, unless it was sent and its lost commit answer had
        landed (it is looked for before it is written again)."""
        target = rows[-1].msg_id

        async def attempt() -> None:
            if self._wire is None:
                self._wire = await open_writer(
                    self._dsn, self._evidence, self.prepared, self._enqueue, self.id_type
                )
                self.backend_pids.append(self._wire.backend_pid)
            wire = self._wire
            if self._doubt:
                if await landed(wire, target, self._evidence):
                    self.committed = target  # the lost commit went through
                    self._doubt = False
                    return
                self._doubt = False
            await self._write(wire, rows)

        def on_lost(exc: BaseException) -> None:
            self._on_lost(exc, self._doubt)
            self._doubt = True

        def give_up(exc: BaseException) -> BaseException:
            return ServerLostError(
                f"producer could not reconnect within {self._reconnect_timeout:g} s"
                f" (-reconnect-timeout): {reason(exc, self._dsn)}"
            )

        await reconnecting_async(
            attempt,
            Backoff(self._reconnect_timeout, self._halt),
            self._sleep,
            lost=self._lost,
            on_lost=on_lost,
            give_up=give_up,
        )

    def close(self) -> None:
        """On the loop: close the connection (a write in flight rolls back)."""
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        if self._bell is not None:
            self._halt.forget(self._bell)
            self._bell = None


async def prefill(writer: BatchWriter, source: MessageSource, count: int, halt: Halt) -> None:
    """COPY the backlog in chunks, each its own transaction, checking for a stop between them."""
    writer.own = True  # the backlog is the tool's set-up, not the team's traffic
    try:
        while source.generated < count and not halt.is_set():
            await writer.write(source.take(min(PREFILL_CHUNK, count - source.generated)))
    finally:
        writer.close()


CATCH_UP = 5  # messages due at once that go as one batch (a COPY); fewer go one INSERT each


class RateProducer:
    """Inserts up to `total` messages while the workers run, as many as the rate profile has due.

    The profile says how many messages are due by each moment (the integral of its rate), so pacing
    never drifts: after a slow insert the producer catches up, a few messages one INSERT each (the
    loop's timers count whole milliseconds: at a few thousand a second a tick has several due), and
    a backlog with one batch of everything now due. What was due each second (offered) and what was
    written (arrived) go to the timeline.
    """

    def __init__(
        self,
        writer: BatchWriter,
        source: MessageSource,
        total: int,
        profile: RateProfile,
        halt: Halt,
        clock: Callable[[], float],
        timeline: Timeline,
        until_s: float | None = None,
    ) -> None:
        ends = [s for s in (until_s, profile.end_s) if s is not None]
        self._until_s = min(ends) if ends else None  # nothing is due after it
        self._writer = writer
        self._source = source
        self._total = total
        self._profile = profile
        self._halt = halt
        self._clock = clock
        self._timeline = timeline
        self._offered = 0
        self._noted_s = 0  # the second of the last look at what is due

    def _offer(self, at: float, due: int) -> None:
        """What fell due is counted in the second it fell due in, however late the producer woke."""
        for boundary in range(self._noted_s + 1, int(at) + 1):
            # a message due at the boundary itself is the next second's
            by_then = min(self._total, self._profile.due(boundary - 1e-6))
            if by_then > self._offered:
                self._timeline.offered(boundary - 1, by_then - self._offered)
                self._offered = by_then
        if due > self._offered:
            self._timeline.offered(at, due - self._offered)
            self._offered = due
        self._noted_s = max(self._noted_s, int(at))

    async def run(self) -> None:
        source, halt, writer = self._source, self._halt, self._writer
        bell = halt.bell()
        try:
            while source.generated < self._total and not halt.is_set():
                at = self._clock()
                if self._until_s is not None and at >= self._until_s:
                    return
                due = min(self._total, self._profile.due(at))
                self._offer(at, due)
                if due - source.generated >= CATCH_UP:
                    rows = source.take(due - source.generated)
                    await writer.write(rows)
                    self._timeline.arrived(self._clock(), len(rows))
                elif due > source.generated:
                    for _ in range(due - source.generated):
                        await writer.write(source.take(1))
                        self._timeline.arrived(self._clock(), 1)
                        if halt.is_set():
                            break
                else:
                    await halt.sleep(self._profile.next_due_in(at, source.generated), bell)
        finally:  # what fell due while a write waited (a path down until the end) was offered too
            halt.forget(bell)
            writer.close()
            at = self._clock() if self._until_s is None else min(self._clock(), self._until_s - 1e-6)
            self._offer(at, min(self._total, self._profile.due(at)))
