"""The HTML report's renderer, on results built by hand (no server): a single run, the latency split
once the result carries it, a comparison and a diff. The browser test (test_report_browser.py) opens
real runs' reports."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from builders import settings
from rich.console import Console

from pgmq_sim.errors import UsageError
from pgmq_sim.model.checks import Check
from pgmq_sim.model.events import Fault
from pgmq_sim.model.keys import KeyDistribution
from pgmq_sim.model.kinds import Outcome
from pgmq_sim.render.files import result_document
from pgmq_sim.render.lines import producer_text, trigger_text
from pgmq_sim.render.pressure import recovery_text
from pgmq_sim.render.report import check_report_path, diff_report, lookup, run_report
from pgmq_sim.render.side_by_side import print_comparison
from pgmq_sim.render.terminal import print_summary
from pgmq_sim.render.tracks import MOST_POINTS, Track
from pgmq_sim.result.claims import INDEX, ClaimAccount, ClaimBook, ClaimReason
from pgmq_sim.result.costs import BystanderResult, ClientCost, ProcessCpu
from pgmq_sim.result.phased import PhaseResult
from pgmq_sim.result.run import ProducerFigures, RunResult
from pgmq_sim.result.stats import WorkerStats
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.result.waits import WaitProfile
from pgmq_sim.verdicts.cause import MeasuredCause, Resource
from pgmq_sim.verdicts.checks import CheckResult
from pgmq_sim.verdicts.diff import compare, diff_json, setting_differences, worse
from pgmq_sim.verdicts.hidden import HiddenAccount
from pgmq_sim.verdicts.server_waits import lock_text, waits_text
from pgmq_sim.verdicts.verdict import judge_run

pytestmark = pytest.mark.unit

SECONDS = 10  # whole seconds: a diff judges their series (8 or more)


def document(run: RunResult) -> dict[str, Any]:
    return result_document(run, judge_run(run))


def result(strategy: str = "seed", per_second: int = 50, faults: tuple[Fault, ...] = ()) -> RunResult:
    """A paced run of SECONDS seconds by hand: each worker processed its share at 8 ms end to end."""
    processed = per_second * SECONDS
    stats = []
    for i in range(6):
        s = WorkerStats(name=f"w{i + 1}", queue_type=("type1", "type2", "type3")[i % 3])
        for _ in range(processed // 6):
            s.record_processed(8.0, 0.005, 0.004)
            s.claim.record_ms(0.3)
            s.complete.record_ms(0.5)
        stats.append(s)
    timeline = [
        SecondSample(
            second, per_second, per_second - (second % 3), second % 4, 7.0, 9.0, 12.0 + second, 5, per_second
        )
        for second in range(SECONDS)
    ]
    return RunResult.from_stats(
        settings=settings(fill_db=processed, rate=per_second, claim=strategy),
        server="embedded PostgreSQL 17 (test)",
        strategy=strategy,
        ordered=True,
        files={},
        produced=processed,
        elapsed_s=float(SECONDS),
        outcome=Outcome.COMPLETED,
        stats=stats,
        keys=KeyDistribution(processed, 6, {"type1": 2, "type2": 2, "type3": 2}, (), True, 1 / 6),
        timeline=timeline,
        health=None,
        audit=None,
        faults=faults,
    )


def cohort(e2e: float, due: float, ordering: float, capacity: float, hidden: float) -> dict[str, Any]:
    service = e2e - due - ordering - capacity - hidden
    return {
        "messages": 10,
        "e2e_ms": e2e,
        "due_ms": due,
        "ordering_ms": ordering,
        "capacity_ms": capacity,
        "hidden_ms": hidden,
        "service_ms": service,
    }


LATENCY_SPLIT = {
    "parts": ["due", "ordering", "capacity", "hidden", "service"],
    "overall": {"median": cohort(8, 0, 1, 1, 0.5), "p99": cohort(40, 0, 12, 6, 17)},
    "per_type": {
        "type1": {"median": cohort(8, 0, 1, 1, 0.5), "p99": cohort(31, 0, 10, 5, 11)},
        "type2": {"median": cohort(9, 0, 2, 1, 0.5), "p99": cohort(55, 0, 9, 4, 37)},
    },
}
HIDDEN = HiddenAccount(  # what hid the slowest 1%, as verdicts/hidden explains it
    17.0,
    40.0,
    (
        MeasuredCause(
            Resource.LOCKS, "pid 4242 (report job) held 60 advisory locks from 4.0 s to 29.0 s", share=0.85
        ),
    ),
    "the lock census (20 samples), 0 outage(s), the wake-up (poll)",
).as_json()


class Page(HTMLParser):
    """What a test reads from a page: the charts, their marks, the figures with their keys."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.charts: list[str] = []
        self.marks: dict[str, int] = {}
        self.values: list[tuple[str, str]] = []
        self.tags: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "figure" and a.get("data-chart"):
            self.charts.append(str(a["data-chart"]))
            self.marks[self.charts[-1]] = 0
        if self.charts and (a.get("id") or "").startswith("mark-"):
            self.marks[self.charts[-1]] += 1
        if a.get("data-key") is not None:
            self.values.append((str(a["data-key"]), str(a.get("data-value"))))


