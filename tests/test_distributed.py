"""Distributed runs with real processes: --processes N, a master and workers over TCP, a worker
process killed mid-run, hosts in network namespaces. Every run is audited from the database here,
and the per-worker and per-runner rows of the report are checked against the journal."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from checks import assert_exactly_once_in_order, free_port, handled_lines
from conftest import REPO, Cli, assert_one_line_error

from pgmq_sim.verdicts.cause import Resource

WORKLOAD = "-workers 6 -claim indexed -orders 4 -work-ms 0-1"


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[int, str, str]:
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    return proc.returncode, stdout, stderr


def check_report(db: psycopg.Connection, result: dict[str, Any], n: int, runners: int) -> None:
    """The audit from the database; the report's totals, per worker and per runner, from the journal."""
    assert_exactly_once_in_order(db, n, delmsg=False)
    assert result["outcome"] == "completed" and result["processed"] == n, result["notes"]
    assert result["audit"]["verdict"] == "pass"
    journal = dict(db.execute("select worker, count(*) from msg_journal group by worker").fetchall())
    assert {w["name"]: w["processed"] for w in result["workers"]} == {
        w["name"]: journal.get(w["name"], 0) for w in result["workers"]
    }
    per_runner: Counter[str] = Counter()
    journal_per_runner: Counter[str] = Counter()
    for w in result["workers"]:
        per_runner[w["runner"]] += w["processed"]
        journal_per_runner[w["runner"]] += journal.get(w["name"], 0)
    assert per_runner == journal_per_runner and sum(per_runner.values()) == n
    assert len(per_runner) == runners and all(r != "local" for r in per_runner)


