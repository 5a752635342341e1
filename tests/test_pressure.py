"""Runs in phases and the pressures put on them: each pressure built for real on a real server,
watched from outside the tool while it holds, and each phase measured apart in the run's JSON."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import Cli, Refuse
from pooler import temp_role

from pgmq_sim.embedded.postgres import LocalPostgres
from pgmq_sim.errors import UsageError
from pgmq_sim.model.pressure import PhasedRate, Pressure, parse_phases
from pgmq_sim.model.profiles import ConstantRate
from pgmq_sim.result.timeline import SecondSample
from pgmq_sim.verdicts.pressure import recovery, scorecard

PRESSURE_SESSIONS = (
    "select pid, state, backend_xid is not null, backend_xmin is not null, query"
    " from pg_stat_activity where application_name = 'pgmq-sim pressure'"
)
RUN = "-workers 4 -orders 4 -work-ms 1-3 -poll-interval 0.1 -json out.json"


def scenario(workdir: Path, pressure: str, seconds: float = 3) -> str:
    """Three phases at 100/s: baseline, the pressure, recovery."""
    (workdir / "phases.toml").write_text(
        f'[[phase]]\nname = "baseline"\nduration = {seconds}\nrate = 100\n'
        f'[[phase]]\nname = "pressure"\nduration = {seconds}\npressure = "{pressure}"\n'
        f'[[phase]]\nname = "recovery"\nduration = {seconds}\n'
    )
    return "-config phases.toml"


def watched(
    cli: Cli, args: str, dsn: str
) -> tuple[list[list[tuple]], dict, subprocess.CompletedProcess[str]]:
    """Run the tool; meanwhile read the pressure's sessions from pg_stat_activity every 0.1 s."""
    proc = cli.start(args)
    seen: list[list[tuple]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        while proc.poll() is None:
            seen.append(conn.execute(PRESSURE_SESSIONS).fetchall())
            time.sleep(0.1)
    stdout, stderr = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert result.returncode == 0, stderr
    return seen, json.loads((cli.workdir / "out.json").read_text()), result


def phases(document: dict) -> dict[str, dict]:
    return {p["name"]: p for p in document["phases"]}


@pytest.mark.integration
def test_idle_in_tx_holds_an_xid_and_dead_tuples_grow_in_its_phase(cli: Cli, dsn: str) -> None:
    seen, document, _ = watched(cli, f"{RUN} {scenario(cli.workdir, 'idle-in-tx')}", dsn)
    held = [row for rows in seen for row in rows if row[1] == "idle in transaction" and row[2] and row[3]]
    assert held, "no pressure session was idle in transaction with an XID and an xmin"
    by = phases(document)
    assert f"pid {held[0][0]} idle in transaction holding xid" in " ".join(by["pressure"]["faults"])
    assert by["pressure"]["dead_tuples_end"] > by["baseline"]["dead_tuples_end"]
    assert by["baseline"]["recovered"] is None and by["pressure"]["recovered"] is None
    assert by["recovery"]["recovered"] is not None  # measured, one way or the other
    assert by["baseline"]["throughput_per_s"] > 0 and by["pressure"]["e2e_ms"]["p99"] is not None
    assert document["audit"]["verdict"] == "pass"
    accounts = [by[name]["latency_account"]["overall"]["p99"] for name in ("baseline", "pressure")]
    assert all(a["messages"] >= 1 for a in accounts) and accounts[0] != accounts[1]


@pytest.mark.integration
def test_each_sweep_step_has_its_own_latency_account(cli: Cli) -> None:
    result = cli.run("-sweep rate=40,80 -step 2 -workers 4 -poll-interval 0.1 -json out.json")
    assert result.returncode == 0, result.stderr
    steps = json.loads((cli.workdir / "out.json").read_text())["sweep"]["steps"]
    p99s = [s["latency_account"]["overall"]["p99"] for s in steps]
    assert len(p99s) == 2 and all(p["messages"] >= 1 for p in p99s) and p99s[0] != p99s[1]


@pytest.mark.integration
def test_readers_scan_the_queue_in_repeatable_read(cli: Cli, dsn: str) -> None:
    seen, document, _ = watched(cli, f"{RUN} {scenario(cli.workdir, 'readers:2', 2)}", dsn)
    assert max(len(rows) for rows in seen) == 2
    assert any("count(*)" in row[4] for rows in seen for row in rows)
    end = next(
        f
        for f in phases(document)["recovery"]["faults"] + phases(document)["pressure"]["faults"]
        if "readers end" in f
    )
    scans = int(end.split("readers end: ")[1].split()[0].replace(",", ""))  # a count: 4,749
    assert scans > 2, end
    assert phases(document)["recovery"]["recovered"] is not None


@pytest.fixture
def own_cli(own_pg: LocalPostgres, tmp_path: Path) -> Cli:
    return Cli(own_pg.dsn, tmp_path)


@pytest.mark.faults
def test_kill_backends_ends_the_runs_sessions_and_the_audit_passes(own_cli: Cli) -> None:
    result = own_cli.run(f"{RUN} {scenario(own_cli.workdir, 'kill-backends:2')}")
    assert result.returncode == 0, result.stderr
    document = json.loads((own_cli.workdir / "out.json").read_text())
    kills = [f for f in phases(document)["pressure"]["faults"] if "terminated 1 worker backend" in f]
    assert len(kills) >= 4, phases(document)["pressure"]["faults"]
    assert sum(w["connections_lost"] for w in document["workers"]) >= 1
    assert document["audit"]["verdict"] == "pass"
    assert phases(document)["recovery"]["recovered"] is not None


@pytest.mark.faults
def test_pool_exhaustion_takes_the_slots_and_gives_them_back(own_cli: Cli, own_pg: LocalPostgres) -> None:
    seen, document, _ = watched(
        own_cli, f"{RUN} {scenario(own_cli.workdir, 'pool-exhaustion:5')}", own_pg.dsn
    )
    counts = [len(rows) for rows in seen]
    held = counts.index(5)
    assert 0 in counts[held:], "the slots were not given back while the run went on"
    start = next(f for f in phases(document)["pressure"]["faults"] if "pool-exhaustion:" in f)
    assert "5 of 5 idle session(s) held" in start
    assert document["audit"]["verdict"] == "pass"
    assert phases(document)["recovery"]["recovered"] is not None


# -- -suite pressure on a -dsn server, as a plain role -------------------------------------------

SUITE = "-suite pressure -phase 2 -rate 100 -workers 4 -orders 4 -work-ms 1-3 -poll-interval 0.1 -json a.json"
RUN_SESSIONS = 3 + 4 + 1  # the tool's own three (with the live audit), 4 workers, the producer
SuiteRun = tuple[subprocess.CompletedProcess[str], dict[str, dict]]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SuiteRun]:
    """The suite once, on a server of its own, as a plain role whose CONNECTION LIMIT leaves 3 slots
    beside the run's: readers:4 cannot have its 4 sessions (the path cannot take it), pool-exhaustion
    finds no spare slot (not injected), restart-server is not allowed on a -dsn server."""
    with LocalPostgres() as server, temp_role(server.dsn, "suite", "suite-pw") as role:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"alter role suite connection limit {RUN_SESSIONS + 3}")
        cli = Cli(role.dsn, tmp_path_factory.mktemp("suite"))
        result = cli.run(SUITE, timeout=300)
        document = json.loads((cli.workdir / "a.json").read_text())
        yield result, {c["pressure"].partition(":")[0]: c for c in document["suite"]["cells"]}


