"""A picture of the run over time: throughput, backlog and end-to-end latency."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.result import RunResult
from pgmq_sim.sqlfiles import describe_path

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
    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True, constrained_layout=True)
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
        if single and r.settings.rate:
            axes[0].plot(
                seconds,
                [s.arrived * k for s, k in zip(samples, scale, strict=True)],
                ":",
                color="black",
                label="arrived",
            )
        if single and r.ordering_bound_per_s:
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
    fig.suptitle(
        f"pgmq-sim: {first.settings.fill_db} messages, {first.settings.workers} workers,"
        f" work {first.settings.work} ms"
        + (f", rate {first.settings.rate:g}/s" if first.settings.rate else ", prefilled")
    )
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
