"""The HTML report's charts: matplotlib figures drawn to inline SVG, from a run's JSON document.

Each chart is a self-contained `<svg>` (text as text, no font or image to fetch), its ids salted
with the chart's name so that several charts live in one page. What a chart draws from the data
(a line, a bar, a marker) is a group whose id starts with `mark-`: the browser test counts them.
Everything here reads the document the JSON file holds (render/files.py), so a run, a comparison
and a diff of two saved runs are drawn by the same code."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.render.palette import EPISODE_COLOR, FAULT_COLORS, PALETTE, PERCENTILES, SPLIT_COLORS
from pgmq_sim.render.tracks import Track, nan
from pgmq_sim.result.waits import CLASSES

Doc = dict[str, Any]
WIDTH_IN = 10.0  # inches at 72 points: the SVG's own size; the page scales it to its column
DENSE = 200  # points beyond which a line is drawn solid and thin
SPLIT_TYPES = 12  # the types drawn in the latency split: the slowest p99s (the table lists them all)


@contextmanager
def style(name: str) -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",  # text stays text: no glyph outlines, no font to embed
            "svg.hashsalt": name,  # ids unique to this chart, the same from run to run
            "font.family": "sans-serif",
            "font.size": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        yield


def _svg(fig: Any) -> str:
    """The figure as an `<svg>` element (no XML prolog: it is inlined in HTML)."""
    out = io.StringIO()
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})  # constrained: legends fit
    text = out.getvalue()
    return text[text.index("<svg") :]


def figure(height_in: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH_IN, height_in), layout="constrained")


@dataclass(frozen=True)
class Chart:
    """One chart: drawn into a figure of its own for the report's SVG, or into its part of -plot's
    picture (a subfigure), by the same code."""

    name: str  # salts the SVG's ids
    height_in: float
    draw: Callable[[Any], None]  # into a matplotlib Figure or SubFigure

    def svg(self) -> str:
        with style(self.name):
            fig = figure(self.height_in)
            self.draw(fig)
            return _svg(fig)


def _mark(artists: Any, name: str) -> None:
    """Name what the data drew, so that a reader (the browser test) can find it."""
    items = artists if isinstance(artists, (list, tuple)) else [artists]
    for index, artist in enumerate(items):
        if hasattr(artist, "set_gid"):
            artist.set_gid(f"mark-{name}-{index}")
        for patch in getattr(artist, "patches", ()):  # a bar container
            patch.set_gid(f"mark-{name}-{index}")


def _draw_faults(axes: Sequence[Any], faults: list[Doc]) -> None:
    """A vertical line per fault, one colour and one legend entry per kind; a held snapshot or a
    lock is a shaded span from its start to its end."""
    starts: dict[str, float] = {}
    by_kind: dict[str, list[float]] = {}
    for fault in faults:
        kind = str(fault["kind"]).removesuffix(" end")
        color = FAULT_COLORS.get(kind, "#7f7f7f")
        if str(fault["kind"]).endswith(" end"):
            began = starts.pop(kind, None)
            if began is not None:
                for ax in axes:
                    _mark(ax.axvspan(began, fault["at_s"], color=color, alpha=0.12), "fault-span")
            continue
        if kind in ("hold-xmin", "lock-table"):
            starts[kind] = fault["at_s"]
        by_kind.setdefault(kind, []).append(float(fault["at_s"]))
    for kind, times in by_kind.items():
        color = FAULT_COLORS.get(kind, "#7f7f7f")
        for index, ax in enumerate(axes):
            label = f"fault: {kind} (x{count_text(len(times))})" if len(times) > 1 else f"fault: {kind}"
            lines = ax.vlines(
                times,
                0,
                1,
                transform=ax.get_xaxis_transform(),
                color=color,
                alpha=0.6,
                linewidth=1,
                label=label if index == 0 else None,
            )
            _mark(lines, f"fault-{kind}")


def _draw_episodes(axes: Sequence[Any], episodes: list[Doc]) -> None:
    """Each episode a shaded span over its seconds, one legend entry per limit: a long run's drawing
    keeps the stretch its buckets may thin, where the verdict placed it."""
    named: set[str] = set()
    for episode in episodes:
        limit = str(episode.get("limit"))
        for index, ax in enumerate(axes):
            label = f"episode: {limit}" if index == 0 and limit not in named else None
            span = ax.axvspan(
                episode["from_s"], episode["to_s"], color=EPISODE_COLOR, alpha=0.15, linewidth=0, label=label
            )
            _mark(span, "episode")
        named.add(limit)


def _draw_steps(axes: Sequence[Any], track: Track) -> None:
    """A sweep's steps: alternate shades, a failing step tinted red, its setting written on top."""
    for index, step in enumerate(track.steps):
        start, length = float(step["started_s"]), float(step["seconds"]) + float(step.get("settle_s") or 0)
        failed = step.get("verdict") != "pass"
        color = "#d62728" if failed else ("#1f77b4" if index % 2 else "#7f7f7f")
        for ax in axes:
            _mark(ax.axvspan(start, start + length, color=color, alpha=0.08, linewidth=0), "step")
        axes[0].annotate(
            f"{step['setting']:g}{track.step_unit}",
            xy=(start + length / 2, 1.0),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="bottom",
            fontsize=7,
            color="#d62728" if failed else "#333333",
        )


