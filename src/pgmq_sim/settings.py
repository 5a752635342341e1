"""The run's settings: what the user asked for, validated once, then frozen."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgmq_sim.errors import UsageError

QUEUE_TYPES = ("type1", "type2", "type3")
INT4_MAX = 2**31 - 1  # msg_id and order_id are the seed's integer columns
MAX_WORKERS = 10_000
MAX_ATTEMPTS = 60  # the backoff doubles per attempt: 2^60 x BASE is already forever
WAKEUPS = ("poll", "notify")
TX_MODES = ("single", "split")


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
class Settings:
    dsn: str | None
    delmsg: bool
    fill_db: int
    logfile: str
    rate: float
    schema: Path | None
    next_msg: Path | None
    workers: int
    work: WorkTime
    orders: int
    poll_interval: float
    claim: str = "seed"
    wakeup: str = "poll"
    audit: bool = True
    stall_timeout: float = 30.0
    json_path: Path | None = None
    plot_path: Path | None = None
    seed: int | None = None
    progress: str = "auto"
    reconnect_timeout: float = 60.0
    replace_tables: bool = False
    tx: str = "single"
    lease: float = 30.0
    fail_rate: float = 0.0
    max_attempts: int = 5
    backoff_ms: float = 100.0
    chaos: str | None = None
    chaos_allow_restart: bool = False

    def __post_init__(self) -> None:
        for flag, value in (
            ("-rate", self.rate),
            ("-poll-interval", self.poll_interval),
            ("-stall-timeout", self.stall_timeout),
            ("-reconnect-timeout", self.reconnect_timeout),
            ("-lease", self.lease),
            ("-fail-rate", self.fail_rate),
            ("-backoff-ms", self.backoff_ms),
        ):
            if not math.isfinite(value):
                raise UsageError(f"{flag} {value} is not a finite number of seconds or messages")
        if not 0 < self.fill_db <= INT4_MAX:
            raise UsageError(
                f"-fill-db {self.fill_db} must be between 1 and {INT4_MAX} (msg_id is an integer column)"
            )
        if self.workers > MAX_WORKERS:
            raise UsageError(f"-workers {self.workers} is more than {MAX_WORKERS}; use fewer workers")
        if self.workers < len(QUEUE_TYPES):
            raise UsageError(
                f"-workers {self.workers} leaves a message type without a worker;"
                f" use at least {len(QUEUE_TYPES)} (one per type)"
            )
        if self.rate < 0:
            raise UsageError(f"-rate {self.rate:g} is negative; give 0 to prefill or a rate > 0")
        if not 0 < self.orders <= INT4_MAX:
            raise UsageError(
                f"-orders {self.orders} must be between 1 and {INT4_MAX} (order_id is an integer)"
            )
        if self.reconnect_timeout < 0:
            raise UsageError(f"-reconnect-timeout {self.reconnect_timeout:g} must be >= 0 seconds")
        if self.poll_interval < 0:
            raise UsageError(f"-poll-interval {self.poll_interval:g} must be >= 0 seconds")
        longest_wait = max(self.poll_interval, self.work.max_ms / 1000)
        if self.stall_timeout <= longest_wait:
            raise UsageError(
                f"-stall-timeout {self.stall_timeout:g} s would call a run stalled while a worker"
                f" polls or works ({longest_wait:g} s); give more than that"
            )
        if self.tx not in TX_MODES:
            raise UsageError(f"unknown -tx '{self.tx}'; use one of: {', '.join(TX_MODES)}")
        if self.lease <= 0:
            raise UsageError(f"-lease {self.lease:g} must be a positive number of seconds")
        if not 0 <= self.fail_rate < 1:
            raise UsageError(f"-fail-rate {self.fail_rate:g} must be a fraction in [0, 1)")
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise UsageError(f"-max-attempts {self.max_attempts} must be between 1 and {MAX_ATTEMPTS}")
        if self.backoff_ms < 0:
            raise UsageError(f"-backoff-ms {self.backoff_ms:g} must be >= 0")
        if self.fail_rate and self.longest_backoff_s >= self.stall_timeout:
            raise UsageError(
                f"-stall-timeout {self.stall_timeout:g} s would call a run stalled while a failed message"
                f" waits {self.longest_backoff_s:g} s for its last attempt (-backoff-ms {self.backoff_ms:g} x"
                f" 2^{self.max_attempts - 2}); give a longer -stall-timeout or a smaller -backoff-ms"
            )
        if self.wakeup not in WAKEUPS:
            raise UsageError(f"unknown -wakeup '{self.wakeup}'; use one of: {', '.join(WAKEUPS)}")

    @property
    def retrying(self) -> bool:
        """Leases or retries: the queue gets its attempt columns and claims their split form."""
        return self.tx == "split" or self.fail_rate > 0

    @property
    def longest_backoff_s(self) -> float:
        """The wait before the last attempt: BASE x 2^(attempt-1), attempt = max_attempts - 1."""
        return self.backoff_ms * 2 ** max(0, self.max_attempts - 2) / 1000

    def worker_type(self, index: int) -> str:
        """Workers are dealt round-robin over the types, so each type gets one."""
        return QUEUE_TYPES[index % len(QUEUE_TYPES)]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["dsn"] = None if self.dsn is None else "(given)"
        data["work_ms"] = str(self.work)
        del data["work"]
        for key in ("schema", "next_msg", "json_path", "plot_path"):
            data[key] = None if data[key] is None else str(data[key])
        return data
