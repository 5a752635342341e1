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


def run(cli: Cli, name: str, work: str) -> None:
    result = cli.run(RUN, f"-work-ms {work} -json {name}.json")
    assert result.returncode == 0, result.stdout + result.stderr


def test_runs_of_one_setting_are_within_noise_and_four_times_the_work_is_worse(cli: Cli) -> None:
    run(cli, "a", "2-2")
    run(cli, "b", "2-2")
    run(cli, "c", "8-8")
    same = cli.run_argv(diff_argv("diff", "a.json", "b.json", "-json", "ab.json"))
    assert same.returncode == 0, same.stdout + same.stderr
    figures = json.loads((cli.workdir / "ab.json").read_text())["figures"]
    verdicts = {f["figure"]: f["verdict"] for f in figures}
    assert [verdicts[f] for f in ("throughput", "e2e-p50", "e2e-p99")] == ["~", "~", "~"], figures

    refused = cli.run_argv(diff_argv("diff", "a.json", "c.json"))
    assert_one_line_error(refused, 2, "work_ms: 2-2 -> 8-8", "--allow-different")
    slower = cli.run_argv(diff_argv("diff", "a.json", "c.json", "--allow-different", "-json", "ac.json"))
    assert slower.returncode == 4, slower.stdout + slower.stderr
    doc = json.loads((cli.workdir / "ac.json").read_text())
    verdicts = {f["figure"]: f["verdict"] for f in doc["figures"]}
    assert verdicts["e2e-p50"] == "worse" and verdicts["e2e-p99"] == "worse", verdicts
    assert "e2e-p99" in doc["worse"] and doc["settings_differ"] == ["work_ms: 2-2 -> 8-8"]
    assert slower.stdout.splitlines()[0] == "settings differ: work_ms: 2-2 -> 8-8"
    assert "worse beyond noise: e2e-p99 (exit 4)" in slower.stdout


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
