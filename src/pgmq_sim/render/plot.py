"""-plot: the report's charts as one picture (PNG, SVG or PDF), drawn from the same document by the
same code (render/charts.py): what the page shows above a run or a comparison."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from pgmq_sim.errors import SimError, UsageError
from pgmq_sim.model.quantities import count_text
from pgmq_sim.paths import describe_path
from pgmq_sim.render.charts import WIDTH_IN, Chart, comparison_charts, run_charts, style
from pgmq_sim.render.report import Doc, doc_label, load_text

PLOT_FORMATS = (".png", ".svg", ".pdf")


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


def plot_charts(documents: Sequence[Doc], compare: bool) -> tuple[str, list[Chart]]:
    """The picture's title and charts: a run's (its timeline, knee, latency split, waits), or a
    comparison's (its cells, their timelines, their knees)."""
    if compare:
        drawn = comparison_charts([(doc_label(doc), doc) for doc in documents])
        title = f"pgmq-sim: {count_text(len(documents))} designs compared"
    else:
        doc = documents[0]
        drawn = run_charts(doc, "run", doc_label(doc))
        title = f"pgmq-sim: {doc.get('outcome')}, {doc_label(doc)}, {load_text(doc)}"
    return title, [chart for chart in drawn.values() if chart is not None]


def write_plot(path: Path, documents: Sequence[Doc], compare: bool = False) -> None:
    """The charts stacked in one figure, each in a subfigure of its own height."""
    check_plot_support(path)
    from matplotlib.figure import Figure

    title, charts = plot_charts(documents, compare)
    with style("plot"):
        fig = Figure(figsize=(WIDTH_IN, 0.6 + sum(c.height_in for c in charts)), layout="constrained")
        fig.suptitle(title if charts else f"{title}: nothing to draw (no second of the run was timed)")
        if charts:
            parts = fig.subfigures(len(charts), 1, height_ratios=[c.height_in for c in charts], squeeze=False)
            for part, chart in zip(parts[:, 0], charts, strict=True):
                chart.draw(part)
        try:
            fig.savefig(path, dpi=100)
        except OSError as exc:
            raise SimError(
                f"cannot write -plot file {describe_path(path)}: {exc.strerror};"
                " free space or choose another path"
            ) from None