@pytest.mark.faults
def test_a_pressure_the_path_cannot_take_is_a_row_and_the_suite_exits_0(suite_run: SuiteRun) -> None:
    result, cells = suite_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error" not in result.stderr, result.stderr
    assert "-chaos-allow-restart" in cells["restart-server"]["skipped"]
    assert "CONNECTION LIMIT" in cells["readers"]["skipped"]
    assert "note: seed/poll under restart-server: skipped: -chaos restart-server" in result.stderr
    assert "note: not scored (the reason in its row): readers:4 (skipped), restart-server (skipped)" in (
        result.stdout
    )
    scored = [c for c in cells.values() if c["skipped"] is None and c["not_injected"] is None]
    assert len(scored) == 5 and all(c["audit"] == "pass" for c in scored), cells


@pytest.mark.faults
def test_a_pressure_never_applied_is_not_injected_never_a_pass(suite_run: SuiteRun) -> None:
    result, cells = suite_run
    pool = cells["pool-exhaustion"]
    assert "no spare connection slot" in pool["not_injected"], pool
    assert pool["skipped"] is None and pool["recovered"] is None and pool["limit"] is None
    row = next(line for line in result.stdout.splitlines() if "│ pool-exhaustion" in line)
    assert "not injected" in row and "pass" not in row, row
    assert "pool-exhaustion:0 (not injected)" in result.stdout