def test_a_run_report_leads_with_the_answer_and_fetches_nothing() -> None:
    faults = (
        Fault(5.0, "kill-connection", "killed 2 of 6 worker connections"),
        Fault(9.0, "kill-connection", "killed 1 of 6 worker connections"),
    )
    doc = document(result(faults=faults))
    html = run_report([doc], "test")
    page = Page(html)
    assert page.charts == ["run-timeline"]
    assert page.marks["run-timeline"] >= 4  # processed, arrived, backlog, p50..p99, faults
    # no script, nothing fetched from elsewhere, a policy that forbids it
    assert "script" not in page.tags
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
    assert "default-src 'none'" in html
    # the answer's figures are the document's
    shown = dict(page.values)
    assert float(shown["throughput_per_s"]) == doc["throughput_per_s"]
    assert float(shown["latency_ms.e2e.p99"]) == doc["latency_ms"]["e2e"]["p99"]
    assert shown["limit.resource"] == doc["limit"]["resource"]
    # the answer comes before the charts, the tables, the advice and the scenario
    order = [
        html.index(s)
        for s in (
            'id="run-answer"',
            'id="run-time"',
            'id="run-tables"',
            'id="run-advice"',
            'id="run-scenario"',
        )
    ]
    assert order == sorted(order)
    # repeated faults are one row of the table, each still listed below it
    assert re.search(r"<td>kill-connection</td><td class=\"n\">2</td>", html)
    # no latency split yet: no chart for it
    assert 'id="run-split"' not in html


@pytest.mark.parametrize("cpu_s,limited", [(1.7, True), (1.68, False)])  # 85% of a core is the limit
def test_the_client_is_judged_the_limit_in_its_own_place_in_the_document_and_the_report(
    cpu_s: float, limited: bool
) -> None:
    client = ClientCost((ProcessCpu("local", cpu_s=cpu_s, elapsed_s=2.0, messages=500),))
    doc = document(dataclasses.replace(result(), client=client))
    assert doc["client"]["limited"] is limited
    keys = ["cpu_s", "cpu_us_per_msg", "logins", "core_share_max", "limited", "processes"]
    assert list(doc["client"]) == keys
    assert ("the client was the limit" in run_report([doc], "test")) is limited


def test_the_latency_split_draws_a_stacked_bar_per_cohort_and_type_when_the_result_carries_it() -> None:
    doc = document(result()) | {"latency_split": LATENCY_SPLIT, "hidden": HIDDEN}
    html = run_report([doc], "test")
    page = Page(html)
    assert "run-split" in page.charts
    # a bar per part and per cohort: overall, type1 and type2, each median and p99
    assert page.marks["run-split"] == 5 * 6
    assert "type2, p99" in html and "60 advisory locks" in html and "pid 4242 (report job)" in html
    assert '<td>locks</td><td class="n">85%</td>' in html
    assert "Unexplained: 15% of it has no cause the run measured" in html
    # the slowest p99 cohort's type comes first
    assert html.index("type2, p99") < html.index("type1, p99")
    # null: not measured, no chart
    bare = doc | {"latency_split": None, "timeline": []}  # no second drawn either: only the split is asked
    assert doc["waits"] is None and Page(run_report([bare], "test")).charts == []


