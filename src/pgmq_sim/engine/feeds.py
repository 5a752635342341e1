"""How messages arrive: all before the workers start (a prefill with COPY), or while they run (a
producer paced at a rate). Either way the writes run on the run's event loop."""

from __future__ import annotations

import time

from pgmq_sim.actors.arrivals import RateProducer
from pgmq_sim.actors.producer import prefill
from pgmq_sim.engine.bounded import TICK_S, call_bounded
from pgmq_sim.engine.loop import poll
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import check_answering
from pgmq_sim.model.profiles import RateProfile
from pgmq_sim.model.quantities import count_text


class Prefill:
    """COPY the whole backlog in chunks before the workers start; a first signal stops it between
    chunks, and a server that stops answering is named."""

    paced = False

    def connections(self, state: RunState) -> int:
        return 0  # its connection is closed before the workers open theirs

    def produce(self, state: RunState) -> None:
        settings, source, writer, produced = state.settings, state.source, state.producers[0], state.produced
        assert source is not None
        began = time.monotonic()
        loop = state.on_loop()
        filled: list[bool] = []

        async def fill() -> None:
            try:
                await prefill(writer, source, settings.message_cap, loop.halt)
            except BaseException as exc:
                state.errors.report("producer", exc)
            finally:
                filled.append(True)

        loop.call(lambda: loop.tasks.start("prefill", fill()))
        last_committed, last_change = 0, time.monotonic()
        while not poll(lambda: bool(filled), TICK_S):
            if state.signals.interrupt.is_set():
                loop.halt_now()  # between chunks
                if state.signals.hurry.is_set():
                    break
            if produced.committed != last_committed:
                last_committed, last_change = produced.committed, time.monotonic()
            elif time.monotonic() - last_change > settings.stall_timeout:
                check_answering(state, "the prefill")  # a slow COPY is fine; a frozen server is not
                last_change = time.monotonic()
        state.timeline.arrived(0, produced.committed)
        state.errors.raise_first(*state.dsns)
        if state.signals.interrupt.is_set():
            raise InterruptedError("prefill")
        call_bounded(state.db.analyze, 120, state.signals, "ANALYZE")
        state.log.event(
            f"prefilled {count_text(produced.committed)} messages in {time.monotonic() - began:.2f} s"
        )

    def start(self, state: RunState) -> None:
        pass

    def behind(self, state: RunState) -> int:
        return 0

    def describe(self) -> str:
        return ""


class Paced:
    """The producer's sessions enqueueing as a rate profile has messages due while the workers run:
    on the run's process, or, in a spread run, on the worker processes (distributed/producing)."""

    paced = True

    def __init__(self, profile: RateProfile, sessions: int = 1) -> None:
        self.profile = profile
        self.sessions = sessions

    def connections(self, state: RunState) -> int:
        return state.settings.producers

    def produce(self, state: RunState) -> None:
        pass

    def start(self, state: RunState) -> None:
        if state.spread_producers is not None:  # the worker processes produce (distributed/producing)
            state.spread_producers(state.started)
            return
        assert state.source is not None
        producer = state.producing = RateProducer(
            state.producers,
            state.source,
            state.settings.message_cap,
            self.profile,
            state.halt,
            state.clock,
            state.timeline,
            state.enqueues,
            state.settings.duration,
            state.settings.enqueue_batch,
        )
        state.on_loop().start("producer", producer.run)

    def behind(self, state: RunState) -> int:
        due = min(self.profile.due(state.clock()), state.settings.message_cap)
        return max(0, due - state.produced.committed)

    def describe(self) -> str:
        who = "a producer" if self.sessions == 1 else f"{count_text(self.sessions)} producer sessions"
        return f" and {who} at {self.profile.describe()}"
