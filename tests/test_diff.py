"""pgmq-sim diff: figure by figure, against the runs' own noise. Runs of one setting come out ~;
four times the work time comes out worse and exits 4."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import Cli, assert_one_line_error

pytestmark = pytest.mark.integration
RUN = "-duration 10 -rate 150 -workers 6 -orders 100 -claim indexed -wakeup notify"


def diff_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgmq_sim", *args]


def run(cli: Cli, name: str, work: str, *more: str) -> str:
    result = cli.run(RUN, f"-work-ms {work} -json {name}.json", *more)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


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
