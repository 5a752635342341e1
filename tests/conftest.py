"""Fixtures: one embedded PostgreSQL for the session, and the CLI run as a real process."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgmq_sim.embedded.postgres import LocalPostgres

REPO = Path(__file__).resolve().parents[1]
LAYERS = ("unit", "integration", "faults")
# the fixtures that bring a server, by the layer they belong to (cli and db open the shared one;
# tcp_pg is a module's own server on 127.0.0.1, for the poolers in front of it)
SERVED = {"integration": {"pg", "server_dsn", "dsn", "db", "cli"}, "faults": {"own_pg", "tcp_pg"}}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test belongs to exactly one layer (pytestmark in its module, or a mark on each test of a
    module of two layers): pytest -m LAYER runs one. A test's server fixtures say its layer: the shared
    server's are integration's and an integration test takes one, own_pg and tcp_pg are faults' (as is
    a server a test starts itself), and a unit test takes none."""
    wrong = []
    for item in items:
        layers = {mark.name for mark in item.iter_markers() if mark.name in LAYERS}
        if len(layers) != 1:
            wrong.append(f"{item.nodeid}: {sorted(layers) or 'no layer'}")
            continue
        callspec = getattr(item, "callspec", None)  # a parameter may share a fixture's name (dsn)
        fixtures = set(getattr(item, "fixturenames", ())) - set(callspec.params if callspec else ())
        for layer, served in SERVED.items():
            if fixtures & served and layer not in layers:
                wrong.append(f"{item.nodeid}: {sorted(layers)[0]}, but takes {sorted(fixtures & served)}")
        if "integration" in layers and not fixtures & SERVED["integration"]:
            wrong.append(f"{item.nodeid}: integration, but takes no fixture of the shared server")
    if wrong:
        raise pytest.UsageError(
            "tests need exactly one of "
            + ", ".join(LAYERS)
            + ", the one their fixtures use: "
            + "; ".join(wrong)
        )


@pytest.fixture(scope="session")
def pg() -> Iterator[LocalPostgres]:
    """The session's server (as root it runs as nobody; gone even if pytest is killed)."""
    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def server_dsn(pg: LocalPostgres) -> str:
    """The session server's own database, for tests that create roles or databases."""
    return pg.dsn


@pytest.fixture
def dsn(server_dsn: str) -> Iterator[str]:
    """A database of this test's own: runs refuse to replace tables they did not create, so
    tests that craft tables by hand must not share them with the next test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"create database {name}")
    yield make_conninfo(server_dsn, dbname=name)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.fixture
def own_pg() -> Iterator[LocalPostgres]:
    """A fresh server for one test, which may restart, freeze, thaw or kill it."""
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def db(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


class Cli:
    """Runs pgmq-sim as a subprocess against the test server, in a scratch directory."""

    def __init__(self, dsn: str, workdir: Path) -> None:
        self.dsn = dsn
        self.workdir = workdir

    def command(self, *args: str, dsn: bool = True) -> list[str]:
        """Each argument is split on white space: cli.run("-fill-db 10 -workers 3")."""
        base = [sys.executable, "-m", "pgmq_sim", "-progress", "plain"]
        words = [word for arg in args for word in arg.split()]
        return base + (["-dsn", self.dsn] if dsn else []) + words

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PGMQ_SIM_DSN"}
        env["COLUMNS"] = "200"
        return env

    def tcp_workers(self, port: int, homes: Path) -> list[subprocess.Popen[str]]:
        """Two --worker processes joining a master at 127.0.0.1:`port`, each in its folder under
        `homes`: a on the database the master sends, b on its own PGMQ_SIM_DSN."""
        workers = []
        for name, own_dsn in (("a", False), ("b", True)):
            home = homes / name
            home.mkdir()
            env = self.env() | ({"PGMQ_SIM_DSN": self.dsn} if own_dsn else {})
            command = [sys.executable, "-m", "pgmq_sim", "--worker", "--master-host", "127.0.0.1"]
            command += ["--master-port", str(port)]
            workers.append(
                subprocess.Popen(
                    command, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        return workers

    def run(
        self, *args: str, dsn: bool = True, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.run_argv(self.command(*args, dsn=dsn), timeout, env)

    def audit(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`pgmq-sim audit ARGS` (its own flags: no -progress)."""
        return self.run_argv([sys.executable, "-m", "pgmq_sim", "audit", *args], 60)

    def run_argv(
        self, argv: list[str], timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=self.workdir,
            env=self.env() | (env or {}),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            cwd=self.workdir,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def cli(dsn: str, tmp_path: Path) -> Cli:
    return Cli(dsn, tmp_path)


Refuse = Callable[..., "subprocess.CompletedProcess[str]"]
NOWHERE = "postgres://pgmq-sim@127.0.0.1:1/refused"  # a DSN well formed, never reached: see refuse


@pytest.fixture
def refuse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Refuse:
    """The command line run in this process, for refusals made before anything starts (a process
    would cost its start-up, 0.6 s, for a line of output): its exit code, stdout and stderr as a
    process gives them, in a scratch directory, without PGMQ_SIM_DSN. A command that gets past its
    checks fails the test where it would open its server: such a case goes through cli.run."""
    from pgmq_sim.cli import command

    def opened(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the command got past its checks: give this case to cli.run, a real process")

    monkeypatch.setattr(command, "open_server", opened)
    monkeypatch.delenv("PGMQ_SIM_DSN", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)

    def run(*args: str, dsn: str | None = NOWHERE) -> subprocess.CompletedProcess[str]:
        """Each argument is split on white space, as Cli.run splits it."""
        argv = ["pgmq-sim", "-progress", "plain", *(["-dsn", dsn] if dsn else [])]
        argv += [word for arg in args for word in arg.split()]
        monkeypatch.setattr(sys, "argv", argv)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                command.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())

    return run


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    """Bad input: the given exit code, one error line on stderr, no traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("pgmq-sim: error: "), lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
