"""A picture of the run over time: throughput, backlog and end-to-end latency."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.paths import describe_path
from pgmq_sim.result.account import PARTS, CohortSplit
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.waits import CLASSES

PLOT_FORMATS = (".png", ".svg", ".pdf")
PERCENTILES = (("e2e_p50_ms", "p50", "-"), ("e2e_p95_ms", "p95", "--"), ("e2e_p99_ms", "p99", ":"))


def check_plot_support(path: Path) -> None:
    if path.suffix.lower() not in PLOT_FORMATS:
        raise UsageError(
            f"-plot {describe_path(path)} has no picture format; end the name in {', '.join(PLOT_FORMATS)}"
        )
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "-plot needs matplotlib; install the plot extra: pip install '.[plot]' in a checkout,"
            " or pip install 'pgmq-sim[plot]'"
        )


FAULT_COLORS = {
    "kill-connection": "tab:red",
    "kill-worker": "tab:purple",
    "restart-server": "black",
    "hold-xmin": "tab:brown",
    "lock-table": "tab:olive",
}


def _draw_faults(axes: Any, r: RunResult) -> None:
    """A vertical line per fault, one colour and one legend entry per kind; a held snapshot or
    lock is a shaded span from its start to its end."""
    seen: set[str] = set()
    starts: dict[str, float] = {}
    for fault in r.faults:
        kind = fault.kind.removesuffix(" end")
        color = FAULT_COLORS.get(kind, "tab:gray")
        if fault.kind.endswith(" end"):
            began = starts.pop(kind, None)
            if began is not None:
                for ax in axes:
                    ax.axvspan(began, fault.at_s, color=color, alpha=0.12)
            continue
        if kind in ("hold-xmin", "lock-table"):
            starts[kind] = fault.at_s
        for index, ax in enumerate(axes):
            label = f"fault: {kind}" if index == 0 and kind not in seen else None
            ax.axvline(fault.at_s, color=color, alpha=0.6, linewidth=1, label=label)
        seen.add(kind)


def _title(r: RunResult) -> str:
    s = r.settings
    if s.sweep is not None:
        load = f"sweep {s.sweep}"
    elif s.paced:
        load = s.rate_schedule.describe()
    else:
        load = "prefilled"
    count = f"{s.fill_db} messages" if s.fill_db is not None else f"{r.produced} messages"
    return f"{count}, {s.workers} workers, work {s.work} ms, {load}"


def _draw_knees(ax: Any, results: list[RunResult], colors: list[str]) -> None:
    """Achieved rate and end-to-end p99 against each step's setting: where the queue stops keeping up."""
    p99_axis = ax.twinx()
    for index, r in enumerate(results):
        assert r.sweep is not None
        color = colors[index % len(colors)]
        steps = sorted(r.sweep.steps, key=lambda s: s.setting)  # a search visits rates out of order
        x = [s.setting for s in steps]
        label = r.strategy if len(results) > 1 else "achieved"
        ax.plot(x, [s.achieved_per_s for s in steps], "o-", color=color, label=f"{label} msg/s")
        p99 = [math.nan if s.e2e_ms["p99"] is None else s.e2e_ms["p99"] for s in steps]
        p99_axis.plot(x, p99, "s--", color=color, alpha=0.6, label=f"{label} e2e p99")
        for step in steps:
            if step.verdict != "pass":
                ax.plot([step.setting], [step.achieved_per_s], "x", color="tab:red", markersize=10)
        if r.sweep.spec.kind == "rate":
            ax.plot(x, x, ":", color="grey", label="offered" if index == 0 else None)
        knee, failing, hold = r.sweep.max_sustainable_per_s, r.sweep.first_failing_per_s, r.sweep.hold
        if r.sweep.spec.adaptive and knee is not None and failing is not None:
            ax.axvspan(knee, failing, color=color, alpha=0.15, label=f"{label} bracket {knee:g}-{failing:g}")
        if hold is not None:
            ax.plot([hold.setting], [hold.achieved_per_s], "*", color=color, markersize=16,
                    label=f"{label} hold {hold.seconds:.0f} s: {hold.verdict}")  # fmt: skip
    kind = results[0].sweep.spec.kind if results[0].sweep else "rate"
    ax.set_xlabel("offered rate (msg/s)" if kind == "rate" else "workers")
    ax.set_ylabel("achieved msg/s")
    p99_axis.set_ylabel("end-to-end p99 (ms)")
    p99_axis.set_yscale("log")
    ax.set_ylim(bottom=0)
    ax.set_title(
        "the knee: failed steps marked x; a search's bracket shaded, its hold starred", fontsize="medium"
    )
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = p99_axis.get_legend_handles_labels()
    ax.legend(
        lines + more, labels + more_labels, loc="upper left", bbox_to_anchor=(1.08, 1), fontsize="small"
    )
    ax.grid(True, alpha=0.3)


