"""-report FILE.html: one self-contained page a team keeps and sends: the answer first, then the
run over time, the tables, the advice and the scenario. A single run, a comparison, a sweep and a
diff of two runs each get one.

The page is drawn from the run's JSON document (render/files.py: the result, its limit, its advice,
its checks), so what it shows is what the JSON holds; a diff's page from the two documents and what
verdicts/diff.py read from them. Jinja2 templates (package data under templates/) make the HTML;
the charts are inline SVG from matplotlib (charts.py). Nothing is fetched when the page is opened:
no script, no font, no image from elsewhere, and a Content-Security-Policy that forbids it."""

from __future__ import annotations

import datetime
import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgmq_sim.errors import UsageError
from pgmq_sim.model.pressure import cell_label
from pgmq_sim.model.quantities import count_text, ms_text
from pgmq_sim.render import charts
from pgmq_sim.render.files import STDOUT, check_output_path, write_text

Doc = dict[str, Any]
MANY_WORKERS = 24  # more than this, and the workers' table starts folded


def check_report_path(path: Path) -> None:
    """Before the run: a page to write (a file, not standard output) and matplotlib to draw it."""
    if path == STDOUT:
        raise UsageError("-report writes an HTML page; give it a file name, e.g. -report run.html")
    check_output_path(path, "-report")
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(
            "-report draws its charts with matplotlib; install the plot extra: pip install '.[plot]' in a"
            " checkout, or pip install 'pgmq-sim[plot]'"
        )


@functools.cache
def _environment() -> Any:
    """The templates, loaded and compiled once (a comparison or a sweep draws a page per cell)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("pgmq_sim.render", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=number, ms=millis, pct=percent, server_version=server_version)
    env.globals.update(lookup=lookup)
    return env


def number(value: Any, digits: int | None = None) -> str:
    """A figure as a person reads it: thousands separated, as many decimals as it needs."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if digits is None:
        digits = 0 if abs(value) >= 100 or float(value).is_integer() else 2 if abs(value) < 10 else 1
    return f"{value:,.{digits}f}"


def millis(value: Any) -> str:
    return "-" if value is None else ms_text(float(value))


