"""How messages arrive: all before the workers start (a prefill with COPY), or while they run (a
producer paced at a rate)."""

from __future__ import annotations

import threading
import time

from pgmq_sim.actors.producer import RateProducer, prefill
from pgmq_sim.actors.threads import RunThread
from pgmq_sim.engine.bounded import TICK_S, call_bounded
from pgmq_sim.engine.state import RunState
from pgmq_sim.engine.watching import check_answering
from pgmq_sim.model.profiles import RateProfile


class Prefill:
    """COPY the whole backlog in chunks before the workers start; a first signal stops it between
    chunks, and a server that stops answering is named."""

    def connections(self, state: RunState) -> int:
        return 0  # its connection is closed before the workers open theirs

    def produce(self, state: RunState) -> None:
        settings, source, writer = state.settings, state.source, state.writer
        assert source is not None
        began = time.monotonic()
        stop_prefill = threading.Event()

        def fill() -> None:
            try:
                prefill(writer, source, settings.message_cap, stop_prefill)
            except BaseException as exc:
                state.errors.report("producer", exc)

        filling = threading.Thread(target=fill, name="prefill", daemon=True)
        filling.start()
        last_committed, last_change = 0, time.monotonic()
        while filling.is_alive():
            filling.join(TICK_S)
            if state.signals.interrupt.is_set():
                stop_prefill.set()
                if state.signals.hurry.is_set():
                    break
            if writer.committed != last_committed:
                last_committed, last_change = writer.committed, time.monotonic()
            elif time.monotonic() - last_change > settings.stall_timeout:
                check_answering(state, "the prefill")  # a slow COPY is fine; a frozen server is not
                last_change = time.monotonic()
        if not filling.is_alive():
            writer.close()
        state.timeline.arrived(0, writer.committed)
        state.errors.raise_first(*state.dsns)
        if state.signals.interrupt.is_set():
            raise InterruptedError("prefill")
        call_bounded(state.db.analyze, 120, state.signals, "ANALYZE")
        state.log.event(f"prefilled {writer.committed} messages in {time.monotonic() - began:.2f} s")

    def threads(self, state: RunState) -> list[RunThread]:
        return []

    def describe(self) -> str:
        return ""


class Paced:
    """One producer (wherever the workers run) inserting as a rate profile has messages due while
    the workers run."""

    def __init__(self, profile: RateProfile) -> None:
        self.profile = profile

    def connections(self, state: RunState) -> int:
        return 1

    def produce(self, state: RunState) -> None:
        pass

    def threads(self, state: RunState) -> list[RunThread]:
        assert state.source is not None
        return [
            RateProducer(
                state.writer,
                state.source,
                state.settings.message_cap,
                self.profile,
                state.stop,
                state.clock,
                state.timeline,
                state.errors.reporter("producer"),
                state.settings.duration,
            )
        ]

    def describe(self) -> str:
        return f" and a producer at {self.profile.describe()}"
