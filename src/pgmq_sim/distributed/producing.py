"""A spread run's producers: at a constant -rate or a -rate-profile (its numbers sent in the plan),
the master deals the -producers sessions over the worker processes (the first ones take one more
when they do not divide evenly; with fewer sessions than processes the last ones get none, and the
master keeps none). Every producing process draws every arrival from the same seeded source, by the
same profile, on the same clock (the master's start, sent as wall-clock time), so an arrival's
place in the draws is its msg_id in every process; each enqueues only the arrivals of its own
groups (a stable function of (queue_type, order_id)), so one key's messages are one process's, in
order. A profile set on the master as the run goes (a sweep's, the phases') keeps the producer
there, and a note says why (kept_on_master).

Each reports its enqueue figures with its worker reports; the master sums them (the histograms
merge exactly), takes the run's produced count as the lowest msg_id any process may still owe, less
one, and at the end writes the arrivals the end cut off below the highest msg_id that landed (drawn
again from the same seed), so the audit's ids stay 1..produced as in one process.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from pgmq_sim.actors.arrivals import RateProducer
from pgmq_sim.actors.bells import Halt
from pgmq_sim.actors.producer import Arrival, BatchWriter, MessageSource, ShareBook
from pgmq_sim.actors.tasks import Tasks
from pgmq_sim.db.batches import Evidence, evidence_for
from pgmq_sim.db.sessions import Sessions
from pgmq_sim.db.values import Message
from pgmq_sim.engine.state import RunState
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.keys import GroupTally
from pgmq_sim.model.profiles import profile_data, profile_of
from pgmq_sim.model.skew import INT4_MAX, KeySkew, hottest_share, key_sampler
from pgmq_sim.result.enqueues import EnqueueTally
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.reasons import ReasonTally
from pgmq_sim.result.timeline import Timeline
from pgmq_sim.settings import Payload, queue_types

GROUP_SPREAD = 1_000_003  # a prime: type and order both move a group's process


@dataclass(frozen=True)
class ProducerShare:
    """What a producing process is sent in its plan."""

    share: int  # its place among the producing processes, from 0
    shares: int  # producing processes
    sessions: int  # its producer sessions
    source_state: list[Any]  # the seeded source's random state at the run's start
    enqueue: str  # the design's enqueue.sql
    evidence: str  # db.batches.Evidence
    prepared: bool  # named statements (not behind a transaction pooler)
    id_type: str | None
    profile: dict[str, Any]  # the rate profile's numbers (model/profiles.profile_data)

    def as_data(self) -> dict[str, Any]:
        return asdict(self)


def owner(arrival: Arrival, shares: int) -> int:
    """The producing process that enqueues this arrival's group (from 0)."""
    return (arrival.type_index * GROUP_SPREAD + arrival.order_id) % shares


def kept_on_master(state: RunState) -> str | None:
    """Why a paced run's producer sessions stay on the master, in one line; None: they are spread.
    A spread run's processes draw the arrivals from a profile of fixed numbers (a constant -rate or
    a -rate-profile), on the seed's table, whose rows say what landed."""
    settings = state.settings
    if settings.sweep is not None:
        return "a sweep sets its steps' rates on the master as it goes"
    if settings.phases:
        return "phases set their rates and pressures on the master as they go"
    if not state.design.seed_table:
        return "a folder design's own enqueue leaves no row of the seed's table to say what landed"
    if evidence_for(settings.delmsg, settings.audit) == Evidence.RECORD:
        return "-delmsg with -no-audit leaves no row to say what landed"
    if profile_data(settings.rate_schedule) is None:
        return f"its rate ({settings.rate_schedule.describe()}) is set on the master as the run goes"
    return None


def spreads(state: RunState, processes: int) -> bool:
    """Whether the worker processes produce: a paced run whose producer nothing keeps on the master
    (kept_on_master), and at least one process."""
    return processes > 0 and state.settings.paced and kept_on_master(state) is None