def test_a_comparison_shows_its_cells_side_by_side() -> None:
    docs = [document(result("seed", 40)), document(result("indexed", 60))]
    html = run_report(
        docs,
        "test",
        failed=[{"strategy": "fifo", "wakeup": "poll", "tx": "single", "error": "it broke"}],
        compare=True,
    )
    page = Page(html)
    assert page.charts[:2] == ["cells", "cells-timeline"]
    assert {"cell1-timeline", "cell2-timeline"} <= set(page.charts)
    assert all(page.marks[name] > 0 for name in page.charts)
    throughputs = [float(v) for k, v in page.values if k == "throughput_per_s"]
    assert throughputs[:2] == [docs[0]["throughput_per_s"], docs[1]["throughput_per_s"]]
    assert "did not run: it broke" in html


def test_a_comparison_shows_each_designs_checks_beside_its_audit() -> None:
    """-compare with -check: each design's checks, passed or which it breached, in the table and
    the report (a run that exits 4 says which designs breached)."""
    p99 = Check("e2e-p99", "<", 250, "ms")
    held, breached = CheckResult(p99, 120.0, True), CheckResult(p99, 900.0, False)
    runs = [result("indexed", 60), result("pgmq", 10)]
    verdicts = [dataclasses.replace(judge_run(runs[0]), checks=(held,)),
                dataclasses.replace(judge_run(runs[1]), checks=(breached,))]  # fmt: skip
    console = Console(file=io.StringIO(), width=220)
    print_comparison(console, runs, verdicts)
    rows = [line for line in console.file.getvalue().splitlines() if "indexed" in line or "pgmq" in line]
    assert "passed" in rows[0] and "failed: e2e-p99<250" in rows[1], rows
    documents = [result_document(r, v) for r, v in zip(runs, verdicts, strict=True)]
    page = Page(run_report(documents, "test", compare=True))
    assert [v for k, v in page.values if k == "checks"] == ["", "e2e-p99<250"]


def test_a_diff_shows_both_runs_and_what_moved_beyond_the_noise() -> None:
    base = document(result(per_second=50))
    new = copy.deepcopy(base)
    new["throughput_per_s"] = 25.0
    for second in new["timeline"]:
        second["processed"] //= 2
    changes = compare(base, new)
    failing = worse(changes, ("throughput",))
    diff = diff_json(setting_differences(base, new), changes, failing)
    html = diff_report(base, new, ("base.json", "new.json"), diff, ("throughput",), "test")
    page = Page(html)
    assert page.charts == ["diff-timeline"] and page.marks["diff-timeline"] > 0
    assert dict(page.values)["worse"] == "throughput"
    assert re.search(r'<tr class="moved"><td>throughput</td>', html)
    assert [float(v) for k, v in page.values if k == "throughput_per_s"] == [base["throughput_per_s"], 25.0]


def test_lookup_reads_a_dotted_path() -> None:
    doc = {"latency_ms": {"e2e": {"p99": 3.5}}}
    assert lookup(doc, "latency_ms.e2e.p99") == 3.5
    assert lookup(doc, "latency_ms.claim.p99") is None


def summary(run: RunResult, verbose: bool = False) -> list[str]:
    out = io.StringIO()
    print_summary(Console(file=out, width=120), run, judge_run(run), verbose)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("after_ms,why", [(0.55, None), (1.5, "disagree: the server changed")])
def test_a_bystanders_comparison_is_judged_once_and_shown_in_each_view(
    after_ms: float, why: str | None
) -> None:
    def p50(ms: float) -> dict[str, float | None]:
        return {"p50": ms, "p99": ms * 3}

    bystander = BystanderResult(50, 500, 0, p50((0.5 + after_ms) / 2), p50(0.6), p50(0.5), p50(after_ms))
    run = dataclasses.replace(result(), bystander=bystander)
    doc = document(run)["bystander"]
    measured = ["rate", "transactions", "errors", "latency_ms", "alone_latency_ms"]
    assert list(doc) == [*measured, "alone_before_ms", "alone_after_ms", "comparable", "incomparable_because"]
    assert doc["comparable"] is (why is None) and (doc["incomparable_because"] is None) is (why is None)
    said = " ".join(" ".join(summary(run, verbose=True)).replace("│", " ").split())
    html = run_report([document(run)], "test")
    if why is None:
        assert "; comparable" in said and "; comparable." in html
    else:
        assert f"not comparable: {doc['incomparable_because']}" in html and why in doc["incomparable_because"]
        assert "not comparable: alone before (0.5 ms) and after (1.5 ms)" in said


