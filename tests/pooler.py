"""Test helper: a real PgBouncer in front of a server, and plain (non-superuser) roles.

PgBouncer runs as an unprivileged account (``nobody`` when we are root, else ourselves) in a private
0700 directory holding its config, auth file, log, pid file and Unix socket; it listens on 127.0.0.1
on a free port and forwards to the server over TCP. Every wait is bounded, and the process gets
SIGKILL from the kernel if the thread that started it dies (prctl PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import psycopg
from checks import free_port
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

PGBOUNCER_CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer")
SKIP_REASON = "pgbouncer is not installed (apt-get install -y pgbouncer)"
RUN_AS = "nobody"
PREFIX = "pgmq-sim-bouncer-"
START_TIMEOUT_S = 10.0
PR_SET_PDEATHSIG = 1


def find_pgbouncer() -> str | None:
    """The pgbouncer binary: Debian's /usr/sbin (not on a normal user's PATH) or anywhere on PATH."""
    for path in PGBOUNCER_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("pgbouncer")


def skip_reason() -> str | None:
    """Why a test needing pgbouncer must skip, or None when it is installed."""
    return None if find_pgbouncer() else SKIP_REASON


def run_as() -> pwd.struct_passwd:
    """The account helper servers run as: nobody when root, else the current user."""
    return pwd.getpwnam(RUN_AS) if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())


def private_base() -> Path:
    """$TMPDIR if every directory on its way is o+x (nobody must reach it), else /tmp."""
    base = Path(tempfile.gettempdir()).resolve()
    reachable = all(p.stat().st_mode & stat.S_IXOTH for p in [base, *base.parents])
    return base if reachable or os.geteuid() != 0 else Path("/tmp")


def die_with_parent() -> None:
    """preexec_fn: runs after the switch of user, so the death signal survives into pgbouncer."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def account_ids(account: pwd.struct_passwd) -> tuple[int | None, int | None, list[int] | None]:
    """(user, group, extra_groups) for subprocess: drop root to the account, else change nothing."""
    if os.geteuid() != 0:
        return None, None, None
    return account.pw_uid, account.pw_gid, []


def quoted(value: str) -> str:
    """A value for pgbouncer's auth_file: in double quotes, a double quote doubled."""
    return '"' + value.replace('"', '""') + '"'


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.splitlines()[-lines:])


