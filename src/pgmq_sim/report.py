"""The run's result and how it is shown: a summary table, JSON and a picture."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pgmq_sim.audit import AuditVerdict
from pgmq_sim.diagnose import TableHealth
from pgmq_sim.errors import UsageError
from pgmq_sim.settings import Settings
from pgmq_sim.stats import SecondSample


@dataclass(frozen=True)
class WorkerResult:
    name: str
    queue_type: str
    processed: int
    empty_claims: int
    busy_share: float


@dataclass(frozen=True)
class RunResult:
    settings: Settings
    server: str
    strategy: str
    ordered: bool
    target: int
    produced: int
    processed: int
    elapsed_s: float
    outcome: str  # completed | interrupted | stalled
    per_type: dict[str, int]
    e2e_ms: dict[str, float | None]
    claim_ms: dict[str, float | None]
    complete_ms: dict[str, float | None]
    empty_claims: int
    workers: tuple[WorkerResult, ...]
    groups_per_type: dict[str, int]
    work_mean_ms: float
    timeline: tuple[SecondSample, ...]
    health: TableHealth | None
    audit: AuditVerdict | None
    stall_causes: tuple[str, ...] = ()

    @property
    def throughput_per_s(self) -> float:
        return self.processed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def groups(self) -> int:
        return sum(self.groups_per_type.values())

    @property
    def ordering_bound_per_s(self) -> float | None:
        """G groups, each at most one message per mean work time."""
        if not self.ordered or self.settings.work.mean_ms <= 0:  # no work: no bound to speak of
            return None
        return self.groups / (self.work_mean_ms / 1000)

    @property
    def worker_bound_per_s(self) -> float | None:
        """The ordering bound with these workers: a type's groups advance at most as many at a
        time as the type has workers."""
        if not self.ordered or self.settings.work.mean_ms <= 0:
            return None
        busy = sum(
            min(groups, sum(1 for w in self.workers if w.queue_type == queue_type))
            for queue_type, groups in self.groups_per_type.items()
        )
        return busy / (self.work_mean_ms / 1000)

    @property
    def bound_share(self) -> float | None:
        bound = self.ordering_bound_per_s
        return self.throughput_per_s / bound if bound else None

    @property
    def exit_code(self) -> int:
        if self.outcome == "stalled":
            return 3
        if self.audit is not None and not self.audit.passed:
            return 1
        return 0

    def as_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "server": self.server,
            "strategy": self.strategy,
            "ordered": self.ordered,
            "target": self.target,
            "produced": self.produced,
            "processed": self.processed,
            "elapsed_s": round(self.elapsed_s, 4),
            "throughput_per_s": round(self.throughput_per_s, 2),
            "throughput_per_type_per_s": {
                t: round(n / self.elapsed_s, 2) if self.elapsed_s else 0.0 for t, n in self.per_type.items()
            },
            "processed_per_type": self.per_type,
            "latency_ms": {"e2e": self.e2e_ms, "claim": self.claim_ms, "complete": self.complete_ms},
            "empty_claims": self.empty_claims,
            "groups": self.groups,
            "groups_per_type": self.groups_per_type,
            "work_mean_ms": round(self.work_mean_ms, 3),
            "ordering_bound_per_s": _round(self.ordering_bound_per_s),
            "ordering_bound_share": _round(self.bound_share, 3),
            "worker_bound_per_s": _round(self.worker_bound_per_s),
            "workers": [w.__dict__ for w in self.workers],
            "audit": self.audit.as_json() if self.audit else None,
            "table": self.health.as_json() if self.health else None,
            "timeline": [s.__dict__ for s in self.timeline],
            "advice": advice(self),
            "stall_causes": list(self.stall_causes),
            "settings": self.settings.as_json(),
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def advice(result: RunResult) -> list[str]:
    """One line for each figure that calls for action."""
    lines = []
    claim_p50, complete_p50 = result.claim_ms["p50"], result.complete_ms["p50"]
    work = result.work_mean_ms
    if claim_p50 is not None and complete_p50 is not None:
        overhead = claim_p50 + complete_p50
        if result.settings.work.mean_ms > 0 and claim_p50 > work:
            lines.append(
                f"claim p50 {claim_p50:.1f} ms exceeds the mean work {work:.1f} ms:"
                " the claim query scans the backlog; try -claim indexed"
            )
        elif result.ordering_bound_per_s is not None and overhead > 0.2 * (work + overhead):
            cause = (
                "the claim query; try -claim indexed"
                if claim_p50 > complete_p50
                else "completing and committing (server load, WAL flush)"
            )
            lines.append(
                f"each message spends {claim_p50:.2f} ms claiming and {complete_p50:.2f} ms"
                f" completing against {work:.2f} ms of work, which caps the run at"
                f" {work / (work + overhead):.0%} of the ordering bound; most of it is {cause}"
            )
    worker_bound, bound = result.worker_bound_per_s, result.ordering_bound_per_s
    if worker_bound is not None and bound is not None and worker_bound < 0.9 * bound:
        lines.append(
            f"fewer workers than groups in some type: {len(result.workers)} workers can keep at most"
            f" {worker_bound:.0f}/s of the {bound:.0f}/s ordering bound; add workers"
        )
    claims = result.processed + result.empty_claims
    if claims and result.empty_claims > result.processed:
        lines.append(
            f"{result.empty_claims} of {claims} claims found nothing: more workers than"
            f" claimable groups ({result.groups}); use fewer workers or more -orders"
        )
    e2e_p50, poll_ms = result.e2e_ms["p50"], result.settings.poll_interval * 1000
    if (
        result.settings.wakeup == "poll"
        and result.settings.rate
        and e2e_p50 is not None
        and e2e_p50 > max(5 * work, 0.2 * poll_ms)
        and e2e_p50 < 2 * poll_ms
    ):
        lines.append(
            f"end-to-end p50 {e2e_p50:.0f} ms is mostly messages waiting for idle workers that poll"
            f" every {result.settings.poll_interval:g} s; -wakeup notify wakes them at once"
        )
    health = result.health
    if health and health.dead_tuples > max(1000, health.live_tuples):
        lines.append(
            f"{health.dead_tuples} dead tuples against {health.live_tuples} live:"
            " vacuum the queue table more often (autovacuum_vacuum_scale_factor)"
        )
    if result.settings.rate and result.timeline and result.outcome == "completed":
        last = result.timeline[-1].backlog
        if last > result.settings.rate * 5:
            lines.append(
                f"backlog ended at {last}: -rate {result.settings.rate:g}/s exceeds what the"
                " workers process; add workers or groups"
            )
    return lines


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def print_summary(console: Console, result: RunResult) -> None:
    table = Table(title=f"pgmq-sim: {result.outcome}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("server", result.server)
    table.add_row("strategy / wake-up", f"{result.strategy} / {result.settings.wakeup}")
    table.add_row("processed", f"{result.processed} of {result.target} in {result.elapsed_s:.2f} s")
    per_type = ", ".join(
        f"{t} {n / result.elapsed_s:.0f}" if result.elapsed_s else f"{t} 0"
        for t, n in result.per_type.items()
    )
    table.add_row("messages/s", f"{result.throughput_per_s:.1f} ({per_type})")
    for label, values in (
        ("end-to-end ms", result.e2e_ms),
        ("claim ms", result.claim_ms),
        ("complete+commit ms", result.complete_ms),
    ):
        table.add_row(label, "  ".join(f"{k} {_ms(v)}" for k, v in values.items()))
    table.add_row("empty claims", str(result.empty_claims))
    bound, worker_bound = result.ordering_bound_per_s, result.worker_bound_per_s
    if bound and worker_bound:
        text = (
            f"{bound:.0f}/s ({result.groups} groups / {result.work_mean_ms:.2f} ms work);"
            f" run reached {result.bound_share:.0%}"
        )
        if worker_bound < bound:
            share = result.throughput_per_s / worker_bound
            text += f"; {len(result.workers)} workers allow at most {worker_bound:.0f}/s ({share:.0%})"
        table.add_row("ordering bound", text)
    if result.health:
        h = result.health
        table.add_row(
            "table",
            f"{h.live_tuples} live, {h.dead_tuples} dead tuples, {h.table_bytes // 1024} KiB"
            f" + {h.index_bytes // 1024} KiB indexes, autovacuum x{h.autovacuum_runs}",
        )
    if result.audit:
        a = result.audit
        verdict = "[green]pass[/]" if a.passed else "[red]FAIL[/]"
        detail = "; ".join(a.problems()) or (
            f"{a.processed}/{a.expected} exactly once, order "
            + ("kept" if a.ordered else "not checked (unordered strategy)")
        )
        table.add_row("audit", f"{verdict}: {detail}")
    console.print(table)
    workers = Table(title="workers", title_justify="left")
    for column in ("worker", "type", "processed", "empty claims", "busy"):
        workers.add_column(column, justify="right" if column != "worker" else "left")
    for w in result.workers:
        workers.add_row(w.name, w.queue_type, str(w.processed), str(w.empty_claims), f"{w.busy_share:.0%}")
    console.print(workers)
    for cause in result.stall_causes:
        console.print(f"[red]stall:[/] {cause}")
    for line in advice(result):
        console.print(f"[yellow]advice:[/] {line}")


def print_comparison(console: Console, results: list[RunResult]) -> None:
    table = Table(title="claim strategies compared", title_justify="left")
    for column in (
        "strategy",
        "wake-up",
        "msg/s",
        "e2e p50",
        "e2e p99",
        "claim p50",
        "claim p99",
        "empty claims",
        "bound",
        "audit",
    ):
        table.add_column(column, justify="left" if column in ("strategy", "wake-up") else "right")
    for r in results:
        share = r.bound_share
        table.add_row(
            r.strategy,
            r.settings.wakeup,
            f"{r.throughput_per_s:.0f}",
            _ms(r.e2e_ms["p50"]),
            _ms(r.e2e_ms["p99"]),
            _ms(r.claim_ms["p50"]),
            _ms(r.claim_ms["p99"]),
            str(r.empty_claims),
            "-" if share is None else f"{share:.0%}",
            r.audit.verdict if r.audit else "off",
        )
    console.print(table)


def check_output_path(path: Path, flag: str) -> None:
    """Refuse before the run, not after it, a result file that cannot be written."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write {flag} file {path}; choose a path in a writable directory")


PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_plot_support(path: Path) -> None:
    if path.suffix.lower() not in PLOT_FORMATS:
        raise UsageError(f"-plot {path} has no picture format; end the name in {', '.join(PLOT_FORMATS)}")
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "-plot needs matplotlib; install the plot extra: pip install '.[plot]' in a checkout,"
            " or pip install 'pgmq-sim[plot]'"
        )


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose a writable -json path") from None


def write_plot(path: Path, results: list[RunResult]) -> None:
    """Throughput, backlog and end-to-end latency over time; runs of a comparison overlaid."""
    check_plot_support(path)
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    single = len(results) == 1
    percentiles = [("e2e_p50_ms", "-", "p50"), ("e2e_p95_ms", "--", "p95"), ("e2e_p99_ms", ":", "p99")]
    if not single:  # one colour per run; p95 would crowd a comparison
        percentiles = [percentiles[0], percentiles[2]]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True, constrained_layout=True)
    for index, r in enumerate(results):
        color = colors[index % len(colors)]
        label = f"{r.strategy}/{r.settings.wakeup}"
        seconds = [s.second + 1 for s in r.timeline]
        axes[0].plot(seconds, [s.processed for s in r.timeline], color=color, label=f"{label} processed")
        axes[1].plot(seconds, [s.backlog for s in r.timeline], color=color)
        for key, style, _ in percentiles:
            values = [getattr(s, key) for s in r.timeline]
            axes[2].plot(seconds, [math.nan if v is None else v for v in values], style, color=color)
        if single and r.settings.rate:
            axes[0].plot(seconds, [s.arrived for s in r.timeline], ":", color="black", label="arrived")
        if single and r.ordering_bound_per_s:
            axes[0].axhline(
                r.ordering_bound_per_s,
                color="grey",
                linestyle="--",
                label=f"ordering bound {r.ordering_bound_per_s:.0f}/s",
            )
    axes[0].set_ylabel("messages per second")
    axes[0].legend(loc="upper right", fontsize="small")
    axes[1].set_ylabel("backlog (messages)")
    axes[2].set_ylabel("end-to-end latency (ms)")
    latencies = [v for r in results for s in r.timeline if (v := s.e2e_p50_ms) is not None and v > 0]
    if latencies and max(latencies) > 50 * min(latencies):  # spans decades: log scale, plain labels
        axes[2].set_yscale("log")
        axes[2].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axes[2].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[2].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[2].legend(
        handles=[
            Line2D([], [], color="black", linestyle=style, label=name) for _, style, name in percentiles
        ],
        loc="upper right",
        fontsize="small",
    )
    axes[2].set_xlabel("seconds since start")
    first = results[0]
    fig.suptitle(
        f"pgmq-sim: {first.settings.fill_db} messages, {first.settings.workers} workers,"
        f" work {first.settings.work} ms"
        + (f", rate {first.settings.rate:g}/s" if first.settings.rate else "")
    )
    for ax in axes:
        ax.grid(True, alpha=0.3)
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}; choose a writable -plot path") from None
    finally:
        plt.close(fig)
