"""The embedded server's processes, seen through /proc: finding, signalling and waiting for them,
removing an orphaned server, and the watchdog that removes ours when its owner dies however it died.

No psutil: the watchdog must start fast and import little.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "pgmq-sim-pg-"
MARKER = "owner"
UNMARKED_GRACE_S = 60.0  # an unmarked directory younger than this may be another start in progress
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses),
    from the state on; None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return text[text.rfind(")") + 2 :].split()


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a live process, None if gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
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


def wait_stopped(pids: list[int], timeout: float) -> bool:
    """Until every one of pids is stopped (state T) or gone."""
    deadline = time.monotonic() + timeout
    while any((info := proc_stat(pid)) is not None and info[0] not in ("T", "t") for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
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


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU of these processes and of their children that have exited (a backend
    that ended is counted in its postmaster's cutime), from /proc."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / CLOCK_TICKS


def start_watchdog(top: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A process in its own session (Ctrl-C to our process group misses it) that removes `top` when
    the pipe's write end, held only by us and returned here, closes."""
    read_end, write_end = os.pipe()  # both non-inheritable: no server process gets a copy
    me = os.getpid()
    env = os.environ.copy()
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "pgmq_sim.embedded", "--watch", str(top), str(me), str(start_time(me))],
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
    return watchdog, write_end
