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
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

from pgmq_sim.actors.bells import Bell, Halt
from pgmq_sim.db.batches import (
    Evidence,
    enqueue_params,
    landed,
    open_writer,
    record_produced,
    write_batch,
    write_logged,
)
from pgmq_sim.db.connection import is_connection_lost, reconnecting_async, server_reason
from pgmq_sim.db.statements import ENQUEUE
from pgmq_sim.db.values import Message
from pgmq_sim.db.wire import Wire
from pgmq_sim.dsn import reason
from pgmq_sim.errors import ServerLostError
from pgmq_sim.model.backoff import Backoff
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.skew import KeySampler
from pgmq_sim.result.reasons import ReasonTally
from pgmq_sim.settings import Payload

ONE_US = timedelta(microseconds=1)
ENQUEUE_NAME = ENQUEUE.encode()
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
        ids_by_draw: bool = False,
    ) -> None:
        self._types = types
        self.ids_by_draw = ids_by_draw  # a spread run's: msg_id is the draw's place, as in every process
        self._keys = keys
        self._rng = rng
        self._server_start = server_start
        self._mono_start = time.monotonic()
        self._payload = payload
        self._priority = priority
        self._delay = delay
        self.tally = tally
        self.next_id = 1
        self.drawn = 0
        self.last_added: datetime | None = None

    def draw(self, due_s: float = 0.0) -> Arrival:
        """A message as it falls due: its type, order, payload, priority and delay, drawn in the same
        order per message whenever it is sent (a seed replays them); its id and time come later."""
        rng, keys, payload = self._rng, self._keys, self._payload
        type_index = rng.randrange(len(self._types))  # as rng.choice(types) did: seeded runs replay
        order_id = keys.draw(rng)
        body = None
        if payload is not None:
            size = payload.min_bytes
            if payload.max_bytes > size:
                size = rng.randint(size, payload.max_bytes)
            body = rng.randbytes(size)
        priority, later = 0, None
        if self._priority is not None or self._delay is not None:  # drawn only when asked: seeds replay
            later = self._delay.draw(rng) if self._delay is not None else None
            priority = self._priority.draw(rng) if self._priority is not None else 0
        self.tally.add(type_index, order_id)
        self.drawn += 1
        return Arrival(type_index, order_id, body, priority, later, due_s, due_s, False, self.drawn)

    def stamp(self, arrivals: list[Arrival]) -> list[Message]:
        """The messages as they are sent: the next msg_ids (or, spread over processes, each one's draw
        place), and distinct, increasing times on the server's clock (now)."""
        now = self._server_start + timedelta(seconds=time.monotonic() - self._mono_start)
        rows: list[Message] = []
        types = self._types
        for a in arrivals:
            self.last_added = now if self.last_added is None else max(now, self.last_added + ONE_US)
            msg_id = a.draw if self.ids_by_draw else self.next_id
            message = Message(msg_id, types[a.type_index], a.order_id, self.last_added, a.body)
            if a.priority or a.later is not None:
                message = message._replace(
                    priority=a.priority,
                    due_at=None if a.later is None else self.last_added + timedelta(seconds=a.later),
                )
            rows.append(message)
            self.next_id += 1
        return rows

    def take(self, count: int) -> list[Message]:
        """`count` messages drawn and stamped now (the prefill)."""
        return self.stamp([self.draw() for _ in range(count)])

    @property
    def generated(self) -> int:
        return self.next_id - 1


@dataclass(slots=True)
class Arrival:
    """A message that fell due, drawn as a producer session looks at it (arrivals.WaitingArrivals)."""

    type_index: int
    order_id: int
    body: bytes | None
    priority: int
    later: float | None  # seconds after its enqueue that it is due (-delay)
    due_s: float  # on the run's clock
    ready_s: float  # when nothing of its group was in flight any more (its due time, or a commit)
    held: bool = False  # seen waiting behind its group's enqueue in flight
    draw: int = 0  # its place in the draws, from 1: its msg_id in a run spread over processes

    @property
    def group(self) -> tuple[int, int]:
        return self.type_index, self.order_id


RECORD_EVERY_S = 1.0  # how often the run record learns the producer's count (for a killed run)