@pytest.mark.parametrize("server_ms", [None, 4.0])
def test_the_documents_claims_say_where_their_costs_were_measured_after_the_figures(
    server_ms: float | None,
) -> None:
    book = ClaimBook()
    book.took[INDEX[ClaimReason.NOTIFIED]], book.empty[INDEX[ClaimReason.NOTIFIED]] = 500, 20
    claims = dataclasses.replace(
        ClaimAccount.of([book], 500, 10.0, 300.0, None, "c"), server_empty_ms=server_ms
    )
    doc = document(dataclasses.replace(result(), claims=claims))["claims"]
    assert list(doc)[-4:] == ["without_outside", "sources", "summary", "inflated_by_outside"]
    assert doc["sources"] == {
        "client_s": "an empty claim's own CPU time on the loop (the worker's code from its wake-up to its"
        " next wait, its round trips' sends and reads; the loop's dispatch apart), measured on one claim"
        " in several and counted at their mean by reason",
        "server": None if server_ms is None else "pg_stat_statements, the empty claims' share by count",
    }


def test_the_views_say_the_producers_pace_its_triggers_and_a_phases_recovery() -> None:
    kept = "1,000 offered, 950 written on time (95%), 1,000 by the end"
    assert producer_text(ProducerFigures(1000, 950, 1000, 0)) == kept
    behind = "1,000 offered, 400 written on time (40%), 800 by the end"
    stalled = "; nothing written in 3 s while messages were due"
    assert producer_text(ProducerFigures(1000, 400, 800, 3)) == behind + stalled
    calls = (("msg_queue_notify()", 3000, 63.0), ("idle()", 0, 0.0))
    timed = SimpleNamespace(triggers=calls, triggers_untimed=None)  # what trigger_text reads of an account
    assert trigger_text(timed) == "msg_queue_notify() 0.021 ms a call, 3,000 calls"
    untimed = SimpleNamespace(triggers=(), triggers_untimed="track_functions is none")
    assert trigger_text(untimed) == "triggers not timed: track_functions is none"
    phase = PhaseResult(
        "after", None, 30.0, 20.0, 100.0, 100.0, {}, 0, 0, None, None, None, "", None, None, None
    )
    assert recovery_text(phase) == ""
    recovered = dataclasses.replace(phase, recovery_s=4.2, recovered=True)
    assert recovery_text(recovered) == "recovered in 4,200 ms"
    assert recovery_text(dataclasses.replace(phase, recovered=False)) == "not recovered in 20.0 s"


def test_the_servers_waits_are_said_by_class_with_their_lock_and_other_events() -> None:
    counts = (("cpu", 120), ("locks", 60), ("other", 30), ("io", 1))  # io under 1%: left unsaid
    others = (("Timeout:PgSleep", 20), ("IPC:SyncRep", 5), ("A:b", 3), ("C:d", 2))  # the first three
    waits = WaitProfile(100, counts, (("tuple", 50), ("relation", 10)), (), others)
    assert waits_text(waits) == (
        "on CPU 57%, Lock (waiting on another transaction's row or lock) 28% [Lock: tuple 83%, relation 17%],"
        " other waits 14% [Timeout:PgSleep 67%, IPC:SyncRep 17%, A:b 10%] (2.1 backends in a transaction on"
        " average)"
    )
    assert waits_text(WaitProfile(0, (), (), (), ())) == "no backend was seen in a transaction"
    assert lock_text(WaitProfile(50, (("client", 40),), (), (), ())) == ""


DAY_S = 86_400
SPIKE_MS = 21_800.0  # the soak: one second's p99 among seconds of 15 ms


