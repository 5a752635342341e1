"""The -rate-profile flag read into a profile: ramp:A..B/Ts, step:A,B,C/Ts, burst:R*Ds/Ts over the
base -rate, or a CSV file of second,rate rows replayed -speed times faster, with one-line errors."""

from __future__ import annotations

import math
import re
from pathlib import Path

from pgmq_sim.errors import UsageError
from pgmq_sim.model.profiles import NUMBER, Burst, Ramp, RateProfile, Replay, Steps, number_text
from pgmq_sim.paths import describe_path

MAX_PROFILE_BYTES = 10_000_000  # a day at one row a second is ~1.5 MB; /dev/zero is not a recording
REPLAY_SPEED_FLAG = "-speed"

_RAMP = re.compile(rf"ramp:({NUMBER})\.\.({NUMBER})/({NUMBER})s?")
_STEP = re.compile(rf"step:({NUMBER}(?:,{NUMBER})*)/({NUMBER})s?")
_BURST = re.compile(rf"burst:({NUMBER})\*({NUMBER})s?/({NUMBER})s?")
_FORMS = {
    "ramp": "ramp:A..B/Ts (rates A, B >= 0 msg/s, T > 0 s), e.g. ramp:100..1000/60s",
    "step": "step:A,B,C/Ts (rates >= 0 msg/s, each for T > 0 s), e.g. step:100,200,400/10s",
    "burst": "burst:R*Ds/Ts (R > 0 msg/s more than -rate for D s every T s, D <= T), e.g. burst:500*2s/10s",
}
_CSV_FIX = "give second,rate rows (a header allowed), seconds >= 0 and increasing, rates >= 0, e.g. 0,100"


def parse_rate_profile(text: str, base_rate: float, speed: float) -> RateProfile:
    """The -rate-profile flag: ramp:A..B/Ts, step:A,B,C/Ts, burst:R*Ds/Ts over the base -rate, or
    the path of a CSV file of second,rate rows replayed `speed` times faster."""
    given = text.strip()
    kind = given.partition(":")[0]
    if kind in _FORMS:
        return _parse_form(kind, given, text, base_rate)
    if not given:
        raise UsageError(f"-rate-profile is empty; give {_FORMS['ramp']}, step:.., burst:.. or a CSV file")
    return _read_replay(Path(text), speed)


def _parse_form(kind: str, given: str, text: str, base_rate: float) -> RateProfile:
    pattern = {"ramp": _RAMP, "step": _STEP, "burst": _BURST}[kind]
    match = pattern.fullmatch(given)

    def bad(problem: str) -> UsageError:
        return UsageError(f"-rate-profile '{describe_path(text)}' {problem}; give {_FORMS[kind]}")

    if not match:
        raise bad(f"is not a {kind} profile")
    numbers = [float(n) for group in match.groups() for n in group.split(",")]
    if not all(math.isfinite(n) for n in numbers):
        raise bad("has a number too large to be finite")
    *rates, seconds = numbers
    if kind == "burst":
        rate, burst_s, seconds = numbers
        if not (math.isfinite(base_rate) and base_rate >= 0):
            raise UsageError(f"-rate {base_rate:g} is not a base for a burst; give -rate 0 or more")
        if rate <= 0:
            raise bad("adds no messages")
        if burst_s <= 0 or seconds <= 0:
            raise bad("has a length of 0 s")
        if burst_s > seconds:
            raise bad(f"lasts {number_text(burst_s)} s, longer than its period")
        return Burst(base_rate, rate, burst_s, seconds)
    if seconds <= 0:
        raise bad("lasts 0 s")
    if not any(rates):
        raise bad("never offers a message")
    if kind == "ramp":
        return Ramp(rates[0], rates[1], seconds)
    return Steps(tuple(rates), seconds)


def _read_replay(path: Path, speed: float) -> Replay:
    """Read a recorded shape: at most MAX_PROFILE_BYTES, one-line errors naming the first bad line."""
    shown = describe_path(path)
    if not (math.isfinite(speed) and speed > 0):
        raise UsageError(f"{REPLAY_SPEED_FLAG} {speed:g} is not a speed; give a finite number > 0, e.g. 60")
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PROFILE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(
            f"-rate-profile '{shown}' is neither a form nor an existing CSV file;"
            f" give {_FORMS['ramp']}, step:A,B,C/Ts, burst:R*Ds/Ts or a file of second,rate rows"
        ) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read -rate-profile file {shown}: {reason}; {_CSV_FIX}") from None
    if len(data) > MAX_PROFILE_BYTES:
        raise UsageError(
            f"-rate-profile file {shown} is larger than {MAX_PROFILE_BYTES // 1_000_000} MB;"
            f" give a shorter recording (fewer rows) with {REPLAY_SPEED_FLAG} to compress it"
        )
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"-rate-profile file {shown} line {where} is not UTF-8 text; {_CSV_FIX}") from None
    points: list[tuple[float, float]] = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        problem, point = _csv_row(line, points[-1][0] if points else None)
        if problem and not points and number == 1 and _is_header(line):
            continue
        if point is None:
            raise UsageError(f"-rate-profile file {shown} line {number}: {problem}; {_CSV_FIX}")
        points.append(point)
    if not points:
        raise UsageError(f"-rate-profile file {shown} has no second,rate rows; {_CSV_FIX}")
    if not any(rate for _, rate in points):
        raise UsageError(f"-rate-profile file {shown} never offers a message (every rate is 0); {_CSV_FIX}")
    return Replay(tuple(points), speed)


def _is_header(line: str) -> bool:
    first = line.split(",")[0].strip().removesuffix("s")
    try:
        float(first)
    except ValueError:
        return True
    return False


def _csv_row(line: str, previous_s: float | None) -> tuple[str, tuple[float, float] | None]:
    """One row as (second, rate), or what is wrong with it."""
    fields = [part.strip() for part in line.split(",")]
    quoted = f"'{describe_path(line.strip()[:40])}'"
    if len(fields) != 2:
        return f"{quoted} is not second,rate", None
    try:
        second = float(fields[0].removesuffix("s"))
        rate = float(fields[1])
    except ValueError:
        return f"{quoted} is not two numbers second,rate", None
    if not (math.isfinite(second) and second >= 0):
        return f"second {fields[0]} is not a finite number >= 0", None
    if previous_s is not None and second <= previous_s:
        return f"second {fields[0]} does not come after {number_text(previous_s)}", None
    if not (math.isfinite(rate) and rate >= 0):
        return f"rate {fields[1]} is not a finite number >= 0", None
    return "", (second, rate)
