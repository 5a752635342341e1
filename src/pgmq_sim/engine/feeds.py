"""How messages arrive: all before the workers start (a prefill with COPY), or while they run (a
producer paced at a rate). Either way the writes run on the run's event loop."""

from __future__ import annotations

import time

from pgmq_sim.actors.producer import RateProducer, prefill
from pgmq_sim.engine.bounded import TICK_S, call_bounded
from pgmq_sim.engine.loop import poll
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import check_answering
from pgmq_sim.model.profiles import RateProfile


class Prefill:
    """COPY the whole backlog in chunks before the workers start; a first signal stops it between
    chunks, and a server that stops answering is named."""

    paced = False

    def connections(self, state: RunState) -> int:
        return 0  # its connection is closed before the workers open theirs

    def produce(self, state: RunState) -> None:
        settings, source, writer = state.settings, state.source, state.writer
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
            if writer.committed != last_committed:
                last_committed, last_change = writer.committed, time.monotonic()
            elif time.monotonic() - last_change > settings.stall_timeout:
                check_answering(state, "the prefill")  # a slow COPY is fine; a frozen server is not
                last_change = time.monotonic()
        state.timeline.arrived(0, writer.committed)
        state.errors.raise_first(*state.dsns)
        if state.signals.interrupt.is_set():
            raise InterruptedError("prefill")
        call_bounded(state.db.analyze, 120, state.signals, "ANALYZE")
        state.log.event(f"prefilled {writer.committed} messages in {time.monotonic() - began:.2f} s")

    def start(self, state: RunState) -> None:
        pass

    def behind(self, state: RunState) -> int:
        return 0

    def describe(self) -> str:
        return ""


class Paced:
    """One producer (wherever the workers run) inserting as a rate profile has messages due while
    the workers run."""

    paced = True

    def __init__(self, profile: RateProfile) -> None:
        self.profile = profile

    def connections(self, state: RunState) -> int:
        return 1

    def produce(self, state: RunState) -> None:
        pass

    def start(self, state: RunState) -> None:
        assert state.source is not None
        producer = RateProducer(
            state.writer,
            state.source,
            state.settings.message_cap,
            self.profile,
            state.halt,
            state.clock,
            state.timeline,
            state.settings.duration,
        )
        state.on_loop().start("producer", producer.run)

    def behind(self, state: RunState) -> int:
        due = min(self.profile.due(state.clock()), state.settings.message_cap)
        return max(0, due - state.writer.committed)

    def describe(self) -> str:
        return f" and a producer at {self.profile.describe()}"