def test_a_days_report_draws_as_small_as_a_minutes_and_keeps_its_one_second_spike() -> None:
    """A day of seconds is drawn in buckets (rates their mean, p95/p99 their worst second): the page is
    as small as a short run's, the JSON keeps every second, and one second's p99 spike stays drawn
    (the p99 series holds it, the latency axis reaches it), as does a minute's stall."""
    spike_at, stall = DAY_S // 3, range(2 * DAY_S // 3, 2 * DAY_S // 3 + 60)
    noise = [(s * 7919) % 11 for s in range(DAY_S)]  # seconds that differ: no line simplifies away
    timeline = tuple(
        SecondSample(s, 50, 0 if s in stall else 45 + n, n, 7.0, 9.0 + n, 12.0 + n, 5, 50)
        if s != spike_at
        else SecondSample(s, 50, 45, n, 7.0, 9.0, SPIKE_MS, 5, 50)
        for s, n in zip(range(DAY_S), noise, strict=True)
    )
    run = dataclasses.replace(result(), timeline=timeline, elapsed_s=float(DAY_S))
    doc = document(run)
    assert len(doc["timeline"]) == DAY_S and doc["timeline"][spike_at]["e2e_p99_ms"] == SPIKE_MS
    track = Track.of(doc, "day")
    assert len(track.seconds) <= MOST_POINTS and track.bucket_s == 144
    assert max(track.percentiles["e2e_p99_ms"]) == SPIKE_MS
    assert min(track.processed) < 45 * 0.7  # 60 s of nothing in a bucket of 144 s
    html = run_report([doc], "test")
    short = run_report([document(result())], "test")
    assert len(html) < 2 * len(short) and len(html) < 150_000, (len(html), len(short))
    chart = html[html.index('data-chart="run-timeline"') :]
    texts = [t for t in re.findall(r"<text[^>]*>([^<]*)</text>", chart) if t.strip()]
    latency = texts[next(i for i, t in enumerate(texts) if t.startswith("seconds since the workers")) :]
    ticks = [float(t.replace(",", "")) for t in latency if re.fullmatch(r"[\d,.]+", t)]
    assert max(ticks) >= SPIKE_MS * 0.9, latency  # the axis is drawn up to the spike


def test_an_episode_is_shaded_on_the_timeline_and_listed_in_the_answer() -> None:
    """A run whose seconds 4 to 6 went 40x worse than the rest: its episode is a row of the answer's
    table, a shaded span of the timeline, and a row of the summary and of -v's detail. At 120/s: a
    second holds enough completions for its p99 to be one (verdicts/episodes.MIN_COMPLETIONS)."""
    run = result(per_second=120)
    timeline = tuple(
        dataclasses.replace(s, e2e_p99_ms=800.0 if 4 <= s.second < 6 else 20.0) for s in run.timeline
    )
    doc = document(dataclasses.replace(run, timeline=timeline))
    assert [(e["from_s"], e["to_s"], e["limit"]) for e in doc["episodes"]] == [(4, 6, "unexplained")]
    html = run_report([doc], "test")
    page = Page(html)
    assert ("episodes", "1") in page.values
    assert 'id="mark-episode-0"' in html
    assert "no lock census (-wait-sample-hz 0), no fault, no connection lost" in html
    edited = dataclasses.replace(run, timeline=timeline)
    short, detail = " ".join(summary(edited)), " ".join(summary(edited, verbose=True))
    for text in (short, detail):
        assert "│ episodes" in text and "from 4 s to 6 s: p99 800 ms against the run's 20 ms" in text, text
    clean = " ".join(summary(run))
    assert "episodes" not in clean, clean


def test_a_summary_of_repeated_faults_fits_a_screen_and_v_lists_each() -> None:
    """Issue 38's case: a server that ended 250 sessions printed 567 lines; one row per kind now."""
    lost = tuple(
        Fault(0.8 * i, "outage", f"not injected: {i} worker connection(s) lost", outage_s=0.2,
              rate_before=50.0, connections_lost=1, recovery_s=0.1)
        for i in range(1, 251)
    )  # fmt: skip
    run = result(faults=lost)
    short = summary(run)
    assert len(short) <= 40, "\n".join(short)
    text = " ".join(" ".join(short).replace("│", " ").split())
    assert "outage x250, 0.8 s to 200.0 s" in text and "out 50.0 s in all" in text
    full = summary(run, verbose=True)
    assert sum(1 for line in full if line.startswith("│ fault ")) == 250


def test_a_report_path_is_checked_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page needs a file to go to and matplotlib to draw its charts: each refusal is one line."""
    with pytest.raises(UsageError, match="give it a file name"):
        check_report_path(Path("-"))
    with pytest.raises(UsageError, match="it is a directory"):
        check_report_path(tmp_path)
    check_report_path(tmp_path / "run.html")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "matplotlib" else real(name)
    )
    with pytest.raises(UsageError, match=r"install the plot extra: pip install '\.\[plot\]'"):
        check_report_path(tmp_path / "run.html")
