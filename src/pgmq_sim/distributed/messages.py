"""What master and worker processes say to each other, as Locust custom messages.

Master -> worker: the plan (settings, the SQL texts the master loaded, the DSN unless the worker
has its own, which workers to run, its producer sessions in a spread run), start, produce, stop.
Worker -> master: hello, ready, reports (counters every REPORT_S, HDR histograms every FULL_EVERY
reports and at the end; a spread run's enqueue figures), failed. Payloads are plain
dicts, as Locust's msgpack carries them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pgmq_sim.actors.worker import Assignment
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.stats import WorkerStats

HELLO = "pgmq_hello"
PLAN = "pgmq_plan"
READY = "pgmq_ready"
START = "pgmq_start"
REPORT = "pgmq_report"
STOP = "pgmq_stop"
CRASH = "pgmq_crash"  # a fault: these workers die mid-work
ALLOW = "pgmq_allow"  # only the first N workers of the run may claim (0: finish, claim nothing)
PRODUCE = "pgmq_produce"  # a spread run's producers start: the run clock's zero, as wall-clock time
FAILED = "pgmq_failed"

REPORT_S = 0.2
FULL_EVERY = 10  # histograms every 2 s: a killed process loses at most that much of its latencies
PROCESS_ENV = "PGMQ_SIM_PROCESS"  # set by the master on the worker processes it starts itself


@dataclass(frozen=True)
class Hello:
    host: str
    pid: int
    process: int | None  # the master's own local process number, else None
    own_dsn: str | None  # the worker's PGMQ_SIM_DSN, redacted, if it has one

    def as_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Hello:
        return cls(str(data["host"]), int(data["pid"]), data.get("process"), data.get("own_dsn"))


@dataclass(frozen=True)
class Plan:
    runner: str
    settings: dict[str, Any]  # Settings.as_json(): the DSN is never in it
    session: dict[str, Any]  # db.values.SessionPlan's fields: the claim SQL, modes, attempts
    dsn: str | None  # None when the worker uses its own PGMQ_SIM_DSN
    listen_dsn: str | None = None  # -listen-dsn, for LISTEN behind a transaction pooler
    workers: list[Assignment] = field(default_factory=list)
    logfile: str = "msg_queue.log"
    fire_requests: bool = False  # Locust request events, for the web UI
    producing: dict[str, Any] | None = None  # its producer sessions (distributed/producing), if any

    def as_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["workers"] = [asdict(a) for a in self.workers]
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Plan:
        fields = dict(data)
        fields["workers"] = [Assignment(**a) for a in data["workers"]]
        return cls(**fields)


def counters(stats: WorkerStats) -> dict[str, Any]:
    return {"name": stats.name, **stats.counters()}


def histograms(stats: WorkerStats) -> list[str]:
    return [histogram.encode() for histogram in stats.histograms()]


def apply_histograms(stats: WorkerStats, encoded: list[str]) -> None:
    stats.claim, stats.complete, stats.e2e = (LatencyHistogram.decode(text) for text in encoded)
