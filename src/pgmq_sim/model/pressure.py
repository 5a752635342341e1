"""A run in phases (a scenario's `[[phase]]` tables, or -phase): each a name, a length, a rate or a
rate profile, and a pressure put on the queue meanwhile; their rates chained into one profile; and
-suite pressure's cells. (Not engine/phases, which are the stages every run goes through.)

-phase text: phases separated by ';', each `name=N duration=S [rate=R] [rate-profile=P]
[pressure=KIND[:AMOUNT]]`, e.g. `name=baseline duration=20 rate=200; name=held duration=20
pressure=idle-in-tx; name=recovery duration=20`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import FaultKind
from pgmq_sim.model.profiles import IDLE_WAIT_S, ConstantRate, RateProfile, number_text

# each pressure: the fault that makes it (burst: none, the phase's rate times F) and its amount's
# default (readers:N sessions, kill-backends:R a second, pool-exhaustion:N sessions, 0 every spare)
PRESSURES: dict[str, tuple[FaultKind | None, float | None]] = {
    "idle-in-tx": (FaultKind.IDLE_IN_TX, None),
    "readers": (FaultKind.READERS, 4),
    "kill-backends": (FaultKind.KILL_CONNECTION, 1),
    "restart-server": (FaultKind.RESTART_SERVER, None),
    "pool-exhaustion": (FaultKind.POOL_EXHAUSTION, 0),
    "burst": (None, 1.5),
    "hold-xmin": (FaultKind.HOLD_XMIN, None),
    "lock-table": (FaultKind.LOCK_TABLE, None),
}
# -suite pressure's cells, in order
SUITE_PRESSURES = (
    "idle-in-tx",
    "readers:4",
    "kill-backends:1",
    "restart-server",
    "pool-exhaustion",
    "burst:1.5",
    "hold-xmin",
    "lock-table",
)
SUITES = ("pressure",)
PHASE_KEYS = ("name", "duration", "rate", "rate-profile", "pressure")
RECOVERY_P99_FACTOR = 1.2  # recovered: the backlog back to the baseline's, the p99 within this of it
RECOVERY_HOLD_S = 2  # ... for this many whole seconds in a row
EXAMPLE = (
    "name=baseline duration=20 rate=200; name=held duration=20 pressure=idle-in-tx; name=after duration=20"
)


@dataclass(frozen=True)
class Pressure:
    name: str
    amount: float | None  # readers:N, kill-backends:R, pool-exhaustion:N, burst:F

    def __str__(self) -> str:
        return self.name + (f":{number_text(self.amount)}" if self.amount is not None else "")

    @property
    def fault(self) -> FaultKind | None:
        return PRESSURES[self.name][0]

    @classmethod
    def parse(cls, text: str) -> Pressure:
        name, colon, amount = text.strip().partition(":")
        if name not in PRESSURES:
            raise UsageError(f"unknown pressure '{name}'; use one of: {', '.join(PRESSURES)}")
        default = PRESSURES[name][1]
        if not colon:
            return cls(name, default)
        if default is None:
            raise UsageError(f"pressure {name} takes no amount; write {name}")
        whole = name in ("readers", "pool-exhaustion")
        try:
            value = float(amount)
        except ValueError:
            value = math.nan
        positive = value >= 0 if name == "pool-exhaustion" else value > 0
        if not (math.isfinite(value) and positive) or (whole and not value.is_integer()):
            need = "a whole number" if whole else "a number above 0"
            raise UsageError(f"pressure '{text.strip()}': give {name}:N with N {need}")
        return cls(name, value)


@dataclass(frozen=True)
class PhaseSpec:
    name: str
    duration_s: float
    rate: float | None = None  # None: the phase before's (the first's: -rate)
    rate_profile: str | None = None
    pressure: Pressure | None = None

    def text(self) -> str:
        items = [("name", self.name), ("duration", number_text(self.duration_s))]
        items += [("rate", number_text(self.rate))] if self.rate is not None else []
        items += [("rate-profile", self.rate_profile)] if self.rate_profile is not None else []
        items += [("pressure", str(self.pressure))] if self.pressure is not None else []
        return " ".join(f"{key}={value}" for key, value in items)

    def as_table(self) -> dict[str, object]:
        """As a scenario file's [[phase]] table."""
        table: dict[str, object] = {"name": self.name, "duration": self.duration_s}
        if self.rate is not None:
            table["rate"] = self.rate
        if self.rate_profile is not None:
            table["rate-profile"] = self.rate_profile
        if self.pressure is not None:
            table["pressure"] = str(self.pressure)
        return table


def parse_phases(text: str) -> tuple[PhaseSpec, ...]:
    """-phase's text (see the module's doc)."""
    phases = []
    for index, item in enumerate(filter(None, (part.strip() for part in text.split(";")))):
        fields: dict[str, str] = {}
        for word in item.split():
            key, equals, value = word.partition("=")
            if not equals or key not in PHASE_KEYS or not value:
                raise UsageError(
                    f"-phase: '{word}' in phase {index + 1} is not KEY=VALUE with a key of"
                    f" {', '.join(PHASE_KEYS)}; e.g. {EXAMPLE}"
                )
            fields[key] = value
        phases.append(phase_of(fields, index))
    if not phases:
        raise UsageError(f"-phase needs at least one phase, e.g. {EXAMPLE}")
    names = [p.name for p in phases]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise UsageError(f"-phase: the name {repeated[0]} is given to two phases; name each once")
    return tuple(phases)


