"""Thresholds on what a run reports (`-check e2e-p99<250,lost==0`): what a CI gates on.

A check names a figure, a comparison and a bound, in the units the report prints. A figure the run
cannot produce (a knee without a sweep, a bystander's p99 without one) is refused before the run;
one it could have produced but did not (the server's statistics unreadable) fails its check, never
passes it silently.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from pgmq_sim.errors import UsageError
from pgmq_sim.model.checks import CHECK_FORMS, CHECK_PATTERN, Check
from pgmq_sim.result.audit import LiveAudit
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.stats import WorkerCounters
from pgmq_sim.settings import DRIFT_MIN_S, Settings
from pgmq_sim.verdicts.drift import DriftReport, unjudged
from pgmq_sim.verdicts.knee import max_sustainable_per_s

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class CheckResult:
    """What a -check threshold came to: the value measured, and whether it held."""

    check: Check
    value: float | None  # None: not measured in this run
    passed: bool | None  # None: not judged (the verdict it mirrors calls the figure noise), not breached
    not_judged: str | None = None  # why, as the verdict says it

    def as_json(self) -> dict[str, object]:
        return {
            "check": str(self.check),
            "figure": self.check.figure,
            "value": self.value,
            "bound": self.check.bound,
            "unit": self.check.unit,
            "passed": self.passed,
            "not_judged": self.not_judged,
        }


class LiveReadings(NamedTuple):
    """What a live check reads: the workers' counters, and the live audit so far (None: it does
    not run)."""

    counters: WorkerCounters
    audit: LiveAudit | None


def _live_audit(attribute: str) -> Callable[[LiveReadings], float | None]:
    return lambda live: None if live.audit is None else float(getattr(live.audit, attribute))


class Judged(NamedTuple):
    """What a check reads: the result, and the drift judged on it (None: not judged)."""

    result: RunResult
    drift: DriftReport | None


@dataclass(frozen=True)
class Figure:
    unit: str
    read: Callable[[Judged], float | None]
    needs: Callable[[Settings], str | None] = lambda _s: None  # why the run cannot produce it
    # known while the run goes on, from the workers' counters or the live audit's closed windows
    # (None: not yet), and can only get worse: -check-abort acts on it
    live: Callable[[LiveReadings], float | None] | None = None
    live_when: Callable[[Settings], bool] = lambda _s: True  # whether this run reads it live
    # why the verdict this figure mirrors would not judge it (a trend in noise): the check is then
    # not judged either, and does not fail the run
    unjudged: Callable[[Judged], str | None] = lambda _j: None


def _measured(read: Callable[[RunResult], float | None]) -> Callable[[Judged], float | None]:
    """A figure read from the result itself."""
    return lambda judged: read(judged.result)


def _latency(kind: str, pct: str) -> Callable[[Judged], float | None]:
    return _measured(lambda r: getattr(r, f"{kind}_ms").get(pct))


def _per_msg(value: float | None, r: RunResult) -> float | None:
    return None if value is None or r.processed <= 0 else value / r.processed


def _server(attribute: str) -> Callable[[Judged], float | None]:
    return _measured(lambda r: None if r.server_cost is None else getattr(r.server_cost, attribute))


def _audit(attribute: str) -> Callable[[Judged], float | None]:
    return _measured(lambda r: None if r.audit is None else float(getattr(r.audit, attribute)))


def _drift(figure: str) -> Callable[[Judged], float | None]:
    def read(judged: Judged) -> float | None:
        trend = None if judged.drift is None else judged.drift.trend(figure)
        return None if trend is None else trend.share_per_hour * 100

    return read


def _drift_unjudged(figure: str) -> Callable[[Judged], str | None]:
    return lambda judged: None if judged.drift is None else unjudged(judged.drift, figure)


def _needs_drift(s: Settings) -> str | None:
    if s.sweep is not None or s.rate_profile is not None:
        return "a run at one setting (no -sweep, no -rate-profile)"
    return None if s.drift or (s.duration or 0) >= DRIFT_MIN_S else "-duration 600 or more, or -drift"


def _needs_sweep(s: Settings) -> str | None:
    return None if s.sweep is not None and s.sweep.kind == "rate" else "a rate sweep (-sweep rate=...)"


def _needs_bystander(s: Settings) -> str | None:
    return None if s.bystander is not None else "-bystander RATE"


def _live_asked(s: Settings) -> bool:
    return s.live_audit_asked


def _needs_audit(s: Settings) -> str | None:
    return None if s.audit else "the audit (drop -no-audit)"


FIGURES: dict[str, Figure] = {
    **{
        f"{kind}-{pct}": Figure("ms", _latency(kind, pct))
        for kind in ("e2e", "claim", "complete")
        for pct in ("p50", "p95", "p99", "max")
    },
    "throughput": Figure("msg/s", _measured(lambda r: r.throughput_per_s)),
    "knee": Figure(
        "msg/s",
        _measured(lambda r: None if r.sweep is None else max_sustainable_per_s(r.sweep)),
        _needs_sweep,
    ),
    "wal-per-msg": Figure("B", _server("wal_bytes_per_msg")),
    "commits-per-msg": Figure("", _server("commits_per_msg")),
    "server-cpu-per-msg": Figure("us", _server("cpu_us_per_msg")),
    "client-cpu-per-msg": Figure("us", _measured(lambda r: r.client.cpu_us_per_msg)),
    "empty-per-msg": Figure("", _measured(lambda r: _per_msg(r.empty_claims, r))),
    "dead-tuples": Figure("", _measured(lambda r: None if r.health is None else float(r.health.dead_tuples))),
    "lost": Figure(
        "",
        _measured(lambda r: float(r.connections_lost)),
        live=lambda live: float(live.counters.connections_lost),
    ),
    "duplicates": Figure(
        "", _audit("duplicates"), _needs_audit, live=_live_audit("duplicated"), live_when=_live_asked
    ),
    "missing": Figure("", _audit("missing"), _needs_audit, live=_live_audit("lost"), live_when=_live_asked),
    "bystander-p99": Figure(
        "ms",
        _measured(lambda r: None if r.bystander is None else r.bystander.beside_ms.get("p99")),
        _needs_bystander,
    ),
    **{
        f"{name}-drift": Figure("%/h", _drift(figure), _needs_drift, unjudged=_drift_unjudged(figure))
        for name, figure in (("p99", "e2e_p99"), ("throughput", "throughput"), ("table", "table"))
    },
}


def parse_checks(text: str) -> tuple[Check, ...]:
    """-check EXPR[,EXPR...]; an unknown figure or a malformed one is a usage error."""
    checks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = re.fullmatch(CHECK_PATTERN, part)
        if match is None:
            raise UsageError(f"-check '{part}' is not a check; {CHECK_FORMS}")
        figure, op, bound = match.group(1), match.group(2), float(match.group(3))
        if figure not in FIGURES:
            known = ", ".join(FIGURES)
            raise UsageError(f"-check '{part}': no figure '{figure}'; the figures are {known}")
        checks.append(Check(figure, op, bound, FIGURES[figure].unit))
    if not checks:
        raise UsageError(f"-check '{text}' names no check; {CHECK_FORMS}")
    return tuple(checks)


def refuse_unproduced(checks: tuple[Check, ...], settings: Settings) -> None:
    """A check on a figure this run cannot produce would pass or fail for nothing: refuse it."""
    for check in checks:
        missing = FIGURES[check.figure].needs(settings)
        if missing is not None:
            raise UsageError(f"-check {check}: this run produces no {check.figure}; it needs {missing}")


def evaluate(
    checks: tuple[Check, ...], result: RunResult, drift: DriftReport | None
) -> tuple[CheckResult, ...]:
    """Each check judged as the verdict it mirrors judges its figure (`drift`: the run's, judged on
    it): one the verdict would not judge (a drift's trend in noise) is not judged, neither passed nor
    breached."""
    judged = Judged(result, drift)
    out = []
    for check in checks:
        figure = FIGURES[check.figure]
        value = figure.read(judged)
        shown = None if value is None else round(value, 4)
        why = figure.unjudged(judged)
        if why is not None:
            out.append(CheckResult(check, shown, None, why))
            continue
        passed = value is not None and not math.isnan(value) and OPERATORS[check.op](value, check.bound)
        out.append(CheckResult(check, shown, passed))
    return tuple(out)


def refuse_unwatchable(checks: tuple[Check, ...], settings: Settings) -> None:
    """-check-abort acts only on a figure known while the run goes on."""

    def watched(f: Figure) -> bool:
        return f.live is not None and f.live_when(settings)

    if settings.check_abort and not any(watched(FIGURES[c.figure]) for c in checks):
        live = ", ".join(name for name, f in FIGURES.items() if watched(f))
        raise UsageError(
            f"-check-abort acts on -check {live} (known while the run goes on);"
            " add -check lost==0, or drop -check-abort"
        )


def breached(checks: tuple[CheckResult, ...]) -> tuple[CheckResult, ...]:
    return tuple(c for c in checks if c.passed is False)  # not judged: no breach


def live_breach(checks: tuple[Check, ...], readings: LiveReadings) -> Check | None:
    """The first check on a live figure that the workers' counters, or the live audit's closed
    windows, already breach (-check-abort)."""
    for check in checks:
        live = FIGURES[check.figure].live
        value = live(readings) if live is not None else None
        if value is not None and not OPERATORS[check.op](value, check.bound):
            return check
    return None
