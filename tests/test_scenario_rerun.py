"""A scenario file runs, and the JSON of its run reruns it: `-config result.json` reads back the
scenario the run recorded (its defaults filled in, its drawn seed), so the second run has the first
one's settings."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, Cli

pytestmark = pytest.mark.integration


def test_an_example_runs_and_its_json_reruns_with_the_same_settings(cli: Cli) -> None:
    (cli.workdir / "examples").symlink_to(REPO / "examples")
    # the seed's scenario (100,000 messages at 100/s, 12 workers, deleted) made small by flags
    first = cli.run("-config examples/seed.toml -fill-db 300 -rate 0 -work-ms 0-1 -json first.json")
    assert first.returncode == 0, first.stdout + first.stderr
    doc = json.loads((cli.workdir / "first.json").read_text())
    sources, scenario = doc["scenario_sources"], doc["scenario"]
    assert (sources["delmsg"], sources["workers"], sources["fill-db"], sources["orders"]) == (
        "file",
        "file",
        "flag",
        "default",
    )
    assert scenario["delmsg"] is True and scenario["fill-db"] == 300 and scenario["orders"] == 2
    assert scenario["seed"] == doc["settings"]["seed"]  # drawn, and kept: a rerun replays it
    assert "json" in scenario and doc["settings"]["delmsg"] is True and doc["processed"] == 300

    second = cli.run("-config first.json -json second.json")
    assert second.returncode == 0, second.stdout + second.stderr
    again = json.loads((cli.workdir / "second.json").read_text())
    assert all(again["scenario_sources"][key] == "file" for key in ("delmsg", "fill-db", "seed", "work-ms"))
    assert again["scenario_sources"]["json"] == "flag"  # the first run's output is not rerun over
    before, after = doc["settings"], again["settings"]
    assert before.pop("json_path") == "first.json" and after.pop("json_path") == "second.json"
    assert after == before
    assert again["audit"]["verdict"] == "pass" and again["processed"] == 300
