"""The HTML report in a browser: Debian's headless Chromium, driven by Playwright (never a browser
of Playwright's own), opens a single run's, a comparison's, a sweep's and a diff's report with the
network off, and checks that nothing failed (no console error, no request), that every chart has its
marks drawn, and that the headline figures are the JSON's. A screenshot of each page, and the page
itself, are kept in tests/artifacts/reports/ (git-ignored) for a person to look at."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).parent / "artifacts" / "reports"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (  # a browser that fetches nothing of its own, as root
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
)  # fmt: skip
SHAPE = "-workers 6 -orders 20 -work-ms 1-3 -seed 7"
# what the page shows of each mark, each chart, each figure with its key, read in the page
READ_PAGE = """() => {
  const charts = [...document.querySelectorAll('figure[data-chart]')].map(f => {
    const svg = f.querySelector('svg');
    const marks = [...f.querySelectorAll('[id^="mark-"]')].filter(g => {
      const b = g.getBBox();
      return b.width > 0 || b.height > 0;
    });
    return {name: f.dataset.chart, width: svg ? svg.getBoundingClientRect().width : 0, marks: marks.length};
  });
  const values = [...document.querySelectorAll('section.run')].map(s => ({
    run: s.dataset.run,
    figures: [...s.querySelectorAll('.cards [data-key], .limit [data-key]')].map(e => ({
      key: e.dataset.key, value: e.dataset.value, text: e.innerText})),
  }));
  const top = [...document.querySelectorAll('main > .limit [data-key], main > table.cells [data-key]')]
    .map(e => ({key: e.dataset.key, value: e.dataset.value, text: e.innerText}));
  return {charts, values, top};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A persistent context in a new empty profile, offline, every request outside the page refused."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the test extra's playwright is not installed"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it, as root)")
    with tempfile.TemporaryDirectory() as profile, sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=list(FLAGS),
            offline=True,
            viewport={"width": 1280, "height": 900},
            timeout=30_000,
        )
        try:
            yield context
        finally:
            context.close()


def open_page(context: Any, path: Path, name: str) -> dict[str, Any]:
    """Open the page; what it read, and every error it logged or request it tried."""
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))

    def refuse(route: Any) -> None:
        if not route.request.url.startswith("file://"):
            problems.append(f"request: {route.request.url}")
            route.abort()
        else:
            route.continue_()

    page.route("**/*", refuse)
    page.goto(path.as_uri(), wait_until="load", timeout=30_000)
    read = page.evaluate(READ_PAGE)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True, timeout=30_000)
    shutil.copy(path, ARTIFACTS / f"{name}.html")
    page.close()
    assert not problems, (name, problems)
    read["name"] = name
    return read


def assert_charts_drawn(read: dict[str, Any], expected: set[str]) -> None:
    names = {c["name"] for c in read["charts"]}
    assert expected <= names, (read["name"], expected - names)
    for chart in read["charts"]:
        assert chart["width"] > 300 and chart["marks"] > 0, (read["name"], chart)


def shown_number(text: str) -> float:
    match = re.search(r"-?[\d,]+(?:\.\d+)?", text)
    assert match, text
    return float(match.group().replace(",", ""))


def assert_figures_are_the_json(figures: list[dict[str, str]], doc: dict[str, Any], where: str) -> None:
    """Each figure's value is the document's at its key, and the text a person reads says it."""
    keys = {f["key"] for f in figures}
    assert {"throughput_per_s", "latency_ms.e2e.p50", "latency_ms.e2e.p99", "limit.resource"} <= keys, where
    for figure in figures:
        value: Any = doc
        for part in figure["key"].split("."):
            value = value[part]
        if value is None:
            assert figure["value"] == "" and not re.search(r"\d", figure["text"]), (where, figure)
        elif isinstance(value, float | int):
            assert float(figure["value"]) == value, (where, figure)
            assert shown_number(figure["text"]) == pytest.approx(value, abs=0.051, rel=0.005), (where, figure)
        else:
            assert figure["value"] == str(value) and figure["text"] == str(value), (where, figure)


def test_every_kind_of_report_opens_offline_draws_its_charts_and_shows_the_jsons_figures(
    cli: Cli, browser: Any
) -> None:
    paced = f"-fill-db 600 -rate 300 {SHAPE}"
    runs = {
        "run": f"{paced} -chaos kill-connection@1s -json run.json -report run.html",
        "compare": f"-compare seed,indexed/notify -fill-db 400 -rate 400 {SHAPE} -json compare.json"
        " -report compare.html",
        "sweep": f"-sweep rate=100,400 -step 1 -settle 1 {SHAPE} -claim indexed -wakeup notify"
        " -json sweep.json -report sweep.html",
    }
    for name, args in runs.items():
        done = cli.run(args)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    # two runs of other settings (a run and a sweep): one run fewer, and the page says how they differ
    argv = "diff run.json sweep.json --allow-different -json diff.json -report diff.html"
    diff = cli.run_argv([sys.executable, "-m", "pgmq_sim", *argv.split()])
    assert diff.returncode in (0, 4), (diff.stdout, diff.stderr)  # 4: a figure got worse beyond noise
    docs = {name: json.loads((cli.workdir / f"{name}.json").read_text()) for name in (*runs, "diff")}

    run = open_page(browser, cli.workdir / "run.html", "run")
    assert_charts_drawn(run, {"run-timeline", "run-waits"})
    assert_figures_are_the_json(run["values"][0]["figures"], docs["run"], "run")
    assert docs["run"]["faults"], "the run's fault is drawn on its timeline"

    compared = open_page(browser, cli.workdir / "compare.html", "compare")
    assert_charts_drawn(compared, {"cells", "cells-timeline", "cell1-timeline", "cell2-timeline"})
    cells = docs["compare"]["runs"]
    assert len(cells) == 2
    for index, cell in enumerate(cells):
        assert_figures_are_the_json(compared["values"][index]["figures"], cell, f"compare cell {index + 1}")
    side_by_side = [f for f in compared["top"] if f["key"] == "throughput_per_s"]
    assert [float(f["value"]) for f in side_by_side] == [c["throughput_per_s"] for c in cells]

    swept = open_page(browser, cli.workdir / "sweep.html", "sweep")
    assert_charts_drawn(swept, {"run-timeline", "run-knee"})
    assert_figures_are_the_json(swept["values"][0]["figures"], docs["sweep"], "sweep")
    knee = [f for f in swept["values"][0]["figures"] if f["key"] == "sweep.max_sustainable_per_s"]
    assert knee and knee[0]["value"] == str(docs["sweep"]["sweep"]["max_sustainable_per_s"] or "")

    diffed = open_page(browser, cli.workdir / "diff.html", "diff")
    assert_charts_drawn(diffed, {"diff-timeline"})
    by_run = {v["run"]: v["figures"] for v in diffed["values"]}
    assert_figures_are_the_json(by_run["base"], docs["run"], "diff base")
    assert_figures_are_the_json(by_run["new"], docs["sweep"], "diff new")
    assert docs["diff"]["settings_differ"], "a run and a sweep differ in their settings"
    worse = [f for f in diffed["top"] if f["key"] == "worse"]
    assert worse and worse[0]["value"] == ",".join(docs["diff"]["worse"])
