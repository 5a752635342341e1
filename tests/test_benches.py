"""Every benchmark script in bench/ takes its quick form (the list in bench/README.md), and the
fastest runs end to end. A bench is a measurement, not a check: running each one here cost the suite
minutes and proved only that it printed its headers; what rots unseen is its arguments, and the
shared code all of them run through (bench/_common.py), which the one real run goes through.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO


@dataclass(frozen=True)
class Quick:
    args: str  # the quick form, as bench/README.md lists it
    dsn: bool = True  # takes --dsn


QUICK: dict[str, Quick] = {
    "claim_account_cost.py": Quick("--repeat 1", dsn=False),
    "audit_cost.py": Quick("--fill-db 500 --repeat 1"),
    "port_throughput.py": Quick("--fill-db 500 --repeat 1"),
    "ordering_bound.py": Quick("--fill-db 300 --repeat 1"),
    "wakeup_latency.py": Quick("--fill-db 100 --repeat 1"),
    "startup.py": Quick("--repeat 1", dsn=False),
    "overhead_vs_pgbench.py": Quick("--clients 6 --messages 1500 --repeat 1 --psycopg"),
    "backlog_scaling.py": Quick("--backlogs 2000,20000 --messages 500 --repeat 1"),
    "account_collect.py": Quick("--sizes 2000 --orders 10"),
    "live_audit.py": Quick("--fill-db 600 --rate 300 --window 1 --repeat 1 --account-live-from 0"),
    "memory.py": Quick("--sizes 500,1500 --sample-s 0.1"),
    "faults.py": Quick("--fill-db 800 --rate 500 --kill-every 1", dsn=False),
    "scenarios.py": Quick("--fill-db 600 --rate 800 --time-scale 0.2 --only no,restart-server", dsn=False),
    "distributed.py": Quick("--messages 600 --repeat 1 --placements shared"),
    "pooler.py": Quick(
        "--fill-db 600 --rate-fill 100 --rate 400 --works 0 --loads rate --repeat 1", dsn=False
    ),
    "statements.py": Quick(
        "--messages 300 --repeat 1 --forms prepare-sql,function-sql-2rt,pipeline-unnamed-2rt", dsn=False
    ),
    "knee.py": Quick(
        "--auto --claims indexed --orders 100 --wakeup notify --step 1 --settle 1 --check-s 2"
        " --workers 4 --work-ms 5-10"
    ),
    "phase_overhead.py": Quick("--rate 200 --duration 2 --repeat 1"),
    "enqueue.py": Quick("cost --rate 100 --duration 2 --repeat 1"),
    "steady_rate.py": Quick("--rates 800 --duration 2 --repeat 1"),
    "many_workers.py": Quick("--workers 4,40 --duration 2 --repeat 1", dsn=False),
    "limits.py": Quick("--cases none --drain 500 --repeat 1"),
    "batch.py": Quick("--fill-db 500 --repeat 1"),
    "seeds.py": Quick("--messages 300 --course-messages 200 --repeat 1"),
    "soak.py": Quick("--duration 4 --rate 100 --workers 4 --window 1 --sample-s 1"),
    "skew.py": Quick("--step 1 --settle 0.5 --steps 2"),
}


FASTEST = "claim_account_cost.py"  # about a second
FASTEST_PRINTS = ("per message: with the account", "target <= 2%")  # its figures are in


def bench_module(script: str) -> ModuleType:
    """The bench as a module (bench/ on the path for its _common), its main not run."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(
            f"bench_{script.removesuffix('.py')}", REPO / "bench" / script
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "bench"))


@pytest.mark.unit
@pytest.mark.parametrize("script", [pytest.param(name, id=name.removesuffix(".py")) for name in QUICK])
def test_bench_takes_its_quick_form(script: str) -> None:
    quick = QUICK[script]
    argv = shlex.split(quick.args) + (["--dsn", "postgresql://localhost/x"] if quick.dsn else [])
    try:
        bench_module(script).arguments().parse_args(argv)
    except SystemExit as exc:  # argparse's refusal
        pytest.fail(f"{script} {quick.args}: its arguments refused the quick form (exit {exc.code})")


@pytest.mark.faults  # a server of its own
def test_the_fastest_bench_runs_end_to_end() -> None:
    argv = [sys.executable, f"bench/{FASTEST}", *QUICK[FASTEST].args.split()]
    env = {k: v for k, v in os.environ.items() if k != "PGMQ_SIM_DSN"}
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False)
    said = f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, said
    printed = " ".join(proc.stdout.split())  # a table's padding moves with its widest figure
    for needle in FASTEST_PRINTS:
        assert needle in printed, (needle, said)


@pytest.mark.unit
def test_every_committed_bench_has_a_quick_form() -> None:
    """A bench added to bench/ gets a quick form here, so it cannot rot unnoticed. Files git does
    not track yet (someone's work in progress) are left out; outside a git checkout, all of them."""
    listed = subprocess.run(
        ["git", "ls-files", "bench/*.py"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if listed.returncode == 0 and listed.stdout.strip():
        names = {Path(line).name for line in listed.stdout.split()}
    else:
        names = {path.name for path in (REPO / "bench").glob("*.py")}
    helpers = {name for name in names if name.startswith("_")}  # _common.py and the like: imported, not run
    assert names - helpers == set(QUICK)


@pytest.mark.unit
def test_the_readme_lists_the_quick_forms_the_test_runs() -> None:
    text = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^Quick forms:.*?^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block is not None, "bench/README.md has no 'Quick forms:' paragraph with a sh block"
    listed = dict(re.findall(r"^python bench/(\S+\.py)(.*)$", block.group(1), re.MULTILINE))
    assert {name: " ".join(args.split()) for name, args in listed.items()} == {
        name: quick.args for name, quick in QUICK.items()
    }
