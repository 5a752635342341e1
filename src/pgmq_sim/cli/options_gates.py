"""The run's options of --help's section on CI gates and baselines: checks, a baseline to diff
against, JUnit, live metrics."""

from __future__ import annotations

from pgmq_sim.cli.option import Option, Output
from pgmq_sim.cli.outputs import junit_file
from pgmq_sim.model.checks import Check
from pgmq_sim.settings import parse_listen_address
from pgmq_sim.verdicts.checks import parse_checks


def _checks(text: str) -> tuple[Check, ...]:
    return parse_checks(text)


def _listen(text: str) -> tuple[str | None, int]:
    return parse_listen_address(text, "-metrics-port")


GATE_OPTIONS = (
    # -- CI gates and baselines -----------------------------------------------------------------
    Option(
        "check",
        "text",
        "thresholds on reported figures (`e2e-p99<250`, `throughput>=900`, `lost==0`; in a scenario"
        " file an array of them); a breach exits 4; see [CI gates](docs/ci.md#gating-a-ci-with-checks)",
        "gates",
        metavar="EXPR[,EXPR...]",
        setting="checks",
        parse=_checks,
        fallback=lambda _: (),
        form="list",
        example=("-check", "e2e-p99<250,lost==0"),
    ),
    Option(
        "junit",
        "path",
        "the checks and the audit as JUnit XML, one test case each",
        "gates",
        metavar="FILE",
        dest="junit_path",
        place="out",
        output=Output("JUnit", junit_file, rank=3, documents=False),
        example=("-junit", "checks.xml"),
    ),
    Option(
        "check-abort",
        "switch",
        "end the run at the first breach of a check that can only get worse (`lost`), as if"
        " interrupted: the audit still runs",
        "gates",
        default=False,
        example=("-check", "lost==0", "-check-abort"),
    ),
    Option(
        "baseline",
        "path",
        "diff this run against an earlier run's JSON in the summary and the JSON; worse beyond noise"
        " exits 4; see [A baseline](docs/ci.md#a-baseline)",
        "gates",
        metavar="FILE",
        dest="baseline_path",
        place="in",
        conflicts=(
            ("compare", "-baseline diffs one run; drop -compare, or diff a cell's JSON with pgmq-sim diff"),
        ),
        example=("-baseline", "base.json"),
    ),
    Option(
        "drift",
        "switch",
        "judge the drift of a run shorter than ten minutes (at least 60 s); see [Long"
        " runs](docs/ci.md#long-runs-and-drift)",
        "gates",
        default=False,
        example=("-drift", "-duration", "60", "-rate", "100"),
    ),
    Option(
        "metrics-port",
        "text",
        "serve Prometheus metrics at `/metrics` on PORT (0: any free port) for as long as the run"
        " lasts, on every interface or on HOST only (`127.0.0.1:9100`, `[::1]:9100`); see [Live"
        " metrics](docs/ci.md#live-metrics)",
        "gates",
        metavar="[HOST:]PORT",
        setting=("metrics_host", "metrics_port"),
        parse=_listen,
        numbers=True,
        example=("-metrics-port", "127.0.0.1:0"),
    ),
)
