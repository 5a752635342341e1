"""The source documents' headline figures, each reproduced side by side in one run.

- 002 (the Java queue): a transaction per batch against a transaction per message, on 002's own
  design (`-queue next-attempt`), zero work: ~700 msg/s against ~1,400 on the article's 8-core VM,
  so about 2x.
- 001 (the course): two workers over 1,000 messages; a claim without a lock (the head read, then
  updated without re-checking its state) completes some messages twice (the course saw 1,540
  journal rows for 1,000 ids); the same claim with FOR UPDATE SKIP LOCKED, exactly 1,000.
- 003 (advisory locks): the advisory design run by the tool against pgbench running the same
  assignment SQL (the claim and the completion, one transaction per task) with the same clients;
  the seed ran 32 clients on a large machine (~57,000 tps); --clients scales it to this one.

    python bench/seeds.py                                        # about 2 minutes on 2 cores
    python bench/seeds.py --messages 20000 --clients 32 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import _common as c
import _pgbench as pgb

TASKS_SCHEMA = """
drop table if exists tasks;
create table tasks (id bigint primary key, kind text not null, account bigint not null,
                    state text not null default 'new');
create index tasks_new on tasks (kind, id) where state = 'new';
"""
ENQUEUE = "insert into tasks (id, kind, account) values ($1, $2, $3)"
COMPLETE = "update tasks set state = 'done' where id = $1"
PENDING = "select id from tasks where state <> 'done'"
CLAIMS = {  # the course's take_message(), without and with the row lock
    "no lock": """
        with head as (select id from tasks where kind = $1 and state = 'new' order by id limit $2)
        update tasks t set state = 'taken' from head where t.id = head.id
        returning t.id as msg_id, t.kind as queue_type, t.account as order_id""",
    "skip locked": """
        with head as (select id from tasks where kind = $1 and state = 'new' order by id limit $2
                      for update skip locked)
        update tasks t set state = 'taken' from head where t.id = head.id
        returning t.id as msg_id, t.kind as queue_type, t.account as order_id""",
}


def course_folders(root: Path) -> dict[str, Path]:
    """The course's queue as two unordered designs that differ only in the claim's lock."""
    folders = {}
    for name, claim in CLAIMS.items():
        folder = root / name.replace(" ", "-")
        folder.mkdir()
        files = {"schema.sql": TASKS_SCHEMA, "enqueue.sql": ENQUEUE, "claim.sql": claim}
        files |= {"complete.sql": COMPLETE, "pending.sql": PENDING, "queue.toml": "ordered = false\n"}
        for file, text in files.items():
            (folder / file).write_text(text)
        folders[name] = folder
    return folders


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--messages", type=int, default=10000, help="messages per 002/003 run (default 10000)"
    )
    parser.add_argument("--course-messages", type=int, default=1000, help="001's messages (default 1000)")
    parser.add_argument("--clients", type=int, default=8, help="003's clients and workers (default 8)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    advisory = c.load_design("advisory")
    script = pgb.pgbench_script(advisory)
    per_txn = math.ceil(args.messages / args.clients)

    with tempfile.TemporaryDirectory(prefix="pgmq-seeds-") as tmp, c.server_from_args(args.dsn) as server:
        folders = course_folders(Path(tmp))
        bench_dsn = pgb.bench_database(server.dsn)
        zero = ["-work-ms", "0", "-orders", "100"]
        cells = {
            "002 -batch 1": ["-queue", "next-attempt", "-batch", "1", "-fill-db", str(args.messages), *zero],
            "002 -batch 10": [
                "-queue",
                "next-attempt",
                "-batch",
                "10",
                "-fill-db",
                str(args.messages),
                *zero,
            ],
            **{
                f"001 {name}": [
                    "-queue",
                    str(folder),
                    "-workers",
                    "2",
                    "-types",
                    "1",
                    "-work-ms",
                    "0",
                    "-fill-db",
                    str(args.course_messages),
                ]
                for name, folder in folders.items()
            },
            "003 tool": [
                "-queue",
                "advisory",
                "-workers",
                str(args.clients),
                "-fill-db",
                str(args.messages),
                *zero,
            ],
            "003 pgbench": [],
        }

        def measure(cell: str, _r: int) -> dict[str, float]:
            if cell != "003 pgbench":
                data = c.run_cli(cells[cell], server.dsn)
                audit = data.get("audit") or {}
                return {
                    "msg_s": float(data["throughput_per_s"]),
                    "journal_rows": float(audit.get("processed", 0) + audit.get("duplicates", 0)),
                    "ids": float(audit.get("processed", 0)),
                    "commits": float((data.get("server_cost") or {}).get("commits_per_msg") or float("nan")),
                }
            pgb.prepare_queue(bench_dsn, advisory, args.messages + 2000, 100, analyze=True, journal=False)
            res = pgb.run_pgbench(server, bench_dsn, script, args.clients, per_txn, "prepared", 2)
            return {
                "msg_s": res.msg_per_s,
                "journal_rows": float("nan"),
                "ids": float("nan"),
                "commits": float("nan"),
            }

        runs = c.interleaved(list(cells), args.repeat, measure)

    def med(cell: str, key: str) -> float:
        return c.median([r[key] for r in runs[cell]])

    batch_ratio = med("002 -batch 10", "msg_s") / med("002 -batch 1", "msg_s")
    tool_ratio = med("003 tool", "msg_s") / med("003 pgbench", "msg_s")
    rows = [
        [
            "002 next-attempt, -batch 1",
            c.fmt(med("002 -batch 1", "msg_s")),
            c.fmt(med("002 -batch 1", "commits"), 3),
            "",
        ],
        [
            "002 next-attempt, -batch 10",
            c.fmt(med("002 -batch 10", "msg_s")),
            c.fmt(med("002 -batch 10", "commits"), 3),
            f"{c.fmt(batch_ratio, 2)}x the per-message rate (002: ~2x)",
        ],
    ]
    for name in CLAIMS:
        cell = f"001 {name}"
        rows.append(
            [
                f"001 claim with {name}, 2 workers",
                c.fmt(med(cell, "msg_s")),
                "",
                f"{c.fmt(med(cell, 'journal_rows'), 0)} completions for {c.fmt(med(cell, 'ids'), 0)} ids",
            ]
        )
    rows += [
        [f"003 advisory, the tool, {args.clients} workers", c.fmt(med("003 tool", "msg_s")), "", ""],
        [
            f"003 advisory, pgbench, {args.clients} clients",
            c.fmt(med("003 pgbench", "msg_s")),
            "",
            f"the tool at {c.fmt(tool_ratio, 2)}x pgbench",
        ],
    ]
    c.print_table(
        ["seed figure", "msg/s", "commits/msg", "ratio"],
        rows,
        f"medians of {args.repeat} interleaved rounds; 002 and 003: {args.messages} messages, zero work,"
        f" -orders 100; 001: {args.course_messages} messages, -types 1",
    )


if __name__ == "__main__":
    main()
