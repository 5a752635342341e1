"""-check thresholds and -junit: what a CI gates on. A breach exits 4 and names the check; a check
on a figure the run cannot produce is refused before the run."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from conftest import Cli, Refuse, assert_one_line_error

from pgmq_sim.errors import UsageError
from pgmq_sim.model.checks import Check
from pgmq_sim.verdicts.checks import parse_checks

RUN = "-fill-db 300 -workers 3 -orders 10 -work-ms 0-1 -claim indexed -poll-interval 0.02"


@pytest.mark.unit
def test_check_forms() -> None:
    assert parse_checks("e2e-p99<250, throughput>=900,lost==0,wal-per-msg<=1200B") == (
        Check("e2e-p99", "<", 250, "ms"),
        Check("throughput", ">=", 900, "msg/s"),
        Check("lost", "==", 0, ""),
        Check("wal-per-msg", "<=", 1200, "B"),
    )
    for bad in ("e2e-p99", "p99<3", "e2e-p99<<3", ","):
        with pytest.raises(UsageError):
            parse_checks(bad)


@pytest.mark.integration
def test_a_breached_check_exits_4_names_it_and_fails_its_junit_case(cli: Cli) -> None:
    result = cli.run(RUN, "-check e2e-p99<60000,throughput>=1000000,lost==0 -json out.json -junit out.xml")
    assert result.returncode == 4, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines[-1].startswith("checks breached: throughput>=1000000 (exit 4)"), lines[-3:]
    report = json.loads((cli.workdir / "out.json").read_text())
    verdicts = {c["check"]: c["passed"] for c in report["checks"]}
    assert verdicts == {"e2e-p99<60000": True, "throughput>=1000000": False, "lost==0": True}
    suite = ET.parse(cli.workdir / "out.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "4" and suite.get("failures") == "1"
    failed = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert failed == ["check throughput>=1000000"]


@pytest.mark.integration
def test_passing_checks_exit_0(cli: Cli) -> None:
    result = cli.run(RUN, "-check e2e-p99<60000,lost==0,duplicates==0,missing==0 -json out.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checks passed: 4 of 4" in result.stdout
    assert all(c["passed"] for c in json.loads((cli.workdir / "out.json").read_text())["checks"])


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,needles",
    [
        (f"{RUN} -check speed>3", ["no figure 'speed'", "e2e-p99"]),
        (f"{RUN} -check knee>=100", ["produces no knee", "-sweep rate="]),
        (f"{RUN} -check bystander-p99<5", ["produces no bystander-p99", "-bystander RATE"]),
        (f"{RUN} -no-audit -check duplicates==0", ["produces no duplicates", "drop -no-audit"]),
        (f"{RUN} -check e2e-p99", ["is not a check"]),
    ],
)
def test_a_check_the_run_cannot_produce_is_refused(refuse: Refuse, args: str, needles: list[str]) -> None:
    assert_one_line_error(refuse(args), 2, *needles)