class ProducedBook:
    """What the run's producer sessions committed. msg_ids are given in order as enqueues are sent,
    and several sessions commit them out of that order: the produced count is the highest id below
    which every one committed (those above may be in flight), so it never passes one in doubt."""

    def __init__(self) -> None:
        self.committed = 0  # every msg_id up to this one committed
        self.written = 0  # messages committed, in all
        # a spread run's: the lowest msg_id a lost producing process may still owe (its arrivals are
        # written after the run), which the run's count passes and the live audit must not
        self.held_back: int | None = None
        self._above: set[int] = set()  # committed above the count: an earlier one is in flight
        self._recorded_at = time.monotonic()

    def landed(self, rows: list[Message]) -> None:
        self.written += len(rows)
        above = self._above
        first, last = rows[0].msg_id, rows[-1].msg_id
        if not above and first == self.committed + 1 and last - first == len(rows) - 1:
            self.committed = last  # in order, as one session writes
            return
        for row in rows:
            above.add(row.msg_id)
        while self.committed + 1 in above:
            above.remove(self.committed + 1)
            self.committed += 1

    def watermark(self) -> int:
        """Every msg_id up to this one landed: what the live audit may judge."""
        return self.committed if self.held_back is None else min(self.committed, self.held_back - 1)

    def record_due(self) -> int | None:
        """The count to raise the run record to, once a second (for a killed run), else None."""
        if time.monotonic() - self._recorded_at < RECORD_EVERY_S:
            return None
        self._recorded_at = time.monotonic()
        return self.committed


class ShareBook(ProducedBook):
    """A process's share of a spread run's enqueues: its msg_ids are draw places shared with the other
    processes, so none of its own counts is consecutive. It counts what it wrote and raises no run
    record; the master takes the run's count from every process's lowest id still owed."""

    def landed(self, rows: list[Message]) -> None:
        self.written += len(rows)

    def record_due(self) -> int | None:
        return None


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
        book: ProducedBook | None = None,  # what every session of the run committed
    ):
        self._dsn = dsn
        self._book = book if book is not None else ProducedBook()
        self._reasons = reasons
        self._clock = clock
        self._enqueue = enqueue  # the design's enqueue.sql
        self._reconnect_timeout = reconnect_timeout
        self._halt = halt
        self._bell: Bell | None = None
        self._log = log
        self._evidence = evidence
        self._own_rows = evidence in (Evidence.ROWS, Evidence.JOURNAL)  # the rows say what landed
        self._wire: Wire | None = None
        self._doubt = False  # a write was sent and its answer lost: looked for before it is written again
        self._landed: list[Message] | None = None  # the last rows written (the write's own, when it landed)
        self.prepared = True  # named statements for the one-message insert (not behind a tx pooler)
        self.id_type: str | None = None  # a folder design's own ids: its enqueue returns them
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
                if self._landed is rows:  # it landed; the run record's count after it did not
                    return
                if len(rows) > 1 and not self.own:  # a batch the role's timeout ends (all or none):
                    for row in rows:  # one enqueue each, each ridden through
                        await self.write([row])
                    return
                ended += 1
                if ended > 1 and await self._sleep(min(1.0, 0.01 * 2 ** (ended - 2))):
                    raise

    async def _write_once(self, rows: list[Message]) -> None:
        wire = self._wire
        if wire is not None and not self._doubt:  # the usual case: one round trip, nothing in doubt
            try:
                if len(rows) == 1 and self._own_rows and self.prepared and not self.own:
                    await self._enqueue_one(wire, rows)  # write_batch's one message, inline
                else:
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
        self._landed = rows
        self._book.landed(rows)
        produced = self._book.record_due() if self._evidence != Evidence.RECORD else None
        if produced is not None:
            await record_produced(wire, produced)
            self.records += 1

    async def _enqueue_one(self, wire: Wire, rows: list[Message]) -> None:
        """One message on the seed's table, by the PREPAREd enqueue: what `_write` does for it,
        without its two coroutines on every enqueue's path."""
        answer = await wire.prepared(ENQUEUE_NAME, enqueue_params(rows[0]))
        failure = answer.failure()
        if failure is not None:
            raise failure
        self.writes += 1
        self._landed = rows
        self._book.landed(rows)
        produced = self._book.record_due()
        if produced is not None:
            await record_produced(wire, produced)
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
                    self._landed = rows  # the lost commit went through
                    self._book.landed(rows)
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
