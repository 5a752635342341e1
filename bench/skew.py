"""Hot keys: the max sustainable rate with uniform keys against `-key-skew zipf:1.2`, -orders 1000.

Issue requirement: the max sustainable rate (with the sweep of the capacity issue) with uniform keys
against zipf:1.2 at -orders 1000. How much does a hot key cost? No target: the figures are this
machine's.

One pgmq-sim run per cell, the tool's own rate sweep over the same ladder for both cells, so the
steps compare rate by rate:

    pgmq-sim -sweep rate=R1,R2,... -step 20 -settle 10 -workers 12 -orders 1000 -work-ms 1-10
             -claim indexed -key-skew uniform|zipf:1.2

other settings at the tool's defaults (-wakeup poll, completion by marking, audit on). How a step is
measured, how its backlog is kept apart from the next step's (the settle) and how the knee is decided
are in bench/knee.py's docstring (the same code reads the JSON here): in short, a step fails when its
backlog grew through it (slope above 2% of the offered rate per second and more than one second of
offered messages waiting at its end) or, with --slo, when its e2e p99 broke the SLO; the knee is the
highest rate that passed with every lower rate passing.

What a hot key can cost. A group advances one message per work time (message k+1 starts after k
committed), so a group that gets a share f of all messages caps the run at 1 / (f x mean work).
zipf:1.2 over 1000 keys gives key 1 a share of 0.2306 of its type (`zipf_share`), so 0.0769 of all
messages with 3 types (`keys.expected_hot_share` in the JSON): a cap of 13 groups' worth,
13 / 5.5 ms ~ 2,370 msg/s of work alone (`work_bound_per_s`, which takes the hottest group into
account; `ordering_bound_per_s` adds each message's claim and completion to the cycle). The 12
workers already bound either cell at 12 / 5.5 ms ~ 2,180 msg/s of work alone (4 per type;
`worker_bound_per_s` adds the claim and completion), so with 12 workers the hot key's cap lies just
above the workers' and the throughput cost can be small; the cost shows in the hot groups' latency:
near the cap they queue. The JSON gives the
producer's key counts (`keys`: distinct groups, the hottest groups with their share); the run log
gives each message's end-to-end time (server clock: done - added), from which the script splits each
step's e2e p99 into the hottest group of each type (`hot`: order_id 1 under zipf) and the rest.
The `indexed` claim walks the group heads in ascending order_id and locks the first free one, so
order_id 1, zipf's hottest key, is the first group every claim tries: the hot group is served
first and waits least, and when the workers fall behind the groups with high order_ids wait
longest (their e2e is the step's tail). The hot/rest split shows this; with a claim that served
groups in arrival order the hot group would be the one to queue.

The printed figures: per cell the knee, the bounds, the key figures; the ratio zipf knee / uniform
knee (and the same for the largest achieved rate of any step, which does not depend on the verdict
rules); per rate both cells' achieved rate, e2e p99 and verdict, and the skewed cell's hot/rest p99.

--repeat N runs N rounds with the cells interleaved (order rotating), median knees; default 1.

    python bench/skew.py                                  # about 5 minutes on 2 cores
    python bench/skew.py --step 2 --settle 1 --steps 3    # quick form, under a minute
    python bench/skew.py --skews uniform,zipf:1.2,zipf:2 --ladder zipf:2=100,200,300,400
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import _common as c
import _sweep_report as sr
import knee as k

LADDER = "400,700,900,1100,1300,1500"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def hot_split(log: Path, hot: set[tuple[str, int]]) -> list[dict[str, float]]:
    """Per sweep step (by each message's added time between the log's `sweep step N/M` events):
    messages, the hot groups' share of them, and e2e p99 (done - added, server clock) of the hot
    groups' messages and of the rest."""
    lines = c.read_run_log(log)
    starts = [at for at, text in lines.events if text.startswith("sweep step ") and "/" in text.split()[2]]
    out: list[dict[str, list[float]]] = [{"hot": [], "rest": []} for _ in starts]
    for h in lines.handled:
        if h.added is None or h.done is None or not starts:
            continue
        index = sum(1 for s in starts if s <= h.added) - 1
        if index < 0:
            index = 0
        key = "hot" if (h.queue_type, h.order_id) in hot else "rest"
        out[index][key].append((h.done - h.added).total_seconds() * 1000)
    return [
        {
            "messages": len(s["hot"]) + len(s["rest"]),
            "hot_share": len(s["hot"]) / (len(s["hot"]) + len(s["rest"]))
            if s["hot"] or s["rest"]
            else math.nan,
            "hot_p99_ms": percentile(s["hot"], 99),
            "rest_p99_ms": percentile(s["rest"], 99),
            "hot_p50_ms": percentile(s["hot"], 50),
        }
        for s in out
    ]


def hottest_per_type(run: Mapping[str, Any]) -> set[tuple[str, int]]:
    """The hottest group of each type the producer made (the JSON's `keys.hottest`)."""
    out: dict[str, int] = {}
    for g in (run.get("keys") or {}).get("hottest") or []:
        out.setdefault(g["queue_type"], g["order_id"])
    return set(out.items())


