"""What a steady run costs: the queue's cost per message apart from the tool's, and the tool's own.

At a steady arrival rate (the production case) most idle workers wait; what they and the producer
spend is the simulation's, not the queue's. This prints, for -wakeup notify and -wakeup poll at
each rate, per message: empty claims, the client's CPU, commits and buffer hits (JSON
`server_cost`), the split of the server's transactions by role (`server_cost.roles`), and the
end-to-end latency. The client's CPU is read two ways: `client us/msg` is the JSON's
`client.cpu_us_per_msg` (the whole process, producer, listener and housekeeping included, once
every worker had its session; the logins are the JSON's `client.logins`, apart), `process us/msg`
the process from its start to its exit (start-up, install, logins, audit and report included;
user + system from wait4).

    pgmq-sim -duration D -rate R -workers 12 -work-ms 1-10 -orders 100 -claim indexed -wakeup W

At 3,000/s the work is 0-1 ms (--work-ms-at), as issue 33's row has it: a steady rate a fast
queue serves. With notify at 800/s the same run is measured with -wait-sample-hz 0 too, beside
it: the wait sampler's share of the client's CPU is the difference.

Rounds are interleaved (every cell once per round, rotating); medians of --repeat rounds.

Targets (issue 33, "one event loop per process"), checked with notify: at 800/s client CPU <= 150
us per message and empty claims <= 0.1 per message (issue 51); at 3,000/s client CPU <= 100 us per message;
the sampler's share <= 2% at 800/s; the queue's own transactions (an insert, a completion, the
empty claims) <= 2.2 per message at 800/s. `commits/msg` is all the server counted: the queue's,
the tool's (clock reads, the run record, the housekeeper) and one per notification the LISTEN
session reads (PostgreSQL runs a transaction to read each). At 100/s the fixed cost of idle
workers shows.

    python bench/steady_rate.py                    # about 8 minutes: 2 wake-ups x 3 rates x 3 rounds x 20 s
    python bench/steady_rate.py --rates 800,3000 --wakeups notify --duration 30 --repeat 3
"""

from __future__ import annotations

import argparse
from typing import Any

import _common as c
import psycopg

TARGETS = {  # cell: (figure, bound, what), checked on notify
    "notify@800": (
        ("empty/msg", 0.1, "empty claims per message"),
        ("client us/msg", 150.0, "client CPU per message (JSON client.cpu_us_per_msg)"),
        ("queue tx/msg", 2.2, "the queue's transactions per message (producer, consumers, empty claims)"),
    ),
    "notify@3000": (("client us/msg", 100.0, "client CPU per message (JSON client.cpu_us_per_msg)"),),
}
SAMPLER_CELL, NO_SAMPLER = "notify@800", "notify@800/no-sampler"
SAMPLER_SHARE = 0.02


def figures(run: dict[str, Any]) -> dict[str, float | None]:
    """The row's figures from one run's JSON."""
    done = max(1, run["processed"])
    cost = run.get("server_cost") or {}
    roles = cost.get("roles") or {}
    client = run["client"]
    account = run.get("latency_split") or {}  # the latency account, computed after the run
    logins = client.get("logins") or {}

    def role_tx(role: str) -> float | None:
        return (roles.get(role) or {}).get("transactions_per_msg")

    return {
        "msg/s": run["throughput_per_s"],
        "empty/msg": run["empty_claims"] / done,
        "client us/msg": client["cpu_us_per_msg"],
        "process us/msg": run["_bench"]["cpu_s"] * 1e6 / done,
        "login ms": logins.get("cpu_ms_each"),
        "commits/msg": cost.get("commits_per_msg"),
        "hits/msg": cost.get("blks_hit_per_msg"),
        "WAL B/msg": cost.get("wal_bytes_per_msg"),
        "producer tx": role_tx("producer"),
        "consumer tx": role_tx("consumers"),
        "empty tx": role_tx("empty_claims"),
        "tool tx": role_tx("tool"),
        "queue tx/msg": queue_tx(roles),
        "e2e p50": run["latency_ms"]["e2e"]["p50"],
        "e2e p99": run["latency_ms"]["e2e"]["p99"],
        "account ms": None if account.get("seconds") is None else account["seconds"] * 1000,
    }


def queue_tx(roles: dict[str, Any]) -> float | None:
    values = [
        (roles.get(r) or {}).get("transactions_per_msg") for r in ("producer", "consumers", "empty_claims")
    ]
    return None if None in values else sum(v for v in values if v is not None)


