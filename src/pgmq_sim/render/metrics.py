"""-metrics-port [HOST:]PORT: the run's live figures for Prometheus, for as long as the run lasts.

An observer like the terminal's: it reads the workers' own counters and histograms when scraped (no
thread of its own beyond the client library's server), so the figures are the ones the summary
will print. In a --master run the master's figures include every worker process's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pgmq_sim.errors import UsageError
from pgmq_sim.result.histogram import LatencyHistogram
from pgmq_sim.result.observer import LiveFigures, RunObserver
from pgmq_sim.result.stats import WorkerCounters

# the buckets' edges, counted in ms as the histograms are and shown in seconds (Prometheus's base unit)
BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
EVERY_INTERFACE = "0.0.0.0"


class RunCollector(Collector):
    """Reads the live figures at each scrape."""

    def __init__(self, figures: LiveFigures) -> None:
        self._figures = figures

    def collect(self) -> Iterator[Any]:
        workers = list(self._figures.workers)
        totals = WorkerCounters.total(workers)
        produced = self._figures.produced()
        yield _counter("pgmq_sim_processed", "Messages processed (completed).", totals.processed)
        yield _counter("pgmq_sim_produced", "Messages the producer committed.", produced)
        yield _counter("pgmq_sim_empty_claims", "Claims that found nothing.", totals.empty_claims)
        yield _counter("pgmq_sim_connections_lost", "Worker connections lost.", totals.connections_lost)
        yield _gauge(
            "pgmq_sim_backlog", "Messages produced and not yet finished.", produced - totals.finished
        )
        dead = self._figures.dead_tuples()
        if dead is not None:
            yield _gauge("pgmq_sim_dead_tuples", "Dead tuples in msg_queue (last sample).", dead)
        busy = CounterMetricFamily(  # rate() of it is the worker's busy share
            "pgmq_sim_worker_busy_seconds", "Seconds each worker spent claiming, working and completing.",
            labels=["worker", "queue_type"],
        )  # fmt: skip
        for w in workers:
            busy.add_metric([w.name, w.queue_type], w.busy_s)
        yield busy
        for name, pick in (("e2e", lambda w: w.e2e), ("claim", lambda w: w.claim)):
            merged = LatencyHistogram.merged([pick(w) for w in workers])
            yield _histogram(f"pgmq_sim_{name}_latency_seconds", f"{name} latency in seconds.", merged)
        audit = self._figures.audit()
        if audit is not None:  # the live audit's closed windows so far
            for name, text, value in (
                ("checked", "Messages the live audit found completed or dead-lettered.", audit.checked),
                ("lost", "Messages the live audit found lost.", audit.lost),
                ("duplicated", "Duplicate completions the live audit found.", audit.duplicated),
                ("out_of_order", "Order violations the live audit found.", audit.out_of_order),
                ("windows_closed", "Windows the live audit closed.", audit.windows),
                ("windows_failed", "Windows whose audit failed.", audit.failed_windows),
            ):
                yield _counter(f"pgmq_sim_audit_{name}", text, value)
            yield _gauge("pgmq_sim_audit_watermark", "Every msg_id up to this one was judged.", audit.through)
        limit = self._figures.limit()
        if limit is not None:  # the last closed window's: 1 for its resource
            judged = GaugeMetricFamily(
                "pgmq_sim_window_limit", "The limit of the last closed window (-audit-window): 1 for it.",
                labels=["resource"],
            )  # fmt: skip
            judged.add_metric([limit.resource], 1)
            yield judged
            yield _gauge("pgmq_sim_window_limit_end_seconds", "When that window ended, on the run's clock.",
                         limit.to_s)  # fmt: skip
        phase = GaugeMetricFamily(
            "pgmq_sim_phase", "What the run does now (a sweep's step).", labels=["phase"]
        )
        phase.add_metric([self._figures.phase() or "running"], 1)
        yield phase
        steps = self._figures.sweep_steps()
        if steps:
            passed = GaugeMetricFamily(
                "pgmq_sim_sweep_step_passed", "Each finished sweep step: 1 passed, 0 failed.",
                labels=["step", "purpose", "setting"],
            )  # fmt: skip
            for step in steps:
                passed.add_metric(
                    [str(step.index + 1), step.purpose, f"{step.setting:g}"], float(step.verdict == "pass")
                )
            yield passed


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, text, value=value)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _histogram(name: str, text: str, histogram: LatencyHistogram) -> HistogramMetricFamily:
    counts, total_ms = histogram.cumulative_ms(BUCKETS_MS)
    buckets = [(floatToGoString(b / 1000), c) for b, c in zip(BUCKETS_MS, counts, strict=True)]
    buckets.append(("+Inf", histogram.count))
    return HistogramMetricFamily(name, text, buckets=buckets, sum_value=total_ms / 1000)


class MetricsObserver:
    """Serves the metrics from the start of the workers to the end of the run; passes every call on
    to the observer it wraps (the terminal's)."""

    def __init__(self, host: str | None, port: int, inner: RunObserver) -> None:
        self._inner = inner
        self._registry = CollectorRegistry()
        self._collector: RunCollector | None = None
        addr = host if host is not None else EVERY_INTERFACE
        shown = f"[{addr}]" if ":" in addr else addr
        try:
            self._server, self._thread = start_http_server(port, addr=addr, registry=self._registry)
        except OSError as exc:
            given = f"{shown}:{port}" if host is not None else str(port)
            raise UsageError(
                f"-metrics-port {given}: cannot listen ({exc.strerror or exc});"
                " give a free port, on an address of this host"
            ) from None
        self.port = self._server.server_port
        self.url = f"http://{shown}:{self.port}/metrics"

    def say(self, line: str) -> None:
        self._inner.say(line)

    def watching(self, figures: LiveFigures) -> None:
        if self._collector is not None:
            self._registry.unregister(self._collector)  # a -compare cell after another
        self._collector = RunCollector(figures)
        self._registry.register(self._collector)
        self._inner.watching(figures)

    def tick(self) -> None:
        self._inner.tick()

    def stopped_watching(self) -> None:
        self._inner.stopped_watching()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=2)