@pytest.mark.faults
def test_a_table_locks_limit_names_the_lock_and_its_holder(suite_run: SuiteRun) -> None:
    _, cells = suite_run
    lock = cells["lock-table"]
    assert lock["limit"] == "locks", lock
    evidence = lock["limit_evidence"]
    assert "(pgmq-sim pressure" in evidence and "AccessExclusiveLock on msg_queue" in evidence, lock


# -- the parts, without a server -----------------------------------------------------------------


@pytest.mark.unit
def test_phases_read_and_refused() -> None:
    read = parse_phases("name=a duration=2 rate=50; name=b duration=3s pressure=readers:3")
    assert [p.name for p in read] == ["a", "b"] and read[1].pressure == Pressure("readers", 3)
    assert parse_phases("; ".join(p.text() for p in read)) == read
    for bad in (
        "name=a",
        "name=a duration=0",
        "name=a duration=1 colour=red",
        "name=a duration=1; name=a duration=1",
    ):
        with pytest.raises(UsageError):
            parse_phases(bad)
    for bad in ("readers:0", "readers:1.5", "burst:0", "idle-in-tx:3", "vacuum"):
        with pytest.raises(UsageError):
            Pressure.parse(bad)


@pytest.mark.unit
def test_phased_rate_offers_each_phase_its_rate() -> None:
    rate = PhasedRate([(2.0, ConstantRate(10)), (2.0, ConstantRate(30))])
    assert rate.rate_at(1) == 10 and rate.rate_at(3) == 30 and rate.rate_at(5) == 0
    assert rate.due(2) == pytest.approx(20, abs=1) and rate.due(4) == pytest.approx(80, abs=1)
    assert rate.next_due_in(2.5, rate.due(2.5)) < 0.05


@pytest.mark.unit
def test_recovery_is_the_first_steady_stretch_back_at_the_baseline() -> None:
    def second(at: int, backlog: int, p99: float) -> SecondSample:
        return SecondSample(at, 10, 10, backlog, p99 / 2, p99, p99)

    samples = [
        second(10, 50, 900),
        second(11, 20, 400),
        second(12, 3, 110),
        second(13, 2, 100),
        second(14, 2, 90),
    ]
    assert recovery(samples, 10.0, 15.0, backlog=4, p99_ms=100) == 2.0
    assert recovery(samples[:3], 10.0, 13.0, backlog=1, p99_ms=100) is None


@pytest.mark.unit
def test_a_cell_that_could_not_start_is_skipped_with_its_reason() -> None:
    cells = scorecard(
        [], [{"strategy": "seed", "pressure": "restart-server", "error": "needs -chaos-allow-restart"}]
    )
    assert cells[0].skipped == "needs -chaos-allow-restart" and cells[0].audit is None


@pytest.mark.unit
def test_phase_options_refused(refuse: Refuse) -> None:
    result = refuse("-phase 20")
    assert result.returncode == 2 and "goes with -suite pressure" in result.stderr
    result = refuse("-suite pressure -phase 20")
    assert result.returncode == 2 and "give -rate" in result.stderr