def statements_by_role(dsn: str) -> None:
    """The role split by statement needs pg_stat_statements (the embedded server preloads it)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension if not exists pg_stat_statements")
    except psycopg.Error as exc:
        print(f"pg_stat_statements not available ({exc.sqlstate}): roles by transaction counts only")


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rates", default="100,800,3000", help="msg/s, comma list (default 100,800,3000)")
    parser.add_argument("--wakeups", default="notify,poll", help="comma list (default notify,poll)")
    parser.add_argument("--duration", type=float, default=20, help="seconds per run (default 20)")
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument(
        "--work-ms-at",
        default="3000=0-1",
        help="RATE=MIN-MAX work at one rate, comma list (default 3000=0-1)",
    )
    parser.add_argument("--orders", type=int, default=100, help="order_ids per type (default 100)")
    c.common_args(parser)
    return parser


def main() -> None:
    args = arguments().parse_args()
    rates = [float(r) for r in c.comma_list(args.rates)]
    wakeups = c.comma_list(args.wakeups)
    work_at = {float(k): v for k, _, v in (item.partition("=") for item in c.comma_list(args.work_ms_at))}

    def cli_args(wakeup: str, rate: float) -> list[str]:
        return [
            "-duration", f"{args.duration:g}", "-rate", f"{rate:g}", "-workers", str(args.workers),
            "-work-ms", work_at.get(rate, args.work_ms), "-orders", str(args.orders), "-claim", "indexed",
            "-wakeup", wakeup,
        ]  # fmt: skip

    print("steady rate: " + c.cli_command_text(cli_args("<notify|poll>", 0)).replace("-rate 0", "-rate R"))
    for rate, work in work_at.items():
        print(f"  at {rate:g}/s: -work-ms {work}")
    cells = [f"{wakeup}@{rate:g}" for rate in rates for wakeup in wakeups]
    if SAMPLER_CELL in cells:
        cells.append(NO_SAMPLER)
    with c.server_from_args(args.dsn) as server:
        statements_by_role(server.dsn)

        def measure(cell: str, _round: int) -> dict[str, Any]:
            name, _, variant = cell.partition("/")
            wakeup, rate = name.split("@")
            extra = ["-wait-sample-hz", "0"] if variant == "no-sampler" else []
            return c.run_cli(cli_args(wakeup, float(rate)) + extra, server.dsn)

        runs = c.interleaved(cells, args.repeat, measure)

    columns = list(figures(runs[cells[0]][0]))
    digits = {
        "login ms": 2,
        "empty/msg": 2,
        "commits/msg": 2,
        "producer tx": 2,
        "consumer tx": 2,
        "empty tx": 2,
        "queue tx/msg": 2,
        "tool tx": 2,
    }
    rows = []
    for cell in cells:
        medians = {k: c.median([v for r in runs[cell] if (v := figures(r)[k]) is not None]) for k in columns}
        rows.append(
            [cell, *(c.fmt(medians[k], digits.get(k, 1 if k.startswith("e2e") else 0)) for k in columns)]
        )
    audits = c.audit_verdicts(r for v in runs.values() for r in v)
    c.print_table(
        ["wake-up@rate", *columns], rows, f"medians of {args.repeat} interleaved rounds; audits {audits}"
    )
    checked = [cell for cell in TARGETS if cell in runs]
    if not checked:
        print(f"targets: not checked (they are for {', '.join(TARGETS)})")
    for cell in checked:
        print(f"\ntargets at {cell}:")
        for key, bound, what in TARGETS[cell]:
            value = c.median([v for r in runs[cell] if (v := figures(r)[key]) is not None])
            verdict = c.verdict(value, bound, higher_is_better=False)
            print(f"  {what}: {c.fmt(value, 2)} <= {bound:g}: {verdict}")
    if NO_SAMPLER in runs:
        with_it = c.median([figures(r)["client us/msg"] or 0.0 for r in runs[SAMPLER_CELL]])
        without = c.median([figures(r)["client us/msg"] or 0.0 for r in runs[NO_SAMPLER]])
        share = (with_it - without) / with_it if with_it else None
        print(
            f"  the wait sampler's and the lock census's share of the client's CPU at 20 Hz and 2 Hz"
            f" ({c.fmt(with_it, 0)} against"
            f" {c.fmt(without, 0)} us/msg without): {c.fmt(None if share is None else share * 100, 1)}%"
            f" <= {SAMPLER_SHARE:.0%}: {c.verdict(share, SAMPLER_SHARE, higher_is_better=False)}"
        )


if __name__ == "__main__":
    main()