def timeline_chart(tracks: Sequence[Track], name: str = "timeline") -> Chart:
    """Throughput, backlog and end-to-end latency over the run, sharing the time axis; one colour
    per series in a single run, one per run when several are drawn; faults and sweep steps marked
    (a single run's)."""
    single = len(tracks) == 1

    def draw(fig: Any) -> None:
        top = fig.add_subplot(3, 1, 1)
        axes = [top, fig.add_subplot(3, 1, 2, sharex=top), fig.add_subplot(3, 1, 3, sharex=top)]
        for index, track in enumerate(tracks):
            color = PALETTE[index % len(PALETTE)]
            prefix = "" if single else f"{track.label} "
            x = track.seconds
            dots = {"marker": "o", "markersize": 3} if len(x) < 3 else {}  # a second or two: no line to draw
            dense = len(x) > DENSE  # dashes drawn over hundreds of points are noise: solid, thin lines
            _mark(
                axes[0].plot(x, track.processed, color=color, label=f"{prefix}processed", **dots), "processed"
            )
            if single and track.arrived is not None:
                _mark(axes[0].plot(x, track.arrived, ":", color="black", label="arrived", **dots), "arrived")
            peak = max([*track.processed, *(track.arrived or [])], default=0.0)
            if single and track.bound_per_s and track.bound_per_s <= 3 * max(peak, 1):
                axes[0].axhline(
                    track.bound_per_s,
                    color="grey",
                    linestyle="--",
                    label=f"ordering bound {track.bound_per_s:.0f}/s",
                )
            _mark(axes[1].plot(x, track.backlog, color=color, label=f"{prefix}backlog", **dots), "backlog")
            if single and any(not math.isnan(d) for d in track.dead_tuples):
                _mark(
                    axes[1].plot(
                        x,
                        track.dead_tuples,
                        "-" if dense else "--",
                        color="#d62728",
                        label="dead tuples",
                        **dots,
                    ),
                    "dead",
                )
            shown = PERCENTILES if single else (PERCENTILES[0], PERCENTILES[2])
            for p_index, (key, label, style) in enumerate(shown):
                line_color = PALETTE[p_index] if single else color
                lines = axes[2].plot(
                    x,
                    track.percentiles[key],
                    "-" if dense and single else style,
                    color=line_color,
                    label=f"{prefix}{label}",
                    linewidth=(1.8 if label == "p50" else 1.2) * (0.6 if dense else 1),
                    **dots,
                )
                _mark(lines, f"e2e-{label}")
            if single:
                _draw_steps(axes, track)
                _draw_faults(axes, track.faults)
                _draw_episodes(axes, track.episodes)
        axes[0].set_ylabel("messages per second")
        axes[1].set_ylabel("backlog")
        axes[2].set_ylabel("end-to-end (ms)")
        for ax in axes[:2]:
            ax.set_ylim(bottom=0)
            ax.tick_params(labelbottom=False)
        p50s = [v for t in tracks for v in t.percentiles["e2e_p50_ms"] if not math.isnan(v) and v > 0]
        if p50s and max(p50s) > 50 * min(p50s):  # spans decades
            import matplotlib.ticker

            axes[2].set_yscale("log")
            axes[2].yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            axes[2].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        else:
            axes[2].set_ylim(bottom=0)
        bucket = max(t.bucket_s for t in tracks) if tracks else 1
        per_point = f" (a point per {bucket} s: rates their mean, backlog and p95/p99 their worst second)"
        axes[2].set_xlabel("seconds since the workers started" + (per_point if bucket > 1 else ""))
        for ax in axes:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)

    return Chart(name, 7.2, draw)