def phase_of(fields: dict[str, str], index: int) -> PhaseSpec:
    where = f"phase {index + 1}"
    name = fields.get("name", f"phase{index + 1}")
    if "duration" not in fields:
        raise UsageError(f"-phase: {where} ({name}) needs duration=SECONDS")
    numbers: dict[str, float] = {}
    for key in ("duration", "rate"):
        if key in fields:
            try:
                numbers[key] = float(fields[key].removesuffix("s") if key == "duration" else fields[key])
            except ValueError:
                numbers[key] = math.nan
            if (
                not math.isfinite(numbers[key])
                or numbers[key] < 0
                or (key == "duration" and numbers[key] == 0)
            ):
                raise UsageError(f"-phase: {where} ({name}): {key}={fields[key]} must be a number above 0")
    if "rate" in fields and "rate-profile" in fields:
        raise UsageError(f"-phase: {where} ({name}) gives rate and rate-profile; give one")
    pressure = Pressure.parse(fields["pressure"]) if fields.get("pressure", "none") != "none" else None
    return PhaseSpec(name, numbers["duration"], numbers.get("rate"), fields.get("rate-profile"), pressure)


def is_number(text: str) -> bool:
    """-phase S (the suite's phase length) rather than phases."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def suite_phases(pressure: str, seconds: float, rate: float) -> tuple[PhaseSpec, ...]:
    """A -suite pressure cell: baseline, the pressure, recovery, each `seconds` long at `rate`."""
    return (
        PhaseSpec("baseline", seconds, rate),
        PhaseSpec("pressure", seconds, rate, pressure=Pressure.parse(pressure)),
        PhaseSpec("recovery", seconds, rate),
    )


class PhasedRate:
    """The phases' rates one after another: each phase's profile runs on its own clock from the
    phase's start, and offers nothing after its end."""

    def __init__(self, parts: list[tuple[float, RateProfile]]) -> None:
        self._parts = parts
        self._starts: list[float] = []
        self._before: list[int] = []  # messages the earlier phases offered
        start, before = 0.0, 0
        for length, profile in parts:
            self._starts.append(start)
            self._before.append(before)
            start += length
            before += profile.due(length - 1e-9)
        self._end = start
        self._total = before
        self.fixed = all(profile.fixed for _, profile in parts)

    def _phase(self, t: float) -> int:
        index = 0
        while index + 1 < len(self._parts) and t >= self._starts[index + 1]:
            index += 1
        return index

    def rate_at(self, t: float) -> float:
        if t < 0 or t >= self._end:
            return 0.0
        index = self._phase(t)
        return self._parts[index][1].rate_at(t - self._starts[index])

    def due(self, t: float) -> int:
        if t < 0:
            return 0
        if t >= self._end:
            return self._total
        index = self._phase(t)
        length, profile = self._parts[index]
        return self._before[index] + min(profile.due(t - self._starts[index]), profile.due(length - 1e-9))

    def due_time(self, count: int) -> float | None:
        return None  # asked of its phases as they come (next_due_in)

    def next_due_in(self, t: float, count: int) -> float:
        if self.due(t) > count:
            return 0.0
        if count >= self._total:
            return IDLE_WAIT_S
        index = self._phase(t)
        while index + 1 < len(self._parts) and count >= self._before[index + 1]:
            index += 1  # the message is a later phase's
        start = self._starts[index]
        if t < start:
            return min(start - t, IDLE_WAIT_S)
        profile = self._parts[index][1]
        return profile.next_due_in(t - start, count - self._before[index])

    @property
    def end_s(self) -> float | None:
        return self._end

    def describe(self) -> str:
        return " then ".join(f"{p.describe()} for {number_text(length)} s" for length, p in self._parts)


def phase_profile(
    phases: tuple[PhaseSpec, ...], rate: float, read: Callable[[str, float], RateProfile]
) -> PhasedRate:
    """The run's rate over its phases; `read` reads a phase's rate-profile text over its base rate."""
    parts: list[tuple[float, RateProfile]] = []
    for phase in phases:
        rate = phase.rate if phase.rate is not None else rate  # kept from the phase before
        base = rate
        if phase.pressure is not None and phase.pressure.name == "burst":
            base *= phase.pressure.amount or 1.0
        profile = read(phase.rate_profile, base) if phase.rate_profile is not None else ConstantRate(base)
        parts.append((phase.duration_s, profile))
    return PhasedRate(parts)


def cell_label(design: str, wakeup: str, split: bool, pressures: Sequence[str]) -> str:
    """A -compare or -suite cell's name, the same before its run (the command line's) and after it
    (the report's, from its JSON): e.g. 'indexed/notify/split under lock-table'."""
    label = f"{design}/{wakeup}" + ("/split" if split else "")
    return label + "".join(f" under {p}" for p in pressures)
