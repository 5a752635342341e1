"""Every benchmark script in bench/ runs end to end in its quick form (the list in bench/README.md).

They assert that a script runs and prints its figures, never what the figures are: the machine is
shared and noisy. Scripts that take --dsn run against the session's server, in a database of the
test's own; startup.py, faults.py and scenarios.py start (and restart, kill) servers of their own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO


@dataclass(frozen=True)
class Quick:
    args: str  # the quick form, as bench/README.md lists it
    prints: tuple[str, ...]  # text the script prints once its figures are in (table headers, last lines;
    # compared with runs of spaces as one)
    dsn: bool = True  # takes --dsn: run it on the session's server
    timeout_s: float = 240


QUICK: dict[str, Quick] = {
    "claim_account_cost.py": Quick(
        "--repeat 1", ("per message: with the account", "target <= 2%"), dsn=False
    ),
    "audit_cost.py": Quick(
        "--fill-db 500 --repeat 1", ("workload    audit msg/s  no-audit msg/s", "seed shape")
    ),
    "port_throughput.py": Quick(
        "--fill-db 500 --repeat 1",
        ("claim    msg/s  work-only bound/s  work ms  share", "indexed / seed msg/s: "),
    ),
    "ordering_bound.py": Quick(
        "--fill-db 300 --repeat 1", ("all runs share", "advisory ", "share ~ work/cycle x balance.")
    ),
    "wakeup_latency.py": Quick(
        "--fill-db 100 --repeat 1", ("wake-up  e2e p50 ms", "notify ", "poll p50 / notify p50: ")
    ),
    "startup.py": Quick("--repeat 1", ("launch -> first claim", "first claim: "), dsn=False),
    "overhead_vs_pgbench.py": Quick(
        "--clients 6 --messages 1500 --repeat 1 --psycopg",
        ("clients  tool msg/s  pgbench msg/s", "psycopg msg/s", "c=6 all runs msg/s: "),
    ),
    "backlog_scaling.py": Quick(
        "--backlogs 2000,20000 --messages 500 --repeat 1",
        ("claim    backlog    msg/s  messages  1 claim alone ms", "(collapse expected)"),
    ),
    "account_collect.py": Quick(
        "--sizes 2000 --orders 10",
        ("messages  fill s  collect s  client CPU s  server CPU s", "the latency account's collect"),
    ),
    "memory.py": Quick(
        "--sizes 500,1500 --sample-s 0.1",
        ("peak RSS MB", "1,500 - 500", "VmRSS over each run's wall time"),
    ),
    "faults.py": Quick(
        "--fill-db 800 --rate 500 --kill-every 1",
        ("run     elapsed s  msg/s", "faults injected: ", "lost and duplicated messages: "),
        dsn=False,
    ),
    "scenarios.py": Quick(
        "--fill-db 600 --rate 800 --time-scale 0.2 --only no,restart-server",  # each fault: test_faults.py
        ("| scenario | tx | msg/s |", "| restart-server | split |", "split / single without faults: "),
        dsn=False,
        timeout_s=300,
    ),
    "distributed.py": Quick(
        "--messages 600 --repeat 1 --placements shared",
        ("client        shared: us/msg workers", "processes-p2", "pinned = server on core 1"),
    ),
    # a TCP server of their own with a password, for PgBouncer (direct only without pgbouncer)
    "pooler.py": Quick(
        "--fill-db 600 --rate-fill 100 --rate 400 --works 0 --loads rate --repeat 1",
        ("run's path (JSON)", "-work-ms 0, rate", "drain: msg/s is the path's capacity"),
        dsn=False,
    ),
    "statements.py": Quick(
        "--messages 300 --repeat 1 --forms prepare-sql,function-sql-2rt,pipeline-unnamed-2rt",
        ("trips/msg", "pipeline-unnamed-2rt", "x tool's form: msg/s over"),
        dsn=False,
    ),
    "knee.py": Quick(
        "--auto --claims indexed --orders 100 --wakeup notify --step 1 --settle 1 --check-s 2"
        " --workers 4 --work-ms 5-10",
        ("s at the knee", "adaptive sweeps checked from outside"),  # a hold that failed says "no rate held"
    ),
    "phase_overhead.py": Quick(
        "--rate 200 --duration 2 --repeat 1",
        ("run     msg/s  client us/msg", "phased", "the phases' share of the client's CPU per message"),
    ),
    "enqueue.py": Quick(
        "cost --rate 100 --duration 2 --repeat 1",
        ("client us/msg (rounds)", "16 producers / 1:"),
    ),
    "steady_rate.py": Quick(
        "--rates 800 --duration 2 --repeat 1",
        ("wake-up@rate  msg/s  empty/msg", "targets at notify@800:", "client CPU per message"),
    ),
    # a TCP server of its own with a password, for PgBouncer
    "many_workers.py": Quick(
        "--workers 4,40 --duration 2 --repeat 1",
        ("workers  msg/s  client us/msg", "client CPU per message, 40 / 4 workers", "peak RSS at 40 workers"),
        dsn=False,
    ),
    "limits.py": Quick(
        "--cases none --drain 500 --repeat 1",
        ("verdicts", "the offered 50/s was served below every limit", "sampling at 20 Hz costs"),
    ),
    "batch.py": Quick(
        "--fill-db 500 --repeat 1",
        ("commits/msg  client us/msg", "indexed -batch 10", "examples/jobs -batch 10"),
    ),
    "seeds.py": Quick(
        "--messages 300 --course-messages 200 --repeat 1",
        ("seed figure", "002 next-attempt, -batch 10", "001 claim with skip locked", "the tool at"),
    ),
    "skew.py": Quick(
        "--step 1 --settle 0.5 --steps 2",
        ("rate by rate (last round)", "hot cap/s", "zipf:1.2 / uniform: knee "),
    ),
}


def layer(quick: Quick) -> pytest.MarkDecorator:
    """integration on the session's server; faults where the script starts servers of its own."""
    return pytest.mark.integration if quick.dsn else pytest.mark.faults


@pytest.mark.parametrize(
    "script",
    [pytest.param(name, marks=layer(quick), id=name.removesuffix(".py")) for name, quick in QUICK.items()],
)
def test_bench_runs_in_its_quick_form(script: str, request: pytest.FixtureRequest) -> None:
    quick = QUICK[script]
    argv = [sys.executable, f"bench/{script}", *quick.args.split()]
    if quick.dsn:
        argv += ["--dsn", request.getfixturevalue("dsn")]
    env = {k: v for k, v in os.environ.items() if k != "PGMQ_SIM_DSN"}
    # a session of its own: on a timeout the script goes with the pgmq-sim and pgbench it started
    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=quick.timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{script} still running after {quick.timeout_s:g} s\n{stdout[-4000:]}\n{stderr[-4000:]}")
    said = f"exit {proc.returncode}\n--- stdout\n{stdout[-4000:]}\n--- stderr\n{stderr[-4000:]}"
    assert proc.returncode == 0, said
    assert "Traceback" not in stdout + stderr, said
    printed = " ".join(stdout.split())  # a table's padding moves with its widest figure
    for needle in quick.prints:
        assert " ".join(needle.split()) in printed, (needle, said)


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