def percent(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def server_version(number: Any) -> str:
    """server_version_num as PostgreSQL writes it: 180006 is 18.6, 90624 is 9.6.24."""
    if not isinstance(number, int) or number <= 0:
        return "-" if number is None else str(number)
    if number >= 100000:
        return f"{number // 10000}.{number % 10000} ({number})"
    return f"{number // 10000}.{number // 100 % 100}.{number % 100} ({number})"


def lookup(doc: Doc, key: str) -> Any:
    """A document's value at a dotted path (latency_ms.e2e.p99); None where it is missing."""
    value: Any = doc
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def doc_label(doc: Doc) -> str:
    settings = doc.get("settings") or {}
    pressures = [p["pressure"] for p in settings.get("phases") or () if p.get("pressure")]
    split = settings.get("tx") == "split"
    return cell_label(str(doc.get("strategy")), str(settings.get("wakeup")), split, pressures)


def load_text(doc: Doc) -> str:
    """What the run offered: a count, a rate, a profile or a sweep, and for how long."""
    s = doc.get("settings") or {}
    if s.get("sweep"):
        load = f"sweep {s['sweep']}"
    elif s.get("rate_profile"):
        load = f"rate profile {s['rate_profile']}"
    elif s.get("rate"):
        load = f"{s['rate']:g} msg/s"
    else:
        load = "prefilled"
    count = (
        f"{count_text(s['fill_db'])} messages"
        if s.get("fill_db") is not None
        else f"{count_text(doc.get('produced', 0))} produced"
    )
    duration = f", -duration {s['duration']:g} s" if s.get("duration") is not None else ""
    return f"{count}, {s.get('workers')} workers, work {s.get('work_ms')} ms, {load}{duration}"


def fault_groups(faults: Sequence[Doc]) -> list[Doc]:
    """Faults of one kind, one row: how many, first and last, the outage they cost in all."""
    groups: dict[str, Doc] = {}
    for fault in faults:
        group = groups.setdefault(
            fault["kind"],
            {"kind": fault["kind"], "count": 0, "first_s": fault["at_s"], "last_s": fault["at_s"],
             "outage_s": 0.0, "open": False, "detail": fault["detail"]},
        )  # fmt: skip
        group["count"] += 1
        group["last_s"] = fault["at_s"]
        group["outage_s"] += fault.get("outage_s") or 0.0
        group["open"] = group["open"] or fault.get("recovered") is False
    return list(groups.values())


def per_type_rows(doc: Doc) -> list[Doc]:
    groups = doc.get("groups_per_type") or {}
    rates = doc.get("throughput_per_type_per_s") or {}
    workers = doc.get("workers") or []
    return [
        {
            "type": name,
            "processed": processed,
            "rate": rates.get(name),
            "groups": groups.get(name),
            "workers": sum(1 for w in workers if w.get("queue_type") == name),
        }
        for name, processed in (doc.get("processed_per_type") or {}).items()
    ]


def role_rows(doc: Doc) -> list[Doc]:
    """The cost by role, per message: what the queue cost apart from what measuring it did."""
    roles = lookup(doc, "server_cost.roles") or {}
    names = {
        "producer": "producer",
        "consumers": "consumers",
        "empty_claims": "empty claims",
        "tool": "the tool (run record, journal, clocks, housekeeping)",
        "bystander": "bystander",
    }
    if not lookup(doc, "settings.bystander"):
        del names["bystander"]
    return [{"role": label, **roles[key]} for key, label in names.items() if isinstance(roles.get(key), dict)]


def settings_rows(doc: Doc) -> list[tuple[str, Any]]:
    """Every setting of the run by its flag's name, in the order the JSON holds them (which were given
    and which are defaults the JSON does not say)."""
    return [(key.replace("_", "-"), value) for key, value in (doc.get("settings") or {}).items()]


def run_view(doc: Doc, key: str, label: str | None = None, drawn: bool = True) -> Doc:
    """What the page shows of one run: its document, and the charts drawn from it (none where the
    page shows the run's answer and scenario alone: `drawn` false)."""
    label = label or doc_label(doc)
    split = doc.get("latency_split")
    doc_charts = svgs(charts.run_charts(doc, key, label) if drawn else dict.fromkeys(charts.RUN_CHARTS))
    return doc_charts | {
        "key": key,
        "label": label,
        "doc": doc,
        "load": load_text(doc),
        "split": split or None,
        "split_rows": charts.split_rows(split) if split else [],
        "fault_groups": fault_groups(doc.get("faults") or []),
        "per_type": per_type_rows(doc),
        "roles": role_rows(doc),
        "settings": settings_rows(doc),
        "workers_open": len(doc.get("workers") or []) <= MANY_WORKERS,
    }


def svgs(drawn: dict[str, charts.Chart | None]) -> Doc:
    return {name: chart.svg() if chart else None for name, chart in drawn.items()}


def _page(template: str, version: str, **context: Any) -> str:
    made = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return str(_environment().get_template(template).render(version=version, made=made, **context))


def run_report(
    documents: Sequence[Doc],
    version: str,
    failed: Sequence[Doc] = (),
    compare: bool = False,
    suite: Doc | None = None,
) -> str:
    """The page of a run (one document) or of a comparison (a document per cell)."""
    if not compare:
        return _page(
            "run.html.j2",
            version,
            run=run_view(documents[0], "run"),
            title=f"pgmq-sim: {documents[0]['outcome']}",
        )
    cells = [run_view(doc, f"cell{index + 1}") for index, doc in enumerate(documents)]
    labelled = [(cell["label"], cell["doc"]) for cell in cells]
    return _page(
        "compare.html.j2",
        version,
        title=f"pgmq-sim: pressure scorecard, {count_text(len(cells))} cells"
        if suite is not None
        else f"pgmq-sim: {count_text(len(cells))} designs compared",
        cells=cells,
        failed=list(failed),
        **{
            name: chart.svg() if chart else None for name, chart in charts.comparison_charts(labelled).items()
        },
        sweeps=any(doc.get("sweep") for _, doc in labelled),
        suite=suite,
        checked=any(doc.get("checks") for doc in documents),
    )


def diff_report(
    base: Doc,
    new: Doc,
    names: tuple[str, str],
    diff: Doc,
    fail_on: Sequence[str],
    version: str,
) -> str:
    """The page of `pgmq-sim diff`: both runs, and each figure that moved beyond the runs' noise.
    `diff` is what verdicts/diff.py's diff_json gives."""
    moved = [f for f in diff["figures"] if f["verdict"] in ("better", "worse")]
    return _page(
        "diff.html.j2",
        version,
        title=f"pgmq-sim diff: {names[0]} -> {names[1]}",
        names=names,
        base=run_view(base, "base", f"base: {names[0]}", drawn=False),
        new=run_view(new, "new", f"new: {names[1]}", drawn=False),
        diff=diff,
        moved=moved,
        fail_on=list(fail_on),
        overlay=charts.timeline_chart(
            [charts.Track.of(base, "base"), charts.Track.of(new, "new")], "diff-timeline"
        ).svg()
        if base.get("timeline") and new.get("timeline")
        else None,
    )


def write_report(path: Path, html: str) -> None:
    write_text(path, html, "-report")