def knee_chart(sweeps: Sequence[tuple[str, Doc]], name: str = "knee") -> Chart:
    """Achieved rate and end-to-end p99 against each step's setting: where the queue stops keeping
    up. Failed steps are crossed; an adaptive search's bracket is shaded and its hold starred."""

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        p99_axis = ax.twinx()
        kind = "rate"
        for index, (label, sweep) in enumerate(sweeps):
            color = PALETTE[index % len(PALETTE)]
            kind = sweep.get("kind") or kind
            steps = sorted(sweep.get("steps") or [], key=lambda s: s["setting"])
            x = [s["setting"] for s in steps]
            prefix = f"{label} " if len(sweeps) > 1 else ""
            _mark(
                ax.plot(
                    x,
                    [s["achieved_per_s"] for s in steps],
                    "o-",
                    color=color,
                    label=f"{prefix}achieved msg/s",
                ),
                "achieved",
            )
            p99 = [nan((s.get("e2e_ms") or {}).get("p99")) for s in steps]
            _mark(p99_axis.plot(x, p99, "s--", color=color, alpha=0.6, label=f"{prefix}e2e p99"), "p99")
            failed = [s for s in steps if s.get("verdict") != "pass"]
            if failed:
                crosses = ax.plot(
                    [s["setting"] for s in failed],
                    [s["achieved_per_s"] for s in failed],
                    "x",
                    color="#d62728",
                    markersize=10,
                    label="failed step" if index == 0 else None,
                )
                _mark(crosses, "failed")
            if kind == "rate" and index == 0:
                ax.plot(x, x, ":", color="grey", label="offered")
            knee, failing = sweep.get("max_sustainable_per_s"), sweep.get("first_failing_per_s")
            if sweep.get("adaptive") and knee is not None and failing is not None:
                ax.axvspan(
                    knee, failing, color=color, alpha=0.15, label=f"{prefix}bracket {knee:g}-{failing:g}"
                )
            confirmed = sweep.get("confirmed")
            if confirmed:
                held = [s for s in steps if s.get("purpose") == "hold" and s["setting"] == confirmed["rate"]]
                if held:
                    star = ax.plot(
                        [confirmed["rate"]],
                        [held[-1]["achieved_per_s"]],
                        "*",
                        color=color,
                        markersize=14,
                        label=f"{prefix}hold: {confirmed['verdict']}",
                    )
                    _mark(star, "hold")
        ax.set_xlabel("offered rate (msg/s)" if kind == "rate" else "workers")
        ax.set_ylabel("achieved msg/s")
        ax.set_ylim(bottom=0)
        p99_axis.set_ylabel("end-to-end p99 (ms)")
        if any((s.get("e2e_ms") or {}).get("p99") for _, sweep in sweeps for s in sweep.get("steps") or []):
            p99_axis.set_yscale("log")
        p99_axis.grid(False)
        p99_axis.spines["right"].set_visible(True)
        lines, labels = ax.get_legend_handles_labels()
        more, more_labels = p99_axis.get_legend_handles_labels()
        ax.legend(
            lines + more,
            labels + more_labels,
            loc="upper left",
            bbox_to_anchor=(1.1, 1),
            fontsize="small",
            borderaxespad=0,
        )

    return Chart(name, 3.6, draw)


def cells_chart(cells: Sequence[tuple[str, Doc]], name: str = "cells") -> Chart:
    """A comparison's cells side by side: throughput, and end-to-end p50 and p99."""
    labels = [label for label, _ in cells]
    rows = list(range(len(cells)))

    def draw(fig: Any) -> None:
        speed, latency = fig.subplots(1, 2, sharey=True)
        throughput = [float(doc.get("throughput_per_s") or 0.0) for _, doc in cells]
        bars = speed.barh(rows, throughput, color=PALETTE[0])
        _mark(bars, "throughput")
        speed.bar_label(bars, fmt="%.0f", fontsize=7, padding=2)
        speed.set_yticks(rows, labels)
        speed.invert_yaxis()
        speed.set_xlabel("messages per second")
        height = 0.4
        for offset, key, color in ((-height / 2, "p50", PALETTE[1]), (height / 2, "p99", PALETTE[3])):
            values = [nan(doc["latency_ms"]["e2e"].get(key)) for _, doc in cells]
            drawn = latency.barh(
                [r + offset for r in rows], values, height=height, color=color, label=f"e2e {key}"
            )
            _mark(drawn, f"e2e-{key}")
        finite = [v for _, doc in cells for k in ("p50", "p99") if (v := doc["latency_ms"]["e2e"].get(k))]
        if finite and max(finite) > 50 * min(finite):
            latency.set_xscale("log")
        latency.set_xlabel("end-to-end latency (ms)")
        latency.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)

    return Chart(name, 0.9 + 0.32 * len(cells), draw)