def run_cell(cli: list[str], dsn: str, keep: str | None, name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pgmq-bench-log-") as tmp:
        log = Path(tmp) / "run.log"
        data = c.run_cli(cli, dsn, keep_log=log)
        data["_hot"] = hot_split(log, hottest_per_type(data))
    k.keep_json(keep, name, data)
    return data


def key_figures(run: Mapping[str, Any]) -> list[str]:
    """groups made, expected and measured hottest share, the three hottest groups' share, the hot cap."""
    keys = run.get("keys") or {}
    hottest = keys.get("hottest") or []
    expected = keys.get("expected_hot_share")
    work_s = run["work_mean_ms"] / 1000
    cap = 1 / (expected * work_s) if expected and work_s else math.nan
    return [
        str(keys.get("groups", "-")),
        c.fmt(expected, 4),
        c.fmt(hottest[0]["share"], 4) if hottest else "-",
        c.fmt(sum(g["share"] for g in hottest[:3]), 3) if hottest else "-",
        c.fmt(cap, 0),
    ]


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--skews", default="uniform,zipf:1.2", help="-key-skew cells (default uniform,zipf:1.2)"
    )
    parser.add_argument("--orders", type=int, default=1000, help="-orders (default 1000)")
    parser.add_argument("--claim", default="indexed", help="-claim (default indexed)")
    k.sweep_flags(parser, step=20, settle=10)
    return parser


def main() -> None:
    args = arguments().parse_args()

    cells = c.comma_list(args.skews)
    overrides = k.ladder_overrides(args.ladder)
    unknown = set(overrides) - set(cells)
    if unknown:
        raise SystemExit(
            f"--ladder for cells not run: {', '.join(sorted(unknown))} (cells: {', '.join(cells)})"
        )
    ladders = {cell: k.thin(k.rates(overrides.get(cell, LADDER)), args.steps) for cell in cells}
    label = {cell: [cell, str(args.orders), str(3 * args.orders)] for cell in cells}

    def cli(cell: str) -> list[str]:
        out = ["-claim", args.claim, "-orders", str(args.orders), "-key-skew", cell, *k.shape_args(args)]
        return out + k.sweep_args(args, ladders[cell])

    runs = k.sweep_cells(cells, args, cli, run_cell)
    slo = k.slo_text(args)
    shape = f"-claim {args.claim} -orders {args.orders} -workers {args.workers} -work-ms {args.work_ms}"
    for cell in cells:
        run = runs[cell][-1]
        sr.print_steps(
            run,
            f"{cell}: {shape}; -sweep {run['sweep']['spec']} -step {args.step:g} -settle {args.settle:g}{slo}"
            + (f"; round {len(runs[cell])} of {len(runs[cell])}" if len(runs[cell]) > 1 else ""),
        )

    # rate by rate, every cell side by side (the last round's runs)
    rates = sorted({s["setting"] for cell in cells for s in sr.steps(runs[cell][-1])})
    headers = ["rate/s"]
    for cell in cells:
        headers += [f"{cell} ach/s", "p99 ms", "verdict"]
        if cell != "uniform":
            headers += ["hot share", "hot p50", "hot p99", "rest p99"]
    rows = []
    for rate in rates:
        row = [c.fmt(rate, 0)]
        for cell in cells:
            run = runs[cell][-1]
            found = [(i, s) for i, s in enumerate(sr.steps(run)) if s["setting"] == rate]
            if not found:
                row += ["-", "-", "-"] + (["-"] * 4 if cell != "uniform" else [])
                continue
            i, s = found[0]
            row += [c.fmt(s["achieved_per_s"], 0), sr.ms(s["e2e_ms"]["p99"]), s["verdict"]]
            if cell != "uniform":
                hot = run["_hot"][i] if i < len(run["_hot"]) else {}
                row += [
                    c.fmt(hot.get("hot_share"), 3),
                    sr.ms(hot.get("hot_p50_ms")),
                    sr.ms(hot.get("hot_p99_ms")),
                    sr.ms(hot.get("rest_p99_ms")),
                ]
        rows.append(row)
    c.print_table(
        headers,
        rows,
        "rate by rate (last round): achieved/s, e2e p99 and verdict per cell; hot = the hottest group of each"
        " type, rest = the other groups (e2e from the run log, messages produced in the step)",
    )

    sr.print_knees(
        cells,
        runs,
        label,
        ["skew", "orders", "possible groups"],
        f"max sustainable rate (knee) per key skew, {args.repeat} round(s); {shape}, wake-up"
        f" {args.wakeup or 'poll'}{slo}",
    )
    c.print_table(
        ["skew", "groups made", "expected hot share", "hottest share", "top-3 share", "hot cap/s"],
        [[cell, *key_figures(runs[cell][-1])] for cell in cells],
        "keys (JSON `keys`, last round): hot cap = 1 / (expected hot share x mean work time)",
    )
    base = cells[0]
    base_knee = c.median([sr.knee(run) for run in runs[base]])
    base_max = c.median([sr.max_achieved(run) for run in runs[base]])
    for cell in cells[1:]:
        knee = c.median([sr.knee(run) for run in runs[cell]])
        best = c.median([sr.max_achieved(run) for run in runs[cell]])
        print(
            f"{cell} / {base}: knee {c.fmt(knee, 0)} / {c.fmt(base_knee, 0)} = {c.fmt(knee / base_knee, 2)};"
            f" max achieved {c.fmt(best, 0)} / {c.fmt(base_max, 0)} = {c.fmt(best / base_max, 2)}"
        )


if __name__ == "__main__":
    main()
