"""The run's settings: what the user asked for, validated once, then frozen."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pgmq_sim.errors import UsageError
from pgmq_sim.model.checks import Check
from pgmq_sim.model.extras import Delay, PriorityRange
from pgmq_sim.model.kinds import PoolerMode, ProgressMode, SessionMode, TxMode, WakeupMode
from pgmq_sim.model.pressure import EXAMPLE, PhaseSpec, phase_profile
from pgmq_sim.model.profile_flag import parse_rate_profile
from pgmq_sim.model.profiles import ConstantRate, RateProfile
from pgmq_sim.model.skew import INT4_MAX, KeySkew
from pgmq_sim.model.sweep import SweepSpec


def queue_types(count: int) -> tuple[str, ...]:
    """The types of -types COUNT: type1..typeCOUNT."""
    return tuple(f"type{i}" for i in range(1, count + 1))


DEFAULT_STEP_S = 10.0
DRIFT_MIN_S = 600.0  # a run this long or longer judges its drift by minutes
SHORT_DRIFT_S = 60.0  # -drift on a shorter run: at least this long, judged by tenths
POLLS_PER_STEP = 3  # an adaptive sweep's step spans at least this many poll intervals
DEFAULT_RESOLUTION_PCT = 5.0
DEFAULT_SUITE_PHASE_S = 60.0


def runs_by_time(
    sweep: SweepSpec | None, rate_profile: str | None, duration: float | None, rate: float
) -> bool:
    """A run that needs no -fill-db: a sweep, a rate profile, or -duration with -rate."""
    return sweep is not None or rate_profile is not None or bool(duration and rate)


QUEUE_TYPES = queue_types(3)  # the seed's, and -types 3
MAX_TYPES = 1000  # queue_type is varchar(10): type1000 fits
MAX_PAYLOAD_BYTES = 10_000_000
MAX_BATCH = 1000
MAX_WORKERS = 10_000
MAX_PRODUCERS = 1000
MAX_ATTEMPTS = 60  # the backoff doubles per attempt: 2^60 x BASE is already forever


MAX_SAMPLE_HZ = 100  # pg_stat_activity read more often costs the server more than it says


def parse_listen_address(text: str, flag: str) -> tuple[str | None, int]:
    """[HOST:]PORT, an IPv6 host in brackets; None: every interface. Port 0: any free port."""
    match = re.fullmatch(r"(?:(\[[^\]]+\]|[^:\[\]\s]+):)?(\d+)", text.strip())
    port = int(match.group(2)) if match else -1
    if match is None or port > 65535:
        raise UsageError(
            f"{flag} '{text}' is not [HOST:]PORT; give a port (9100, 0 for any free one) or an address"
            " and a port (127.0.0.1:9100, [::1]:9100)"
        )
    host = match.group(1)
    return (host.strip("[]") if host else None), port


@dataclass(frozen=True)
class WorkTime:
    """Simulated work per message, uniform in [min_ms, max_ms]."""

    min_ms: float
    max_ms: float

    @property
    def mean_ms(self) -> float:
        return (self.min_ms + self.max_ms) / 2

    @classmethod
    def parse(cls, text: str) -> WorkTime:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?)\s*)?", text)
        if not match:
            raise UsageError(
                f"-work-ms '{text}' is not a range; give MIN-MAX in milliseconds, e.g. 1-10 or 0"
            )
        low = float(match.group(1))
        high = float(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise UsageError(f"-work-ms '{text}' has MAX below MIN; give MIN-MAX with MIN <= MAX")
        return cls(low, high)

    def __str__(self) -> str:
        return f"{self.min_ms:g}-{self.max_ms:g}"


@dataclass(frozen=True)
class Payload:
    """Bytes of random (incompressible) payload per message, uniform in [min_bytes, max_bytes]."""

    min_bytes: int
    max_bytes: int

    @classmethod
    def parse(cls, text: str) -> Payload | None:
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
        if not match:
            raise UsageError(
                f"-payload-bytes '{text}' is not a size; give N or MIN-MAX bytes, e.g. 4096 or 100-8000"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low or high > MAX_PAYLOAD_BYTES:
            raise UsageError(
                f"-payload-bytes '{text}' must be MIN-MAX with MIN <= MAX <= {MAX_PAYLOAD_BYTES}"
            )
        return None if high == 0 else cls(low, high)

    def __str__(self) -> str:
        return (
            str(self.min_bytes) if self.min_bytes == self.max_bytes else f"{self.min_bytes}-{self.max_bytes}"
        )


@dataclass(frozen=True)
class Settings:
    """What the user asked for, checked: every field is filled from its option (cli/options_*, which
    hold each one's default, choices, range and parser: cli/plan builds these from them)."""

    dsn: str | None
    delmsg: bool
    fill_db: int | None  # None: no count, only with -duration and -rate
    logfile: str
    rate: float
    schema: Path | None
    next_msg: Path | None
    workers: int
    work: WorkTime
    orders: int
    poll_interval: float
    claim: str  # the queue design: a built-in's name (-claim, -queue) or a folder (-queue)
    batch: int  # messages one claim may take (-batch)
    priority: PriorityRange | None  # -priority MIN-MAX: a uniform priority per message
    delay: Delay | None  # -delay SHARE:MIN-MAX: that share of messages due later
    archive: bool  # complete by the design's complete_archive.sql (move to its archive)
    wakeup: WakeupMode
    audit: bool
    audit_window: float  # the live audit's windows, seconds apart (0: the audit at the end alone)
    account_live_from: int  # journal rows past which the latency account is kept as the run goes
    compact_journal: bool  # closed windows' journal rows deleted once judged and accounted
    stall_timeout: float
    json_path: Path | None
    plot_path: Path | None
    seed: int | None
    progress: ProgressMode
    reconnect_timeout: float
    replace_tables: bool
    tx: TxMode
    lease: float
    fail_rate: float
    max_attempts: int
    backoff_ms: float
    chaos: str | None
    chaos_allow_restart: bool
    duration: float | None
    pooler: PoolerMode
    listen_dsn: str | None  # -wakeup notify's LISTEN, on a direct connection
    pooler_admin: str | None  # the pooler's admin console: its view, and its faults
    wait_sample_hz: float  # pg_stat_activity samples per second for the wait profile (0: none)
    types: int
    key_skew: KeySkew
    payload: Payload | None
    rate_profile: str | None  # as given; parsed once into `profile`
    speed: float  # a replayed rate profile's time compression
    sweep: SweepSpec | None
    phases: tuple[PhaseSpec, ...]  # a run in phases (-phase, [[phase]])
    suite: str | None  # -suite pressure: a cell per pressure
    suite_phase_s: float | None  # -phase S with -suite: each phase's length (None: not given)
    step_s: float | None  # None: DEFAULT_STEP_S (given without -sweep, refused)
    settle_s: float | None  # None: as long as a step
    slo_p99_ms: float | None
    slo_enqueue_p99_ms: float | None  # -slo enqueue-p99=MS: each step's enqueues, due time to commit
    resolution_pct: float | None  # an adaptive sweep's; None: DEFAULT_RESOLUTION_PCT
    repeat: int | None  # runs of each bisection step; None: 1
    sweep_budget_s: float | None  # the whole search's bound
    bystander: float | None  # transactions per second of a neighbour workload
    checks: tuple[Check, ...]  # -check: thresholds the run's figures must meet
    junit_path: Path | None
    drift: bool  # judge the drift of a run shorter than ten minutes (at least a minute)
    check_abort: bool  # end the run at the first breach of a check that can only get worse
    metrics_port: int | None  # serve live metrics for Prometheus
    metrics_host: str | None  # ... on this address only; None: every interface
    baseline_path: Path | None  # diff the run against this run's JSON
    report_path: Path | None  # -report: the HTML page of the run
    verbose: bool  # -v: the summary shows every row, not the answer alone
    producers: int  # enqueue sessions while the workers run
    enqueue_batch: int  # messages one enqueue transaction may carry (1: each its own)
    profile: RateProfile | None = field(default=None, init=False, compare=False, repr=False)  # read once

    def __post_init__(self) -> None:
        if self.rate_profile is not None:  # read once, here: the producer follows it
            object.__setattr__(self, "profile", parse_rate_profile(self.rate_profile, self.rate, self.speed))
        if self.phases:
            _check_phases(self)
            speed = self.speed
            profile = phase_profile(
                self.phases, self.rate, lambda text, base: parse_rate_profile(text, base, speed)
            )
            object.__setattr__(self, "profile", profile)
        _check_values(self)

    def check_sweep_wakeup(self) -> None:
        """Once the run's wake-up is known (a -compare cell sets its own)."""
        sweep = self.sweep
        if (
            sweep is not None
            and sweep.adaptive
            and self.wakeup == WakeupMode.POLL
            and self.sweep_step_s < POLLS_PER_STEP * self.poll_interval
        ):
            raise UsageError(
                f"-sweep {sweep} with -wakeup poll needs steps of at least {POLLS_PER_STEP} poll intervals"
                f" (-step {POLLS_PER_STEP * self.poll_interval:g}): idle workers wake once per"
                " -poll-interval, and a shorter step cannot tell a queue that keeps up from one that does"
                " not; or use -wakeup notify"
            )

    @property
    def sweep_step_s(self) -> float:
        return self.step_s if self.step_s is not None else DEFAULT_STEP_S

    @property
    def sweep_settle_s(self) -> float:
        return self.settle_s if self.settle_s is not None else self.sweep_step_s

    @property
    def sweep_resolution(self) -> float:
        """As a fraction."""
        return (self.resolution_pct if self.resolution_pct is not None else DEFAULT_RESOLUTION_PCT) / 100

    @property
    def message_cap(self) -> int:
        """Messages the producer may write: -fill-db, or as many as msg_id holds in a timed run."""
        return self.fill_db if self.fill_db is not None else INT4_MAX

    @property
    def live_audit_asked(self) -> bool:
        """The audit judged in windows as the run goes (engine/judging.judged_live says where it can)."""
        return self.audit and self.audit_window > 0

    @property
    def retrying(self) -> bool:
        """Leases or retries: the queue gets its attempt columns and claims their split form."""
        return self.tx == TxMode.SPLIT or self.fail_rate > 0

    @property
    def session_mode(self) -> SessionMode:
        if self.tx == TxMode.SPLIT:
            return SessionMode.SPLIT
        return SessionMode.SINGLE if self.fail_rate else SessionMode.BASIC

    @property
    def longest_backoff_s(self) -> float:
        """The wait before the last attempt: BASE x 2^(attempt-1), attempt = max_attempts - 1."""
        return self.backoff_ms * 2 ** max(0, self.max_attempts - 2) / 1000

    @property
    def queue_types(self) -> tuple[str, ...]:
        return queue_types(self.types)

    @property
    def suite_seconds(self) -> float:
        """-suite: each phase's length."""
        return self.suite_phase_s or DEFAULT_SUITE_PHASE_S

    @property
    def paced(self) -> bool:
        """Messages arrive while the workers run (at -rate or a -rate-profile), not prefilled."""
        return bool(self.rate or self.rate_profile or self.sweep or self.phases)

    @property
    def rate_schedule(self) -> RateProfile:
        """How many messages are due by each moment of a paced run."""
        return self.profile if self.profile is not None else ConstantRate(self.rate)

    def worker_type(self, index: int) -> str:
        """Workers are dealt round-robin over the types, so each type gets one."""
        return f"type{index % self.types + 1}"

    def groups_cap(self) -> str | None:
        """Where an ordered queue's workload leaves workers idle whatever the queue does: a group
        takes one worker at a time, and a type's workers work only its -orders groups."""
        dealt = [len(range(t, self.workers, self.types)) for t in range(self.types)]
        busy = sum(min(count, self.orders) for count in dealt)
        if busy >= self.workers:
            return None
        return (
            f"the workload caps the run: {self.types * self.orders} groups ({self.types} types x"
            f" {self.orders} orders) for {self.workers} workers, and a group takes one worker at a time:"
            f" at most {busy} work at once; give -orders {max(dealt)} or more, or -workers {busy}"
        )

    def as_json(self) -> dict[str, Any]:
        data = {
            key: str(value) if isinstance(value, StrEnum) else value for key, value in asdict(self).items()
        }
        data["dsn"] = None if self.dsn is None else "(given)"
        data["listen_dsn"] = None if self.listen_dsn is None else "(given)"
        data["pooler_admin"] = None if self.pooler_admin is None else "(given)"
        data["work_ms"] = str(self.work)
        del data["work"]
        del data["profile"]
        data["key_skew"] = str(self.key_skew)
        data["payload_bytes"] = str(self.payload) if self.payload else None
        data["priority"] = str(self.priority) if self.priority else None
        data["delay"] = str(self.delay) if self.delay else None
        del data["payload"]
        data["sweep"] = str(self.sweep) if self.sweep else None
        data["phases"] = [p.as_table() for p in self.phases]
        data["checks"] = [str(c) for c in self.checks]
        for key, value in data.items():
            if isinstance(value, Path):
                data[key] = str(value)
        return data


def _check_values(s: Settings) -> None:
    """The combinations a run can keep, one line each (each value's own range is its option's:
    cli/options)."""
    if s.suite_phase_s is not None and s.suite is None:
        raise UsageError(
            f"-phase {s.suite_phase_s:g} (seconds) goes with -suite pressure; a run in phases gives each:"
            f" {EXAMPLE}"
        )
    if s.suite is not None and not s.rate:  # -rate's default is 0: none
        raise UsageError("-suite pressure runs each phase at -rate R; give -rate (e.g. -rate 200)")
    if s.suite_phase_s is not None and s.suite_phase_s <= 0:
        raise UsageError(f"-phase {s.suite_phase_s:g}: give each phase's seconds, above 0")
    if s.suite is not None and not s.phases:
        _refuse_timing(s, "-suite pressure sets each cell's time and rate (-phase S, -rate R)")
    if s.fill_db is None and not (
        s.phases or s.suite or runs_by_time(s.sweep, s.rate_profile, s.duration, s.rate)
    ):
        raise UsageError("a run needs -fill-db N, or -duration S with -rate R to run by time alone")
    if s.workers < s.types:
        raise UsageError(
            f"-workers {s.workers} leaves a message type without a worker;"
            f" use at least {s.types} (one per type)"
        )
    if s.sweep is not None:  # the options only a sweep reads are refused without one: cli/options_load
        _check_sweep(s, s.sweep)
    _check_gating(s)
    profile = s.profile
    if profile is not None and s.duration is None and s.fill_db is None and profile.end_s is None:
        raise UsageError(
            f"-rate-profile {profile.describe()} goes on forever; give -fill-db N or -duration S"
        )
    longest_wait = max(s.poll_interval, s.work.max_ms / 1000)
    if s.stall_timeout <= longest_wait:
        raise UsageError(
            f"-stall-timeout {s.stall_timeout:g} s would call a run stalled while a worker"
            f" polls or works ({longest_wait:g} s); give more than that"
        )
    if s.delay is not None and s.delay.max_s >= s.stall_timeout:
        raise UsageError(
            f"-stall-timeout {s.stall_timeout:g} s would call a run stalled while a delayed message"
            f" waits up to {s.delay.max_s:g} s (-delay {s.delay}); give a longer -stall-timeout"
        )
    if (s.producers > 1 or s.enqueue_batch > 1) and not s.paced:
        flag = "-producers" if s.producers > 1 else "-enqueue-batch"
        raise UsageError(
            f"{flag} shapes the enqueues made while the workers run; a prefill is one COPY: give -rate R"
        )
    if s.producers > 1 and s.delmsg and not s.audit:
        raise UsageError(
            f"-producers {s.producers} with -delmsg and -no-audit: no row would say whether an enqueue whose"
            " commit answer was lost landed (several sessions commit out of order); keep the audit, or"
            " use one producer"
        )
    if s.batch > 1 and s.fail_rate and s.tx == TxMode.SINGLE:
        raise UsageError(
            f"-batch {s.batch} with -fail-rate in one transaction: recording a failed message would"
            " commit its batch's claims unfinished; add -tx split (each message completes on its own)"
        )
    if s.fail_rate and s.longest_backoff_s >= s.stall_timeout:
        raise UsageError(
            f"-stall-timeout {s.stall_timeout:g} s would call a run stalled while a failed message"
            f" waits {s.longest_backoff_s:g} s for its last attempt (-backoff-ms {s.backoff_ms:g} x"
            f" 2^{s.max_attempts - 2}); give a longer -stall-timeout or a smaller -backoff-ms"
        )


def _refuse_timing(s: Settings, why: str) -> None:
    """A run whose phases set its time and rates takes no other."""
    for value, flag in ((s.sweep, "-sweep"), (s.duration, "-duration"), (s.rate_profile, "-rate-profile")):
        if value is not None:
            raise UsageError(f"{why}; drop {flag}")


def _check_phases(s: Settings) -> None:
    _refuse_timing(s, "-phase sets the run's time and rates phase by phase")
    first = s.phases[0]
    if first.rate is None and first.rate_profile is None and not s.rate:
        raise UsageError(f"phase {first.name} has no rate: give it rate = R, or give -rate R")
    locked = [p for p in s.phases if p.pressure is not None and p.pressure.name == "lock-table"]
    if locked and max(p.duration_s for p in locked) >= s.stall_timeout:
        raise UsageError(
            f"-phase: a lock-table phase of {max(p.duration_s for p in locked):g} s stops every claim for"
            f" longer than -stall-timeout {s.stall_timeout:g} s; give a longer -stall-timeout"
        )


def _check_sweep(s: Settings, sweep: SweepSpec) -> None:
    if not sweep.adaptive:
        for flag, value in (
            ("-resolution", s.resolution_pct),
            ("-repeat", s.repeat),
            ("-sweep-budget", s.sweep_budget_s),
        ):
            if value is not None:
                raise UsageError(f"{flag} goes with an adaptive sweep; use -sweep rate=auto or rate=A..B")
    if s.duration is not None or s.rate_profile is not None:
        raise UsageError("-sweep sets its own time and rates; drop -duration and -rate-profile")
    if sweep.kind == "rate" and s.rate:
        raise UsageError("-sweep rate=... sets the rate of each step; drop -rate")
    if sweep.kind == "workers" and not sweep.adaptive:
        if min(sweep.values) < s.types:
            raise UsageError(
                f"-sweep {sweep}: a step with fewer than {s.types} workers leaves a type without one"
            )
        if s.workers < max(sweep.values):
            raise UsageError(
                f"-sweep {sweep} needs -workers {max(sweep.values):g} or more (the largest step)"
            )


def _check_gating(s: Settings) -> None:
    if s.drift:
        if s.sweep is not None or s.rate_profile is not None:
            raise UsageError(
                "-drift judges a run at one setting; a sweep or a rate profile changes it on purpose"
            )
        if s.duration is not None and s.duration < SHORT_DRIFT_S:
            raise UsageError(
                f"-drift needs a run of at least {SHORT_DRIFT_S:.0f} s; give -duration 60 or more"
            )