def split_rows(split: Doc, most: int | None = None) -> list[tuple[str, Doc]]:
    """The latency split's rows: overall, then each type (or the `most` with the slowest p99 cohort),
    slowest first."""
    rows = [(f"all, {cohort}", split["overall"][cohort]) for cohort in ("median", "p99")]
    per_type = split.get("per_type") or {}
    slowest = sorted(per_type, key=lambda t: -float((per_type[t].get("p99") or {}).get("e2e_ms") or 0.0))
    for queue_type in slowest[:most]:
        for cohort in ("median", "p99"):
            if per_type[queue_type].get(cohort):
                rows.append((f"{queue_type}, {cohort}", per_type[queue_type][cohort]))
    return rows


def split_chart(split: Doc, name: str = "latency-split") -> Chart:
    """Each cohort's end-to-end time split into its parts, a stacked bar per cohort."""
    rows = split_rows(split, SPLIT_TYPES)
    parts = list(split.get("parts") or SPLIT_COLORS)

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        left = [0.0] * len(rows)
        for part in parts:
            widths = [float(cohort.get(f"{part}_ms") or 0.0) for _, cohort in rows]
            drawn = ax.barh(
                range(len(rows)), widths, left=left, color=SPLIT_COLORS.get(part, "#17becf"), label=part
            )
            _mark(drawn, f"split-{part}")
            left = [a + b for a, b in zip(left, widths, strict=True)]
        for row, (_, cohort) in enumerate(rows):
            ax.annotate(
                f" {ms_text(float(cohort.get('e2e_ms') or 0.0))}",
                xy=(left[row], row),
                va="center",
                fontsize=7,
            )
        ax.set_yticks(range(len(rows)), [label for label, _ in rows])
        ax.invert_yaxis()
        ax.set_xlabel("milliseconds of the cohort's end-to-end time")
        ax.set_xlim(0, max(left, default=1.0) * 1.15 or 1.0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)

    return Chart(name, 0.9 + 0.3 * len(rows), draw)


def waits_chart(bars: Sequence[tuple[str, dict[str, float]]], name: str = "waits") -> Chart:
    """The wait profile: shares of the backends' time in a transaction, a stacked bar per run (or
    per sweep step)."""
    names = [n for n in CLASSES if any(shares.get(n) for _, shares in bars)]

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        left = [0.0] * len(bars)
        for index, cls in enumerate(names):
            widths = [shares.get(cls, 0.0) for _, shares in bars]
            drawn = ax.barh(
                range(len(bars)), widths, left=left, color=PALETTE[index % len(PALETTE)], label=CLASSES[cls]
            )
            _mark(drawn, f"wait-{cls}")
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_yticks(range(len(bars)), [label for label, _ in bars])
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
        ax.set_xlabel("share of the run's backends' time in a transaction (sampled from pg_stat_activity)")
        if names:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", borderaxespad=0)

    return Chart(name, 0.9 + 0.28 * len(bars), draw)


RUN_CHARTS = ("timeline", "knee", "split_chart", "waits_chart")  # a run's, in the order they are shown


def run_charts(doc: Doc, key: str, label: str) -> dict[str, Chart | None]:
    """A run's charts (None where its document has nothing to draw): the report's section of the
    run, and -plot's picture of it."""
    split = doc.get("latency_split")
    sweep = doc.get("sweep")
    wait_bars: list[tuple[str, dict[str, float]]] = []
    if sweep:
        unit = " workers" if sweep.get("kind") == "workers" else "/s"
        for step in sorted(sweep.get("steps") or [], key=lambda s: (s["setting"], s["index"])):
            if step.get("wait_profile"):
                wait_bars.append(
                    (f"{step['setting']:g}{unit} {step.get('limit') or ''}", step["wait_profile"])
                )
    elif (doc.get("waits") or {}).get("shares"):
        wait_bars.append((label, doc["waits"]["shares"]))
    return {
        "timeline": timeline_chart([Track.of(doc, label)], f"{key}-timeline")
        if doc.get("timeline")
        else None,
        "knee": knee_chart([(label, sweep)], f"{key}-knee") if sweep and sweep.get("steps") else None,
        "split_chart": split_chart(split, f"{key}-split") if split else None,
        "waits_chart": waits_chart(wait_bars, f"{key}-waits") if wait_bars else None,
    }


def comparison_charts(labelled: Sequence[tuple[str, Doc]]) -> dict[str, Chart | None]:
    """A comparison's charts above its cells': the cells side by side, their timelines overlaid, their
    knees."""
    sweeps = [(label, doc["sweep"]) for label, doc in labelled if doc.get("sweep")]
    timed = any(doc.get("timeline") for _, doc in labelled)
    return {
        "cells_chart": cells_chart(labelled, "cells") if labelled else None,
        "overlay": timeline_chart([Track.of(doc, label) for label, doc in labelled], "cells-timeline")
        if timed
        else None,
        "knees": knee_chart(sweeps, "cells-knee") if sweeps else None,
    }