def deal_producers(state: RunState, processes: int) -> list[ProducerShare | None]:
    """The -producers sessions over the processes, the first ones taking one more when they do not
    divide evenly (fewer sessions than processes: the first ones have one each, the others none);
    None for a process with none."""
    total = state.settings.producers
    counts = [total // processes + (1 if r < total % processes else 0) for r in range(processes)]
    shares = sum(1 for count in counts if count)
    preflight = state.preflight
    assert state.source is not None and preflight is not None
    state.source.ids_by_draw = True  # the master draws them again at the end, for what was cut off
    version, internal, gauss = state.source_rng.getstate()
    source_state = [version, list(internal), gauss]
    evidence = evidence_for(state.settings.delmsg, state.settings.audit, state.design.seed_table)
    profile = profile_data(state.settings.rate_schedule)
    assert profile is not None  # spreads(): a profile of fixed numbers
    dealt: list[ProducerShare | None] = []
    share = 0
    for count in counts:
        if not count:
            dealt.append(None)
            continue
        dealt.append(
            ProducerShare(
                share,
                shares,
                count,
                source_state,
                state.design.enqueue.text,
                str(evidence),
                not preflight.path.transaction_pooled,
                preflight.id_type,
                profile,
            )
        )
        share += 1
    return dealt


def wall_start(state: RunState) -> float:
    """The run clock's zero as wall-clock time: every process's arrivals fall due on it."""
    return time.time() - (time.perf_counter() - state.started)


class EnqueueDeltas(Timeline):
    """A producing process's enqueues per second since its last report, on the master's clock: the
    seconds' enqueue histograms (their counts are the rows written), and what fell due (the first
    share's only: every process draws every arrival)."""

    def __init__(self, offers: bool) -> None:
        super().__init__()
        self._offers = offers
        self._offered: dict[int, int] = {}
        self._latencies: dict[int, LatencyHistogram] = {}

    def offered(self, at_s: float, count: int) -> None:
        if self._offers:
            second = max(0, int(at_s))
            self._offered[second] = self._offered.get(second, 0) + count

    def enqueued(self, second: int, latencies: LatencyHistogram) -> None:
        histogram = self._latencies.get(second)
        if histogram is None:
            histogram = self._latencies[second] = LatencyHistogram()
        histogram.merge(latencies)

    def take(self) -> dict[str, Any]:
        taken = {
            "offered": sorted(self._offered.items()),
            "latencies": [(s, h.encode()) for s, h in sorted(self._latencies.items())],
        }
        self._offered, self._latencies = {}, {}
        return taken


def apply_deltas(timeline: Timeline, deltas: dict[str, Any]) -> None:
    """A producing process's seconds, on the master's timeline."""
    for second, count in deltas["offered"]:
        timeline.offered(second, int(count))
    for second, encoded in deltas["latencies"]:
        timeline.enqueued(int(second), LatencyHistogram.decode(encoded))


class ShareProducer:
    """A worker process's producer sessions, on its child's loop: the run's arrivals, its groups'."""

    def __init__(
        self,
        share: ProducerShare,
        settings: dict[str, Any],
        dsn: str,
        halt: Halt,
        log: Callable[[str], None],
        reasons: ReasonTally,
    ) -> None:
        self.share = share
        self._settings = settings
        self._dsn = dsn
        self._halt = halt
        self.started = 0.0
        self.book = ShareBook()
        self.tally = EnqueueTally()
        self.deltas = EnqueueDeltas(offers=share.share == 0)
        reconnect = float(settings["reconnect_timeout"])
        self.writers = [
            BatchWriter(
                dsn,
                reconnect,
                halt,
                log,
                Evidence(share.evidence),
                share.enqueue,
                reasons,
                self.clock,
                self.book,
            )
            for _ in range(share.sessions)
        ]
        for writer in self.writers:
            writer.prepared = share.prepared
            writer.id_type = share.id_type
        self.source: MessageSource | None = None
        self.producer: RateProducer | None = None

    def clock(self) -> float:
        """Seconds since the master's run clock started (0 before)."""
        return time.perf_counter() - self.started if self.started else 0.0

    async def open(self) -> None:
        """The source, as the master's: the same seed's state, on the server's clock read here."""
        settings = self._settings
        reconnect = float(settings["reconnect_timeout"])
        row = await asyncio.to_thread(lambda: Sessions(self._dsn, reconnect).one("server_clock"))
        assert row is not None
        rng = random.Random()
        version, internal, gauss = self.share.source_state
        rng.setstate((int(version), tuple(int(v) for v in internal), gauss))
        types, orders = queue_types(int(settings["types"])), int(settings["orders"])
        skew = KeySkew.parse(str(settings["key_skew"]))
        payload, priority, delay = settings["payload_bytes"], settings["priority"], settings["delay"]
        self.source = MessageSource(
            types,
            key_sampler(skew, orders),
            rng,
            row[0],
            GroupTally(types, orders, hottest_share(skew, orders, len(types))),
            Payload.parse(payload) if payload else None,
            PriorityRange.parse(priority) if priority else None,
            Delay.parse(delay) if delay else None,
            ids_by_draw=True,
        )

    def start(self, at_wall: float, tasks: Tasks) -> None:
        """Arrivals from the master's zero on (sent as wall-clock time: one host's clock, or hosts
        kept in step by NTP)."""
        assert self.source is not None
        settings, share = self._settings, self.share
        self.started = time.perf_counter() - max(0.0, time.time() - at_wall)
        fill = settings["fill_db"]
        self.producer = RateProducer(
            self.writers,
            self.source,
            int(fill) if fill is not None else INT4_MAX,
            profile_of(share.profile),
            self._halt,
            self.clock,
            self.deltas,
            self.tally,
            settings["duration"],
            int(settings["enqueue_batch"]),
            owns=lambda arrival: owner(arrival, share.shares) == share.share,
        )
        tasks.start("producer", self.producer.run())

    def report(self, full: bool, final: bool) -> dict[str, Any]:
        """Its figures since the last report; the tally every few reports; what it owes at the end."""
        producer, source = self.producer, self.source
        return {
            "sessions": self.share.sessions,
            "mark": producer.owed_from() if producer is not None else 1,
            "written": self.book.written,
            "writes": sum(w.writes for w in self.writers),
            "drawn": source.drawn if source is not None else 0,
            "deltas": self.deltas.take(),
            "tally": self.tally.as_data() if full else None,
            "owed": (producer.owed() if producer is not None else []) if final else None,
        }


class MasterDraws:
    """The master's copy of the arrival stream, drawn as the processes report theirs (a few
    microseconds an arrival; the key spread counted as in one process), keeping only the arrivals
    from the lowest msg_id any process may still owe: at the end, only the tail is drawn."""

    def __init__(self, source: MessageSource) -> None:
        self._source = source
        self._kept: deque[Arrival] = deque()

    def follow(self, drawn: int, owed_from: int) -> None:
        """Draw up to `drawn`; forget what every process committed (below `owed_from`)."""
        source, kept = self._source, self._kept
        while source.drawn < drawn:
            kept.append(source.draw())
        while kept and kept[0].draw < owed_from:
            kept.popleft()

    def owed(self, shares: int, owes: Callable[[int, int], bool], drawn: int) -> list[Message]:
        """At the end: the arrivals up to `drawn` that their process (owner, msg_id) may not have
        committed, stamped now: db.settle writes those below the highest msg_id that landed and that
        did not land."""
        self.follow(drawn, 0)
        return self._source.stamp([a for a in self._kept if owes(owner(a, shares), a.draw)])