def _draw_waits(ax: Any, results: list[RunResult], colors: list[str]) -> None:
    """The wait profile: shares of the backends' time in a transaction, a stacked bar per run, or
    per step of a single sweep."""
    bars: list[tuple[str, dict[str, float]]] = []
    if len(results) == 1 and results[0].sweep is not None:
        sweep = results[0].sweep
        unit = "workers" if sweep.spec.kind == "workers" else "/s"
        for step in sorted(sweep.steps, key=lambda s: (s.setting, s.index)):
            bars.append((f"{step.setting:g}{unit} {step.limit or ''}", step.wait_profile or {}))
    else:
        for r in results:
            bars.append((f"{r.strategy}/{r.settings.wakeup}", r.waits.shares() if r.waits else {}))
    names = [name for name in CLASSES if any(shares.get(name) for _, shares in bars)]
    series = [
        (CLASSES[name], colors[index % len(colors)], [shares.get(name, 0.0) for _, shares in bars])
        for index, name in enumerate(names)
    ]
    _stacked_shares(ax, [label for label, _ in bars], series)
    ax.set_title(
        "server waits: the run's backends in a transaction, sampled from pg_stat_activity"
        + ("" if names else " (not sampled: -wait-sample-hz 0)"),
        fontsize="medium",
    )
    if names:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)


def _stacked_shares(ax: Any, labels: list[str], series: list[tuple[str, str, list[float]]]) -> None:
    """A horizontal bar per label, stacked from each series' (name, colour, shares) in turn."""
    left = [0.0] * len(labels)
    for name, color, widths in series:
        ax.barh(range(len(labels)), widths, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(range(len(labels)), labels, fontsize="small")
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")


PART_COLORS = {
    "due": "tab:gray",
    "ordering": "tab:purple",
    "claim": "tab:blue",
    "capacity": "tab:orange",
    "hidden": "tab:red",
    "service": "tab:green",
}


def _draw_account(ax: Any, results: list[RunResult]) -> None:
    """The latency account: where the median's and the slowest 1%'s time went, a stacked bar each
    (per type too, for one run), as shares, the total in the label."""
    bars: list[tuple[str, CohortSplit]] = []
    for r in results:
        if r.latency is None:
            continue
        who = "" if len(results) == 1 else f"{r.strategy}/{r.settings.wakeup} "
        for name, cohort in (("median", r.latency.median), ("slowest 1%", r.latency.p99)):
            if cohort is not None:
                bars.append((f"{who}{name} {cohort.total_ms:.3g} ms", cohort))
        if len(results) == 1 and len(r.latency.per_type) > 1:
            for queue_type, cohorts in r.latency.per_type.items():
                cohort = cohorts.get("p99")
                if cohort is not None:
                    bars.append((f"{queue_type} slowest 1% {cohort.total_ms:.3g} ms", cohort))
    series = [(part, PART_COLORS[part], [cohort.share(part) for _, cohort in bars]) for part in PARTS]
    _stacked_shares(ax, [label for label, _ in bars], series)
    ax.invert_yaxis()
    ax.set_title(
        "where the time went: each message from enqueue to completion (the latency account)"
        + ("" if bars else " (none: -no-audit keeps no journal)"),
        fontsize="medium",
    )
    if bars:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)