class PgBouncer:
    """A pgbouncer forwarding to server_host:server_port; context manager.

    Clients authenticate to pgbouncer with scram-sha-256 against the plain passwords of the auth
    file (user/password, plus more_users), and pgbouncer logs in to the server with the same plain
    passwords (SCRAM against a scram server works with 1.18). Every database name is forwarded.
    """

    def __init__(
        self,
        server_host: str,
        server_port: int,
        user: str,
        password: str,
        dbname: str,
        mode: str = "transaction",
        pool_size: int = 20,
        extra: dict[str, str] | None = None,
        *,
        more_users: dict[str, str] | None = None,
        auth_type: str = "scram-sha-256",
    ) -> None:
        if mode not in ("transaction", "session", "statement"):
            raise ValueError(f"unknown pool mode {mode!r}")
        self.server_host = server_host
        self.server_port = server_port
        self.user = user
        self.password = password
        self.dbname = dbname
        self.mode = mode
        self.pool_size = pool_size
        self.extra = dict(extra or {})
        self.users = {user: password} | dict(more_users or {})
        self.auth_type = auth_type
        self.port = 0
        self.top: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.binary = find_pgbouncer()

    # --- where things are ---

    def _need_top(self) -> Path:
        if self.top is None:
            raise RuntimeError("PgBouncer is not started")
        return self.top

    @property
    def log_path(self) -> Path:
        return self._need_top() / "pgbouncer.log"

    @property
    def stderr_path(self) -> Path:
        return self._need_top() / "stderr.log"

    @property
    def config_path(self) -> Path:
        return self._need_top() / "pgbouncer.ini"

    @property
    def socket_dir(self) -> Path:
        return self._need_top() / "s"

    def log_text(self) -> str:
        """pgbouncer's log file so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _failure_text(self) -> str:
        """The log's last lines, or stderr's (what it printed before it could open the log)."""
        with contextlib.suppress(OSError):
            return tail(self.log_text() or self.stderr_path.read_text(errors="replace"))
        return "(no log)"

    def dsn_for(self, user: str | None = None, password: str | None = None, dbname: str | None = None) -> str:
        """A postgres:// URL through pgbouncer (the password percent-encoded)."""
        user = user or self.user
        password = self.users.get(user, "") if password is None else password
        db = dbname or self.dbname
        return f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:{self.port}/{db}"

    @property
    def dsn(self) -> str:
        return self.dsn_for()

    @property
    def admin_dsn(self) -> str:
        """The console (SHOW POOLS, SHOW SERVERS ...): the virtual database "pgbouncer"."""
        return self.dsn_for(dbname="pgbouncer")

    # --- life cycle ---

    def _config(self, top: Path) -> str:
        server = f"host={self.server_host} port={self.server_port}"
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": str(top / "s"),
            "auth_type": self.auth_type,
            "auth_file": str(top / "userlist.txt"),
            "logfile": str(top / "pgbouncer.log"),
            "pidfile": str(top / "pgbouncer.pid"),
            "pool_mode": self.mode,
            "max_client_conn": "500",
            "default_pool_size": str(self.pool_size),
            "ignore_startup_parameters": "extra_float_digits",
            "log_connections": "1",
            "log_disconnections": "1",
            "log_pooler_errors": "1",
            "admin_users": self.user,
            "server_login_retry": "1",
        } | self.extra
        lines = ["[databases]", f"{self.dbname} = {server} dbname={self.dbname}", f"* = {server}", ""]
        lines += ["[pgbouncer]", *(f"{name} = {value}" for name, value in settings.items()), ""]
        return "\n".join(lines)

    def start(self) -> PgBouncer:
        if self.binary is None:
            raise RuntimeError(SKIP_REASON)
        if self.top is not None:
            return self
        account = run_as()
        self.top = top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=private_base()))
        try:
            self.port = free_port()
            os.mkdir(top / "s", 0o700)
            (top / "pgbouncer.ini").write_text(self._config(top))
            fd = os.open(top / "userlist.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as users:
                users.writelines(f"{quoted(u)} {quoted(p)}\n" for u, p in self.users.items())
            for name in ("pgbouncer.log", "stderr.log"):
                (top / name).touch(0o600)
            if os.geteuid() == 0:
                for path in [*top.iterdir(), top]:
                    os.chown(path, account.pw_uid, account.pw_gid)
            os.chmod(top, 0o700)
            self._launch(account)
        except BaseException:
            self.cleanup()
            raise
        return self

    def _launch(self, account: pwd.struct_passwd) -> None:
        assert self.binary is not None
        top = self._need_top()
        user, group, extra_groups = account_ids(account)
        with open(top / "stderr.log", "ab") as stderr:
            self.process = subprocess.Popen(  # preexec_fn: fine in a test helper
                [self.binary, str(top / "pgbouncer.ini")],
                cwd=str(top),
                env={"PATH": "/usr/sbin:/usr/bin:/bin", "LC_ALL": "C"},
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=die_with_parent,
                user=user,
                group=group,
                extra_groups=extra_groups,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"pgbouncer exited with {self.process.returncode} at start:\n{self._failure_text()}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"pgbouncer did not accept on port {self.port} within {START_TIMEOUT_S:.0f} s:\n"
                    f"{self._failure_text()}"
                )
            time.sleep(0.02)

    def admin(self, command: str) -> None:
        """A command on the pooler's console: PAUSE, RESUME, KILL, RECONNECT (its own faults). Just
        after a KILL the pooler may close a new console connection while it drops the others."""
        deadline = time.monotonic() + 5
        while True:
            try:
                with psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=5) as console:
                    console.execute(command)
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def crash_and_restart(self, down_s: float = 1.0) -> None:
        """SIGKILL, down for down_s, then the same pooler again on the same port."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        time.sleep(down_s)
        self._launch(run_as())

    def reload(self) -> None:
        """SIGHUP: re-read the config and auth file."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        """SIGINT (safe shutdown), then SIGTERM (immediate), then SIGKILL; each wait bounded."""
        process = self.process
        if process is None:
            return
        for signum, wait in ((signal.SIGINT, 3.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            if process.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=wait)
        self.process = None

    def cleanup(self) -> None:
        try:
            self.stop()
        finally:
            if self.top is not None:
                shutil.rmtree(self.top, ignore_errors=True)
                self.top = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()


# --- plain roles ---


@dataclass(frozen=True)
class Role:
    """A LOGIN role with a database of its own; dsn reaches the server the admin DSN names."""

    name: str
    password: str
    dbname: str
    host: str
    port: int
    dsn: str


def make_role(admin_dsn: str, name: str, password: str, *, monitoring: bool = False) -> Role:
    """CREATE ROLE name LOGIN (no superuser, no createdb/createrole; pg_monitor only if monitoring)
    and a database named after it, owned by it (PG15 took CREATE on schema public from PUBLIC)."""
    ident = sql.Identifier(name)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("create role {} login nosuperuser nocreatedb nocreaterole password {}").format(
                ident, sql.Literal(password)
            )
        )
        conn.execute(sql.SQL("create database {} owner {}").format(ident, ident))
        if monitoring:
            conn.execute(sql.SQL("grant pg_monitor to {}").format(ident))
    info = conninfo_to_dict(admin_dsn)
    dsn = make_conninfo(admin_dsn, user=name, password=password, dbname=name)
    return Role(name, password, name, str(info.get("host", "")), int(info.get("port") or 5432), dsn)


def drop_role(admin_dsn: str, name: str) -> None:
    """Drop the role's database (closing its sessions) and the role; quiet if already gone."""
    ident = sql.Identifier(name)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("drop database if exists {} with (force)").format(ident))
        conn.execute("select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,))
        conn.execute(sql.SQL("drop role if exists {}").format(ident))


@contextlib.contextmanager
def temp_role(admin_dsn: str, name: str, password: str, *, monitoring: bool = False) -> Iterator[Role]:
    role = make_role(admin_dsn, name, password, monitoring=monitoring)
    try:
        yield role
    finally:
        drop_role(admin_dsn, name)
