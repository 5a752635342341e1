"""The embedded PostgreSQL: real processes, real signals. It must leave nothing behind, however the
tool ends (kill -9, a quick double Ctrl-C), and change nothing on the machine (users, permissions)."""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pgmq_sim.embedded.postgres import LocalPostgres
from pgmq_sim.errors import SimError

pytestmark = pytest.mark.faults

ROOT = os.geteuid() == 0
LABEL_DIR = re.compile(r"socket in (/[^,)\s]+)")


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory of our own for the servers' files (0755, so nobody can reach them), so that
    "nothing left behind" can be checked by listing it, whatever else runs on the machine."""
    path = Path(tempfile.mkdtemp(prefix="pgmq-embtest-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def state(pid: int) -> str | None:
    """The process state letter (R, S, T, Z...), None if there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2]


def processes_in(path: Path) -> list[int]:
    """Live processes whose command line names path or whose working directory is inside it
    (the postmaster has -D <datadir>, the other server processes have it as their cwd)."""
    needle = str(path)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if state(int(entry.name)) in (None, "Z"):
            continue
        if needle in command or cwd == needle or cwd.startswith(needle + "/"):
            found.append(int(entry.name))
    return found


def wait_for(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def cli_env(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PGMQ_SIM_DSN" and not k.startswith("PG")}
    return env | {"TMPDIR": str(tmpdir), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


class Tool:
    """pgmq-sim without -dsn, its output read line by line as it comes."""

    def __init__(self, workdir: Path, tmpdir: Path, *args: str) -> None:
        command = [sys.executable, "-m", "pgmq_sim", "-progress", "plain", *args]
        self.proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=cli_env(tmpdir),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            process_group=0,  # like a terminal's foreground job: ctrl_c() reaches it and its children
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_line(self, pattern: str, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    return None
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        return None

    def ctrl_c(self) -> None:
        """SIGINT to the whole process group, as a terminal sends it."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def server_dir(self) -> Path:
        """The embedded server's directory, from the "using embedded PostgreSQL (socket in ...)" line."""
        line = self.wait_line("using embedded", 60)
        assert line, "".join(self.seen)
        match = LABEL_DIR.search(line)
        assert match, line
        path = Path(match.group(1))
        return next(p for p in [path, *path.parents] if p.name.startswith("pgmq-sim"))

    def finish(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def test_kill_9_of_the_tool_leaves_no_server_and_no_directory(tmp_path: Path, base: Path) -> None:
    tool = Tool(tmp_path, base, "-fill-db", "200000", "-workers", "3")
    try:
        top = tool.server_dir()
        tool.wait_line(r"\d", 3)  # a progress line, or a couple of seconds
        assert processes_in(top), "the server should be running before the kill"
        tool.proc.send_signal(signal.SIGKILL)
        tool.proc.wait(timeout=10)
    finally:
        tool.finish()
    assert wait_for(lambda: not processes_in(top) and not top.exists(), 10), (processes_in(top), top)
    assert list(base.iterdir()) == []


@pytest.mark.parametrize("when", ["starting", "running"])
def test_quick_double_ctrl_c_leaves_nothing(tmp_path: Path, base: Path, when: str) -> None:
    tool = Tool(tmp_path, base, "-fill-db", "200000", "-workers", "3")
    try:
        if when == "starting":  # while initdb runs: the directory exists, the server not yet
            assert wait_for(lambda: any(base.iterdir()) or tool.proc.poll() is not None, 30)
            top = next(base.iterdir())
        else:
            top = tool.server_dir()
        tool.ctrl_c()
        time.sleep(0.02)
        tool.ctrl_c()
        tool.proc.wait(timeout=30)
    finally:
        tool.finish()
    assert wait_for(lambda: not processes_in(top) and not top.exists(), 10), (processes_in(top), top)
    assert list(base.iterdir()) == []


def test_one_ctrl_c_while_starting_is_an_interrupt_not_a_failed_start(tmp_path: Path, base: Path) -> None:
    """Ctrl-C reaches the whole foreground process group: initdb and pg_ctl must not die of it."""
    tool = Tool(tmp_path, base, "-fill-db", "200000", "-workers", "3")
    try:
        assert wait_for(lambda: any(base.iterdir()) or tool.proc.poll() is not None, 30)
        top = next(base.iterdir())
        assert wait_for(lambda: processes_in(top), 30), "initdb or the server should be starting"
        tool.ctrl_c()
        assert tool.proc.wait(timeout=60) == 130
    finally:
        tool.finish()
    tool.wait_line("$^", 1)  # collect the rest of the output
    assert "could not start" not in "".join(tool.seen), "".join(tool.seen)
    assert wait_for(lambda: list(base.iterdir()) == [], 10)


def modes_up_from(path: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (s.st_mode, s.st_uid, s.st_gid) for p in [path, *path.parents] for s in [p.stat()]}


@pytest.mark.skipif(not ROOT, reason="what root would change")
def test_as_root_changes_no_permissions_creates_no_user_and_no_lockfile(tmp_path: Path) -> None:
    private = Path(tempfile.mkdtemp(prefix="pgmq-private-"))  # 0700, like a per-user TMPDIR
    try:
        before = modes_up_from(private)
        lockfile = Path("/tmp/.lockfile")
        had_lockfile = lockfile.exists()
        accounts = Path("/etc/passwd").read_text(), Path("/etc/group").read_text()
        result = subprocess.run(
            [sys.executable, "-m", "pgmq_sim", "-progress", "plain", "-fill-db", "50", "-workers", "3"],
            cwd=tmp_path,
            env=cli_env(private),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert modes_up_from(private) == before
        assert list(private.iterdir()) == []  # no lock file, nothing left
        assert lockfile.exists() == had_lockfile
        assert (Path("/etc/passwd").read_text(), Path("/etc/group").read_text()) == accounts
        assert "embedded PostgreSQL" in result.stdout and "user nobody" in result.stdout
    finally:
        shutil.rmtree(private, ignore_errors=True)


@pytest.mark.skipif(not ROOT, reason="only root has to switch accounts")
def test_unreachable_base_is_one_line_error_and_touches_nothing() -> None:
    private = Path(tempfile.mkdtemp(prefix="pgmq-private-"))
    try:
        with pytest.raises(SimError) as info:
            LocalPostgres(base_dir=private).start()
        assert "\n" not in str(info.value) and "TMPDIR" in str(info.value)
        assert stat.S_IMODE(private.stat().st_mode) == 0o700 and list(private.iterdir()) == []
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_private_socket_directory_and_no_password_in_label(own_pg: LocalPostgres) -> None:
    top = own_pg.top
    assert top is not None and own_pg.datadir.parent == top
    for path in (top, own_pg.socket_dir, own_pg.datadir):
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700
        if ROOT:
            assert info.st_uid == own_pg_uid("nobody")
    assert len(str(own_pg.socket_dir / ".s.PGSQL.5432")) <= 107
    assert own_pg.label.startswith("embedded PostgreSQL ") and str(own_pg.socket_dir) in own_pg.label
    with psycopg.connect(own_pg.dsn, autocommit=True) as conn:
        settings = dict(conn.execute("select name, setting from pg_settings").fetchall())
    assert settings["max_connections"] == "200" and settings["listen_addresses"] == ""
    assert settings["fsync"] == "on" and settings["synchronous_commit"] == "on"
    assert int(settings["shared_buffers"]) * 8192 == 128 * 1024 * 1024
    assert (own_pg.datadir / "server.log").stat().st_size > 0


def own_pg_uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_tcp_needs_the_generated_password(host: str) -> None:
    with LocalPostgres(tcp=True, host=host) as pg:
        assert pg.password and pg.password in pg.dsn and pg.password not in pg.label
        with psycopg.connect(pg.dsn, connect_timeout=5) as conn:
            assert conn.execute("select current_setting('listen_addresses')").fetchone() == (host,)
        without = f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(without, connect_timeout=5)
        wrong = f"postgresql://postgres:wrong@127.0.0.1:{pg.port}/postgres"
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(wrong, connect_timeout=5)


def test_restart_keeps_the_same_dsn_working(own_pg: LocalPostgres) -> None:
    dsn = own_pg.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = conn.execute("select pg_postmaster_start_time()").fetchone()
    old_pid = own_pg.postmaster_pid
    own_pg.restart()
    assert own_pg.dsn == dsn and own_pg.postmaster_pid not in (None, old_pid)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("select pg_postmaster_start_time()").fetchone() != first


def test_freeze_stops_answers_and_thaw_brings_them_back(own_pg: LocalPostgres) -> None:
    conn = psycopg.connect(own_pg.dsn, autocommit=True)
    answer: list[object] = []
    asking = threading.Thread(target=lambda: answer.append(conn.execute("select 42").fetchone()))
    own_pg.freeze()
    try:
        assert {state(pid) for pid in own_pg.server_pids()} == {"T"}
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(own_pg.dsn, connect_timeout=2)
        asking.start()
        asking.join(2)
        assert asking.is_alive() and answer == []
    finally:
        own_pg.thaw()
    asking.join(10)
    assert answer == [(42,)]
    conn.close()
    with psycopg.connect(own_pg.dsn, connect_timeout=5) as again:
        assert again.execute("select 1").fetchone() == (1,)


def test_kill_is_a_crash_and_start_recovers(own_pg: LocalPostgres) -> None:
    with psycopg.connect(own_pg.dsn, autocommit=True) as conn:
        conn.execute("create table survives (n int); insert into survives values (7)")
    pids = own_pg.server_pids()
    own_pg.kill()
    assert all(state(pid) in (None, "Z") for pid in pids)
    own_pg.start()
    with psycopg.connect(own_pg.dsn, autocommit=True) as conn:
        assert conn.execute("select n from survives").fetchone() == (7,)


def test_stop_and_cleanup_are_quick_and_complete(base: Path) -> None:
    pg = LocalPostgres(base_dir=base).start()
    top = pg.top
    assert top is not None
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("create table t as select generate_series(1, 100000) n")
    began = time.monotonic()
    pg.cleanup()
    took = time.monotonic() - began
    assert not top.exists() and not processes_in(top)
    assert took < 2, took
    assert list(base.iterdir()) == []
    pg.cleanup()  # twice is fine


ORPHAN_MAKER = """
import sys, time
from pgmq_sim.embedded.postgres import LocalPostgres
pg = LocalPostgres(base_dir=sys.argv[1]).start()
print(pg.top, pg.watchdog_pid, pg.postmaster_pid, flush=True)
time.sleep(600)
"""


def test_start_sweeps_orphans_whose_owner_and_watchdog_were_killed(base: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_MAKER, str(base)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        words = child.stdout.readline().split()
        assert len(words) == 3, words
        top, watchdog, postmaster = Path(words[0]), int(words[1]), int(words[2])
        os.kill(watchdog, signal.SIGKILL)
        assert wait_for(lambda: state(watchdog) in (None, "Z"), 5)
    finally:
        child.kill()
        child.wait(timeout=10)
    # owner and watchdog are both dead: nothing is left that could remove the server now
    assert top.exists() and state(postmaster) not in (None, "Z"), "an orphan should be left to sweep"
    live = LocalPostgres(base_dir=base).start()  # an owner that is alive: its directory must stay
    try:
        assert not top.exists()
        assert wait_for(lambda: not processes_in(top), 5), processes_in(top)
        with LocalPostgres(base_dir=base) as other:
            assert live.top is not None and live.top.exists() and other.top != live.top
            with psycopg.connect(live.dsn) as conn:
                assert conn.execute("select 1").fetchone() == (1,)
    finally:
        live.cleanup()
    assert list(base.iterdir()) == []