@pytest.mark.integration
def test_processes_two(cli: Cli, db: psycopg.Connection) -> None:
    result = cli.run(f"-fill-db 1500 {WORKLOAD} --processes 2 -json out.json", timeout=90)
    assert result.returncode == 0, result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    check_report(db, report, 1500, runners=2)
    # each worker process logs its own handled lines; the master's log has the lifecycle
    for number in (1, 2):
        lines = handled_lines(cli.workdir / f"msg_queue.p{number}.log")
        mine = {w["name"] for w in report["workers"] if w["runner"].startswith(f"p{number}@")}
        assert lines and {line[0] for line in lines} == mine
    assert not handled_lines(cli.workdir / "msg_queue.log")
    assert "starting 6 workers in 2 processes" in (cli.workdir / "msg_queue.log").read_text()
    # the client's cost covers each worker process, as it reported itself, beside the master
    processes = {p["runner"]: p for p in report["client"]["processes"]}
    workers = {name: p for name, p in processes.items() if name != "local"}
    assert sorted(name.split("@")[0] for name in workers) == ["p1", "p2"]
    assert sum(p["messages"] for p in workers.values()) == 1500
    assert all(p["cpu_s"] > 0 and p["elapsed_s"] > 0 for p in workers.values())
    assert report["client"]["cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in processes.values()), abs=0.01)


@pytest.mark.integration
def test_processes_two_split_mode_under_a_fault_schedule(cli: Cli, db: psycopg.Connection) -> None:
    """Leases, recovery and the fault schedule hold across processes: the master's housekeeper
    recovers what a crashed worker in another process held, and finds backends on the server."""
    result = cli.run(
        "-fill-db 1500 -rate 500 -workers 6 -claim indexed -orders 4 -work-ms 1-3 -poll-interval 0.05",
        "--processes 2 -tx split -lease 5 -chaos kill-worker@1s,kill-connection@2s -json out.json",
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((cli.workdir / "out.json").read_text())
    check_report(db, report, 1500, runners=2)
    kinds = [f["kind"] for f in report["faults"]]
    assert kinds == ["kill-worker", "kill-connection"], report["faults"]
    assert "terminated 1" in report["faults"][1]["detail"]
    assert report["retries"]["crashes"] == 1 and report["connections_lost"] >= 1


@pytest.mark.integration
def test_master_and_two_workers_over_tcp(cli: Cli, db: psycopg.Connection, tmp_path: Path) -> None:
    port = free_port()
    master = cli.start(
        f"-fill-db 1500 {WORKLOAD} --master --expect-workers 2 --master-bind-port {port} -json run.json"
    )
    workers = cli.tcp_workers(port, tmp_path)
    code, _out, err = finish(master)
    results = [finish(w, timeout=30) for w in workers]
    assert code == 0, err
    assert all(r[0] == 0 for r in results), results
    assert "from the master" in results[0][1] and "from its own PGMQ_SIM_DSN" in results[1][1]
    report = json.loads((cli.workdir / "run.json").read_text())
    check_report(db, report, 1500, runners=2)
    for name in ("a", "b"):  # each worker process writes its own log where it runs
        logs = sorted(path.name for path in (tmp_path / name).glob("msg_queue.p*.log"))
        assert len(logs) == 1 and handled_lines(tmp_path / name / logs[0]), logs


def worker_backends(db: psycopg.Connection) -> int:
    row = db.execute(
        "select count(*) from pg_stat_activity where application_name like 'pgmq-sim w%%'"
    ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.integration
def test_workers_stop_and_close_their_connections_when_the_master_is_killed(
    cli: Cli, db: psycopg.Connection, tmp_path: Path
) -> None:
    """kill -9 of the master mid-run: a worker process that joined over TCP stops within 10 s (no
    heartbeat from its master; Locust's own timeout is a minute), and its server connections close."""
    port = free_port()
    master = cli.start(
        f"-fill-db 20000 -rate 300 {WORKLOAD} --master --expect-workers 1 --master-bind-port {port}"
    )
    command = [sys.executable, "-m", "pgmq_sim", "--worker", "--master-host", "127.0.0.1"]
    worker = subprocess.Popen(
        [*command, "--master-port", str(port)],
        cwd=tmp_path,
        env=cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and worker_backends(db) < 6:
            time.sleep(0.2)
        assert worker_backends(db) == 6
        master.kill()
        killed = time.monotonic()
        worker.wait(timeout=20)
        stopped_s = time.monotonic() - killed
        while time.monotonic() < killed + 20 and worker_backends(db):
            time.sleep(0.1)
        closed_s = time.monotonic() - killed
    finally:
        for proc in (master, worker):
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
    assert stopped_s < 10, stopped_s
    assert worker_backends(db) == 0 and closed_s < 10, closed_s


def web_stats(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/requests", timeout=2) as answer:
            data: dict[str, Any] = json.load(answer)
            return data
    except OSError:
        return {}


def web_entries(data: dict[str, Any]) -> dict[str, int]:
    return {entry["name"]: entry["num_requests"] for entry in data.get("stats", [])}


def queue_tab(data: dict[str, Any]) -> dict[str, str]:
    """The Queue tab's figures (distributed/web)."""
    tables = [t for t in data.get("extended_stats", []) if t.get("key") == "queue"]
    return {row["name"]: row["value"] for table in tables for row in table["data"]}


@pytest.mark.integration
def test_worker_process_killed_mid_run(cli: Cli, db: psycopg.Connection) -> None:
    """SIGKILL one of two worker processes: the master notices, the other finishes the queue, the
    lost process's last commits are counted from the journal; the web UI showed the run live, with
    the audit so far and the last window's limit."""
    web = free_port()
    master = cli.start(
        # paced, so the run outlasts the web UI's first stats report and the kill lands mid-run
        f"-fill-db 4000 -rate 700 {WORKLOAD.replace('0-1', '1-2')} --processes 2 --web --web-port {web}"
        " -poll-interval 0.05 -audit-window 0.5 -json out.json"
    )
    try:
        log = cli.workdir / "msg_queue.p2.log"
        deadline = time.monotonic() + 45
        entries: dict[str, int] = {}
        tab: dict[str, str] = {}
        while time.monotonic() < deadline and not (
            entries.get("claim") and len(handled_lines(log)) >= 300 and tab.get("audit: checked", "0") != "0"
        ):
            time.sleep(0.2)
            stats = web_stats(web)
            entries, tab = web_entries(stats), queue_tab(stats)
        assert entries.get("claim") and entries.get("complete"), entries
        # the live audit so far, in the Queue tab: windows closed, none failed, messages checked
        assert tab["audit: windows closed (failed)"].endswith("(0)") and int(tab["audit: checked"]) > 0, tab
        assert tab["audit: lost / duplicated / out of order"] == "0 / 0 / 0", tab
        # and the last closed window's limit, with its evidence
        limit = next(value for name, value in tab.items() if name.startswith("limit (window to "))
        assert limit.split(":")[0] in {str(r) for r in Resource}, limit
        pid = int(log.read_text().split("(pid ", 1)[1].split(")", 1)[0])
        os.kill(pid, signal.SIGKILL)
        code, _out, err = finish(master)
    finally:
        if master.poll() is None:
            master.kill()
    assert code == 0, err
    report = json.loads((cli.workdir / "out.json").read_text())
    assert any("lost" in note and "p2@" in note for note in report["notes"]), report["notes"]
    check_report(db, report, 4000, runners=2)


@pytest.mark.integration
def test_distributed_usage_errors(cli: Cli) -> None:
    assert_one_line_error(cli.run("--master -fill-db 10", dsn=False), 2, "--master needs -dsn")
    worker_with_settings = cli.run("--worker --master-host h -fill-db 10", dsn=False)
    assert_one_line_error(worker_with_settings, 2, "takes every setting", "--fill-db")
    assert_one_line_error(cli.run("--processes 4 -workers 3"), 2, "more than -workers")


# --- hosts in network namespaces ------------------------------------------------------------------

SUBNET = "10.231.7"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.fixture
def hosts() -> Iterator[dict[str, str]]:
    """db, master, w1, w2: each a network namespace with one address, joined by a bridge in a
    namespace of its own; all of it removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2 (ip)")
    tag = uuid.uuid4().hex[:6]
    names = {role: f"pq{role}{tag}" for role in ("db", "master", "w1", "w2")}
    bridge = f"pqbr{tag}"
    made: list[str] = []
    try:
        for ns in (bridge, *names.values()):
            ip("netns", "add", ns)
            made.append(ns)
        ip("-n", bridge, "link", "add", "br0", "type", "bridge")
        ip("-n", bridge, "link", "set", "br0", "up")
        for number, ns in enumerate(names.values(), start=1):
            ip(
                "link",
                "add",
                "eth0",
                "netns",
                ns,
                "type",
                "veth",
                "peer",
                "name",
                f"p{number}",
                "netns",
                bridge,
            )
            ip("-n", ns, "addr", "add", f"{SUBNET}.{number}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", bridge, "link", "set", f"p{number}", "master", "br0")
            ip("-n", bridge, "link", "set", f"p{number}", "up")
    except (subprocess.CalledProcessError, OSError) as exc:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        pytest.skip(f"cannot make network namespaces here: {exc}")
    try:
        yield names
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def in_ns(ns: str, *command: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, *command],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


@pytest.mark.faults  # a server of its own
def test_hosts_in_network_namespaces(hosts: dict[str, str], tmp_path: Path) -> None:
    """PostgreSQL, the master and two workers each in a namespace of their own (10.231.7.1-4):
    the settings, the SQL and the stats cross a real network stack, as between hosts."""
    env = {k: v for k, v in os.environ.items() if k != "PGMQ_SIM_DSN"} | {"COLUMNS": "200"}
    server = in_ns(hosts["db"], str(REPO / "tests" / "netns_pg.py"), f"{SUBNET}.1", stdin=subprocess.PIPE)
    procs = [server]
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line, server.stderr.read() if server.stderr else ""
        dsns = json.loads(line)
        common = ["-m", "pgmq_sim", "-progress", "plain"]
        master = in_ns(
            hosts["master"],
            *common,
            "-dsn",
            dsns["dsn"],
            *["-fill-db", "1500", "-json", "out.json"],
            *WORKLOAD.split(),
            "--master",
            "--expect-workers",
            "2",
            cwd=tmp_path,
            env=env,
        )
        procs.append(master)
        for role, own in (("w1", False), ("w2", True)):
            home = tmp_path / role
            home.mkdir()
            worker_env = env | ({"PGMQ_SIM_DSN": dsns["dsn"]} if own else {})
            procs.append(
                in_ns(
                    hosts[role],
                    "-m",
                    "pgmq_sim",
                    "--worker",
                    "--master-host",
                    f"{SUBNET}.2",
                    cwd=home,
                    env=worker_env,
                )
            )
        code, out, err = finish(master)
        workers = [finish(p, timeout=30) for p in procs[2:]]
        assert code == 0, err
        assert all(w[0] == 0 for w in workers), workers
        for text in [out, err, *(w[1] + w[2] for w in workers)]:
            assert dsns["password"] not in text
        report = json.loads((tmp_path / "out.json").read_text())
        assert {w["runner"].split("@")[0] for w in report["workers"]} == {"p1", "p2"}
        with psycopg.connect(dsns["local"], autocommit=True) as db:
            check_report(db, report, 1500, runners=2)
    finally:
        for proc in procs[1:]:
            if proc.poll() is None:
                proc.kill()
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
