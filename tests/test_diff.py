"""pgmq-sim diff: figure by figure, against the runs' own noise. Runs of one setting come out ~;
four times the work time comes out worse and exits 4."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import Cli, assert_one_line_error

from pgmq_sim.verdicts.diff import compare

# WAL is the cluster's: at 400/s what other databases write (an autovacuum) weighs little per message
RUN = "-duration 10 -rate 400 -workers 12 -orders 100 -claim indexed -wakeup notify"


def diff_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgmq_sim", *args]


def run(cli: Cli, name: str, work: str, *more: str) -> str:
    result = cli.run(RUN, f"-work-ms {work} -json {name}.json", *more)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.integration
@pytest.mark.alone
def test_runs_of_one_setting_are_within_noise_and_four_times_the_work_is_worse(cli: Cli) -> None:
    run(cli, "a", "5-5")
    shown = run(cli, "b", "5-5", "-baseline a.json")  # the run diffs itself against a, in the summary
    assert "against -baseline a.json" in shown and "worse than the baseline" not in shown, shown
    against_a = json.loads((cli.workdir / "b.json").read_text())["baseline"]
    assert against_a["path"] == "a.json" and against_a["worse"] == [] and against_a["settings_differ"] == []
    run(cli, "c", "20-20")
    same = cli.run_argv(diff_argv("diff", "a.json", "b.json", "-json", "ab.json"))
    assert same.returncode == 0, same.stdout + same.stderr
    figures = json.loads((cli.workdir / "ab.json").read_text())["figures"]
    verdicts = {f["figure"]: f["verdict"] for f in figures}
    assert [verdicts[f] for f in ("throughput", "e2e-p50", "e2e-p99")] == ["~", "~", "~"], figures

    refused = cli.run_argv(diff_argv("diff", "a.json", "c.json"))
    assert_one_line_error(refused, 2, "work_ms: 5-5 -> 20-20", "--allow-different")
    slower = cli.run_argv(diff_argv("diff", "a.json", "c.json", "--allow-different", "-json", "ac.json"))
    assert slower.returncode == 4, slower.stdout + slower.stderr
    doc = json.loads((cli.workdir / "ac.json").read_text())
    verdicts = {f["figure"]: f["verdict"] for f in doc["figures"]}
    assert verdicts["e2e-p50"] == "worse" and verdicts["e2e-p99"] == "worse", verdicts
    assert "e2e-p99" in doc["worse"] and doc["settings_differ"] == ["work_ms: 5-5 -> 20-20"]
    assert slower.stdout.splitlines()[0] == "settings differ: work_ms: 5-5 -> 20-20"
    last = slower.stdout.splitlines()[-1]  # other figures may move with the work time too (WAL)
    assert last.startswith("worse beyond noise: ") and "e2e-p99" in last and last.endswith("(exit 4)"), last


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,needles",
    [
        (["diff", "nothere.json", "nothere.json"], ["cannot read nothere.json"]),
        (["diff", "x.json", "x.json", "-fail-on", "speed"], ["-fail-on 'speed'", "throughput"]),
    ],
)
def test_bad_diff_input(cli: Cli, args: list[str], needles: list[str]) -> None:
    (cli.workdir / "x.json").write_text("{}")
    assert_one_line_error(cli.run_argv(diff_argv(*args)), 2, *needles)


def seconds_doc(p50s: list[float], **more: object) -> dict[str, object]:
    timeline = [{"processed": 100, "e2e_p50_ms": v, "e2e_p99_ms": 3 * v} for v in [0.0, *p50s, 0.0]]
    latency = {"e2e": {"p50": sorted(p50s)[len(p50s) // 2], "p99": max(p50s) * 3}}
    return {"settings": {}, "throughput_per_s": 100.0, "timeline": timeline, "latency_ms": latency, **more}


def verdict_of(name: str, base: dict[str, object], new: dict[str, object]) -> str:
    return next(c.verdict for c in compare(base, new) if c.name == name)


@pytest.mark.unit
def test_a_change_must_pass_the_test_the_spread_and_the_floor() -> None:
    steady = [5.0 + (i % 3) * 0.05 for i in range(12)]
    assert verdict_of("e2e-p50", seconds_doc(steady), seconds_doc([v * 1.12 for v in steady])) == "~"
    assert verdict_of("e2e-p50", seconds_doc(steady), seconds_doc([v * 1.5 for v in steady])) == "worse"
    assert verdict_of("e2e-p50", seconds_doc(steady), seconds_doc([v * 0.6 for v in steady])) == "better"
    # one noisy episode in the new run moves few seconds: the median second decides
    episode = [*steady[:10], 40.0, 45.0]
    assert verdict_of("e2e-p50", seconds_doc(steady), seconds_doc(episode)) == "~"
    # a p99's seconds move more between runs of one setting (17 to 11.5 ms, back to back): its floor
    assert verdict_of("e2e-p99", seconds_doc(steady), seconds_doc([v * 0.7 for v in steady])) == "~"
    assert verdict_of("e2e-p99", seconds_doc(steady), seconds_doc([v * 1.4 for v in steady])) == "~"
    assert verdict_of("e2e-p99", seconds_doc(steady), seconds_doc([v * 1.6 for v in steady])) == "worse"


@pytest.mark.unit
def test_a_knee_is_judged_against_its_resolution_and_its_repeats() -> None:
    def sweep(knee: float, noise: list[dict[str, object]]) -> dict[str, object]:
        adaptive = {"resolution_reached": 0.05, "noise": noise}
        return seconds_doc([5.0] * 10, sweep={"max_sustainable_per_s": knee, "adaptive": adaptive})

    assert verdict_of("knee", sweep(1000, []), sweep(920, [])) == "worse"  # -8%: beyond 5%
    # with -repeat 3, 900/s passed twice and failed once: the knee is only known to within 10%
    disagreed = [{"rate": 900, "runs": 3, "passed": 2, "achieved_per_s": [899, 900, 870]}]
    assert verdict_of("knee", sweep(1000, disagreed), sweep(920, [])) == "~"
    spread = [{"rate": 1000, "runs": 3, "passed": 3, "achieved_per_s": [1000, 880, 990]}]
    assert verdict_of("knee", sweep(1000, spread), sweep(920, [])) == "~"


@pytest.mark.unit
def test_wal_per_message_allows_for_a_checkpoints_full_page_images() -> None:
    """A checkpoint inside one run logs whole pages: WAL per message +25% with 0.04 more full-page
    images per message (up to 330 B) is that checkpoint, not the queue; without them it is worse."""

    def cost(wal: float, fpi: float) -> dict[str, object]:
        return seconds_doc([5.0] * 10, server_cost={"wal_bytes_per_msg": wal, "wal_fpi_per_msg": fpi})

    assert verdict_of("wal-per-msg", cost(1000, 0.01), cost(1250, 0.05)) == "~"
    assert verdict_of("wal-per-msg", cost(1000, 0.01), cost(1250, 0.01)) == "worse"
    assert verdict_of("wal-per-msg", cost(1000, 0.01), cost(1100, 0.01)) == "~"  # within 15%
