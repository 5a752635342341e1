"""pgqd, PgQ's ticker, started for a run of -queue pgq and stopped after it.

PgQ hands a consumer only what lies between two ticks: without a ticker no batch ever comes. The
tool writes pgqd a configuration of its own (in a private directory, removed with the process: the
connection string holds the password), for the run's database only, starts it, and stops it at the
end (SIGTERM, then SIGKILL, each wait bounded). Its settings, with the queues' own, go in the report:
they set the batch latency.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from pgmq_sim.errors import UsageError

TICKER_PERIOD_S = 0.1  # how often pgqd runs pgq.ticker(): a tick waits at most this past its lag
STARTED_WITHIN_S = 10.0
STOP_WITHIN_S = 5.0
PGQD_PACKAGE = "pgqd"


def pgqd_binary() -> str | None:
    return shutil.which("pgqd")


def base_connstr(dsn: str) -> str:
    """libpq's key=value form of the run's DSN without its database (pgqd adds each database's)."""
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "dbname" and v is not None}

    def quoted(value: Any) -> str:
        text = str(value).replace("\\", "\\\\").replace("'", "\\'")
        return f"'{text}'"

    return " ".join(f"{key}={quoted(value)}" for key, value in params.items())


class Pgqd:
    """One pgqd for one database, for the length of a run."""

    def __init__(self, dsn: str, database: str) -> None:
        self._dsn = dsn
        self.database = database
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def settings(self) -> dict[str, Any]:
        """The daemon's own settings, as the report shows them."""
        return {"started_by": "pgmq-sim", "ticker_period_s": TICKER_PERIOD_S, "database_list": self.database}

    def start(self) -> None:
        binary = pgqd_binary()
        if binary is None:
            raise UsageError(
                f"-queue pgq needs a ticker: install Debian's {PGQD_PACKAGE} package (pgqd), or run pgqd for"
                " this database yourself"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="pgmq-sim-pgqd-"))
        os.chmod(self._dir, 0o700)
        config = self._dir / "pgqd.ini"
        config.write_text(
            "[pgqd]\n"
            f"logfile = {self._dir / 'pgqd.log'}\n"
            f"pidfile = {self._dir / 'pgqd.pid'}\n"
            f"base_connstr = {base_connstr(self._dsn)}\n"
            f"initial_database = {self.database}\n"
            f"database_list = {self.database}\n"
            "syslog = 0\n"
            f"ticker_period = {TICKER_PERIOD_S}\n"
        )
        os.chmod(config, 0o600)
        self._process = subprocess.Popen(
            [binary, "-q", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C reaches the run, which stops pgqd itself
        )
        self._wait_started()

    def _wait_started(self) -> None:
        """Until pgqd says it found PgQ in the database (bounded)."""
        assert self._process is not None and self._dir is not None
        log = self._dir / "pgqd.log"
        deadline = time.monotonic() + STARTED_WITHIN_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            with contextlib.suppress(OSError):
                if "pgq version ok" in log.read_text(errors="replace"):
                    return
            time.sleep(0.05)
        said = ""
        with contextlib.suppress(OSError):
            lines = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]
            said = f": {lines[-1].split(' ', 4)[-1]}" if lines else ""
        self.stop()
        raise UsageError(
            f"pgqd did not start ticking database {self.database} within {STARTED_WITHIN_S:g} s{said}"
        )

    def stop(self) -> None:
        """SIGTERM, then SIGKILL; its directory removed. Bounded; safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_WITHIN_S)
            except subprocess.TimeoutExpired:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(STOP_WITHIN_S)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