def write_plot(path: Path, results: list[RunResult]) -> None:
    """One colour per run; in a single run, one colour per percentile. Legends sit outside the
    axes; the last, partial second is drawn as a rate, not as a collapse."""
    check_plot_support(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    single = len(results) == 1
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    swept = [r for r in results if r.sweep is not None]
    # the run over time, then the knee (a sweep) and where the server's time went, each apart
    heights = (1, 1, 1, 1.2, 0.8, 0.8) if swept else (1, 1, 1, 0.6, 0.6)
    fig = plt.figure(figsize=(11, 3 * sum(heights)), constrained_layout=True)
    grid = fig.add_gridspec(len(heights), 1, height_ratios=heights)
    axes = [fig.add_subplot(grid[0])]
    axes += [fig.add_subplot(grid[i], sharex=axes[0]) for i in (1, 2)]
    if swept:
        _draw_knees(fig.add_subplot(grid[3]), swept, colors)
    _draw_waits(fig.add_subplot(grid[len(heights) - 2]), results, colors)
    _draw_account(fig.add_subplot(grid[len(heights) - 1]), results)
    for index, r in enumerate(results):
        color = colors[index % len(colors)]
        label = f"{r.strategy}/{r.settings.wakeup}" + ("/split" if r.settings.tx == "split" else "")
        samples = list(r.timeline)
        seconds: list[float] = [s.second + 1 for s in samples]
        partial = r.elapsed_s - math.floor(r.elapsed_s)
        scale = [1.0] * len(samples)
        if samples and 0.05 < partial < 1 and len(samples) > math.floor(r.elapsed_s):
            scale[-1] = 1 / partial  # messages in the last fraction of a second, as a per-second rate
            seconds[-1] = samples[-1].second + partial
        axes[0].plot(
            seconds,
            [s.processed * k for s, k in zip(samples, scale, strict=True)],
            color=color,
            label=f"{label} processed" if not single else "processed",
        )
        axes[1].plot(seconds, [s.backlog for s in samples], color=color, label=f"{label} backlog")
        dead = [math.nan if s.dead_tuples is None else s.dead_tuples for s in samples]
        if single and any(not math.isnan(d) for d in dead):
            axes[1].plot(seconds, dead, "--", color="tab:red", label="dead tuples")
        shown = PERCENTILES if single else (PERCENTILES[0], PERCENTILES[2])
        for p_index, (key, name, style) in enumerate(shown):
            values = [getattr(s, key) for s in samples]
            line_color = colors[p_index % len(colors)] if single else color
            axes[2].plot(
                seconds,
                [math.nan if v is None else v for v in values],
                style,
                color=line_color,
                label=name if single else f"{label} {name}",
                linewidth=1.8 if name == "p50" else 1.2,
            )
        if single and r.settings.paced:
            axes[0].plot(
                seconds,
                [s.arrived * k for s, k in zip(samples, scale, strict=True)],
                ":",
                color="black",
                label="arrived",
            )
        peak = max((max(s.processed, s.arrived) for s in samples), default=0)
        if single and r.ordering_bound_per_s and r.ordering_bound_per_s <= 3 * max(peak, 1):
            axes[0].axhline(
                r.ordering_bound_per_s,
                color="grey",
                linestyle="--",
                label=f"ordering bound {r.ordering_bound_per_s:.0f}/s",
            )
        if single:
            _draw_faults(axes, r)
    axes[0].set_ylabel("messages per second")
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylabel("backlog, dead tuples")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylabel("end-to-end latency (ms)")
    latencies = [v for r in results for s in r.timeline if (v := s.e2e_p50_ms) is not None and v > 0]
    if latencies and max(latencies) > 50 * min(latencies):  # spans decades: log scale, plain labels
        axes[2].set_yscale("log")
        axes[2].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axes[2].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        axes[2].set_ylim(bottom=0)
    for ax in axes:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)
    axes[2].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[2].set_xlabel("seconds since the workers started")
    first = results[0]
    fig.suptitle(f"pgmq-sim: {_title(first)}")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise SimError(
            f"cannot write -plot file {describe_path(path)}: {exc.strerror};"
            " free space or choose another path"
        ) from None
    finally:
        plt.close(fig)
