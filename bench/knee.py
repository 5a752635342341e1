"""Knee: the max sustainable rate of `seed` and `indexed` in the seed's shape, at -orders 2 and 100.

Issue requirement: a bench script finds the max sustainable rate of `seed` and `indexed` in the
seed's shape (12 workers, 1-10 ms work), with `-orders 2` and with `-orders 100`, on this machine,
and prints the knee table. No target: the figures are this machine's.

One pgmq-sim run per cell, the tool's own rate sweep (one continuous run that holds each rate of
the cell's ladder for a step):

    pgmq-sim -sweep rate=R1,R2,... -step 15 -settle 10 -workers 12 -orders 2|100 -work-ms 1-10
             -claim seed|indexed

everything else at the tool's defaults, as the seed runs: -wakeup poll (an idle worker sleeps 1 s
after an empty claim, so end-to-end latency is up to a second even far below the knee), completion
by marking (processed rows stay in the table), audit on. -orders 2 gives 6 groups, whose work-only
bound is 6 / 5.5 ms ~ 1,090 msg/s; -orders 100 gives 300 groups, and there the 12 workers bound it:
12 / 5.5 ms ~ 2,180 msg/s. The JSON's bounds (`ordering_bound_per_s`, `worker_bound_per_s`) count
each message's claim and completion in its group's cycle too, so they lie a little below these. On
2 shared cores the CPU may bind first.

How a step is measured (src/pgmq_sim/engine/sweeping.py): the producer offers the step's rate for
-step seconds; at the step's end the producer pauses (rate 0) and the settle waits until the
backlog (messages committed by the producer minus messages finished) is 0, or -settle seconds have
passed; the next step starts after that. So a step starts from an empty queue when its predecessor
drained, and its figures are its own: achieved/s = messages finished during the step (settle not
counted) / step length; its latency percentiles are those of the messages completed from its start
to the end of its settle (the ones it produced, when the settle drained). When the settle times out,
the rest (`backlog_left`) is inherited by the next step: it counts in that step's backlog and slope
and its latencies. The table shows it as the next step's "start backlog".

How the knee is decided (src/pgmq_sim/verdicts/knee.py, judge_step and knee_step): a step fails
when its e2e p99 is above -slo (only with --slo; none by default), or when its backlog grew through
it: the least-squares slope of the backlog (the step's start, each whole second inside it from the
run's timeline, its end) above 2% of the offered rate per second AND more than one second of offered
messages waiting at its end. The knee (`max_sustainable_per_s`) is the rate of the highest step that
passed with every lower step passing: one failing step caps it, even if higher steps pass again.
Consequences: an overload is seen only when (offered - capacity) x step > offered, i.e. above
capacity by more than 1/step of the offered rate (7% with 15 s steps; 50% with the quick form's
2 s steps, whose knees are not measurements); the knee is a rung of the ladder (resolution = its
spacing); "max ach/s" (the largest achieved rate of any step) is a capacity figure that does not
depend on the verdict rules.

Near the knee the e2e p99 of `indexed` is the wait of the groups with high order_ids: its claim
walks the group heads in ascending order_id and takes the first free one, so while the workers are
behind, low order_ids are served first and the others wait, while the p50 stays low. (The seed's
claim takes the first claimable row of its scan in the table's order, roughly the oldest head.)

The seed's claim scans the table for status 'N' (no index on it) and every message the run made
stays in the table, so the seed's claim gets slower as the run goes on: its knee depends on what the
ladder put in the table before ("rows" = messages inserted before the step, from the run's
timeline).

The audit (exactly once, order per group) runs once over the whole ramp; a sweep need not drain at
its end, so messages left behind by a failing last step are reported, not a failure.

--repeat N runs N rounds with the cells interleaved (order rotating) and reports the median knee
and every round's; default 1 (a round takes minutes).

    python bench/knee.py                                  # about 8 minutes on 2 cores
    python bench/knee.py --step 2 --settle 1 --steps 3    # quick form, under a minute
    python bench/knee.py --claims indexed --orders 100 --ladder indexed/100=1000..2400*1.15 --slo 2000

--auto runs the adaptive sweep (-sweep rate=auto) per cell instead of a ladder, prints how long the
search took and its bracket, then checks the knee from outside with fixed-rate runs of --check-s
seconds (default 30): --reruns of them at the knee (each must hold: the table says how many did, and
their p99s) and one 10% above it (it should fail; if it holds, the knee is conservative and the line
says so). A fixed run is judged by the sweep's own step rules (sweep.judge_step: its e2e p99 against
--slo itself, without the search's margin, its backlog's growth over the run).

    python bench/knee.py --auto --claims indexed --orders 100 --wakeup notify --step 10 --slo 250
    python bench/knee.py --auto --claims seed --orders 100 --wakeup notify --workers 6 --work-ms 20-20 \
        --step 10 --settle 10 --slo 250 --reruns 5    # issue 32's sweep: 5 reruns of 30 s at its knee
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import _common as c
import _sweep_report as sr

from pgmq_sim.model.sweep import slope_per_s
from pgmq_sim.verdicts.knee import UNFINISHED_SHARE, judge_step

# rates per (claim, orders); the seed's claim slows as the table grows, so its ladders are lower
LADDERS: dict[tuple[str, int], str] = {
    ("seed", 2): "200,300,400,500,600,750",
    ("indexed", 2): "300,500,650,800,950,1100",
    ("seed", 100): "150,250,350,450,550,700",
    ("indexed", 100): "500,800,1000,1200,1400,1650",
}
DEFAULT_LADDER = "200,400,800,1200,1600,2400"  # a cell LADDERS does not name


def rates(text: str) -> list[float]:
    """A ladder as rates: A,B,C or A..B*F (geometric), as -sweep rate=... reads them."""
    text = text.strip()
    if ".." in text:
        low_text, _, rest = text.partition("..")
        high_text, _, factor_text = rest.partition("*")
        low, high, factor = float(low_text), float(high_text), float(factor_text)
        if not (0 < low <= high and factor > 1):
            raise SystemExit(f"ladder {text}: needs 0 < A <= B and F > 1")
        out: list[float] = []
        value = low
        while value <= high * (1 + 1e-9):
            out.append(round(value))
            value *= factor
        return out
    return [float(v) for v in c.comma_list(text)]


def thin(values: Sequence[float], steps: int | None) -> list[float]:
    """At most `steps` rungs of a ladder, evenly over it, keeping the first and the last."""
    if steps is None or steps >= len(values):
        return list(values)
    if steps <= 1:
        return [values[-1]]
    return [values[round(i * (len(values) - 1) / (steps - 1))] for i in range(steps)]


def ladder_overrides(given: Sequence[str]) -> dict[str, str]:
    """--ladder CELL=RATES, CELL as the cell names it (claim/orders, or a skew)."""
    out: dict[str, str] = {}
    for item in given:
        cell, eq, text = item.partition("=")
        if not eq or not text.strip():
            raise SystemExit(f"--ladder {item}: give CELL=RATES, e.g. indexed/100=500,1000,1500")
        out[cell.strip()] = text.strip()
    return out


def sweep_args(args: argparse.Namespace, ladder: Sequence[float]) -> list[str]:
    """-sweep, -step, -settle and -slo for a ladder."""
    out = ["-sweep", "rate=" + ",".join(f"{r:g}" for r in ladder), "-step", f"{args.step:g}"]
    out += ["-settle", f"{args.settle:g}"]
    return out + (["-slo", f"e2e-p99={args.slo:g}"] if args.slo is not None else [])


def sweep_flags(parser: argparse.ArgumentParser, step: float, settle: float) -> None:
    """The flags of a sweep per cell (both knee.py and skew.py)."""
    parser.add_argument("--workers", type=int, default=12, help="workers (default 12)")
    parser.add_argument("--work-ms", default="1-10", help="simulated work MIN-MAX ms (default 1-10)")
    parser.add_argument("--step", type=float, default=step, help=f"seconds per rate step (default {step:g})")
    parser.add_argument(
        "--settle",
        type=float,
        default=settle,
        help=f"at most this many seconds to drain (default {settle:g})",
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="use at most N rungs of each ladder (first and last kept)"
    )
    parser.add_argument(
        "--ladder",
        action="append",
        default=[],
        metavar="CELL=RATES",
        help="a cell's rates instead of the default: A,B,C or A..B*F",
    )
    parser.add_argument(
        "--slo", type=float, default=None, help="-slo e2e-p99=MS for every step (default none)"
    )
    parser.add_argument("--wakeup", default=None, help="-wakeup poll|notify (default: the tool's, poll)")
    parser.add_argument("--no-audit", action="store_true", help="pass -no-audit")
    parser.add_argument("--keep", default=None, metavar="DIR", help="write each run's JSON into DIR")
    c.common_args(parser, repeat=1)


def keep_json(directory: str | None, name: str, data: Mapping[str, Any]) -> None:
    """The run's JSON as the tool wrote it (plus the bench's own keys), as DIR/NAME.json."""
    if directory is None:
        return
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    text = json.dumps({k: v for k, v in data.items() if k != "_bench"}, indent=1, default=str)
    (path / f"{name.replace('/', '-').replace(':', '-')}.json").write_text(text, encoding="utf-8")


def shape_args(args: argparse.Namespace) -> list[str]:
    out = ["-workers", str(args.workers), "-work-ms", args.work_ms]
    out += ["-wakeup", args.wakeup] if args.wakeup else []
    return out + (["-no-audit"] if args.no_audit else [])


def run_cell(cli: list[str], dsn: str, keep: str | None, name: str) -> dict[str, Any]:
    data = c.run_cli(cli, dsn)
    keep_json(keep, name, data)
    return data


def describe_run(run: Mapping[str, Any]) -> str:
    at = sr.knee_step(run)
    return (
        f"knee {c.fmt(sr.knee(run), 0)}/s"
        + ("" if at is None else f" (step {at['index'] + 1}, p99 {sr.ms(at['e2e_ms']['p99'])} ms)")
        + f", max achieved {c.fmt(sr.max_achieved(run), 0)}/s, audit {sr.audit_text(run)}"
    )


def sweep_cells(
    cells: Sequence[str],
    args: argparse.Namespace,
    cli: Callable[[str], list[str]],
    run_cell: Callable[[list[str], str, str | None, str], dict[str, Any]],
) -> dict[str, list[dict[str, Any]]]:
    """Each cell's command, then every cell's sweep on one server, interleaved over --repeat rounds."""
    for cell in cells:
        print(f"{cell}: " + c.cli_command_text(cli(cell)))
    with c.server_from_args(args.dsn) as server:
        runs = c.interleaved(
            cells, args.repeat, lambda cell, r: run_cell(cli(cell), server.dsn, args.keep, f"{cell}-{r + 1}")
        )
    for cell in cells:
        for i, run in enumerate(runs[cell]):
            print(f"  {cell} round {i + 1}: {describe_run(run)}")
    return runs


def slo_text(args: argparse.Namespace) -> str:
    return f", SLO e2e p99 <= {args.slo:g} ms" if args.slo is not None else ", no SLO (backlog growth alone)"


def fixed_verdict(run: Mapping[str, Any], rate: float, workers: int, slo: float | None) -> tuple[str, str]:
    """A fixed-rate run judged as a sweep step is: p99 against the SLO, the backlog's growth."""
    samples = [s for s in run.get("timeline") or [] if s.get("offered")]
    points = [(float(s["second"] + 1), float(s["backlog"])) for s in samples]
    backlog_end = int(points[-1][1]) if points else 0
    grown = backlog_end - (int(points[0][1]) if points else 0)
    allowance = UNFINISHED_SHARE * (run.get("produced") or 0) + workers
    verdict, reasons = judge_step(
        rate, run["latency_ms"]["e2e"]["p99"], backlog_end, slope_per_s(points), slo, grown, allowance,
        run.get("throughput_per_s"),
    )  # fmt: skip
    return verdict, "; ".join(reasons)


def auto_main(args: argparse.Namespace, cells: Sequence[str]) -> None:
    """Each cell's adaptive sweep, then its knee checked with fixed-rate runs at it and 10% above."""
    slo = ["-slo", f"e2e-p99={args.slo:g}"] if args.slo is not None else []

    def cell_args(cell: str) -> list[str]:
        claim, orders = cell.split("/")
        return ["-claim", claim, "-orders", orders, *shape_args(args)]

    rows = []
    with c.server_from_args(args.dsn) as server:
        for cell in cells:
            sweep = ["-sweep", "rate=auto", "-step", f"{args.step:g}", "-settle", f"{args.settle:g}", *slo]
            print(f"{cell}: " + c.cli_command_text([*cell_args(cell), *sweep]), flush=True)
            run = run_cell([*cell_args(cell), *sweep], server.dsn, args.keep, f"{cell}-auto")
            result = run["sweep"]
            found = result["max_sustainable_per_s"]
            print(
                f"  {result['headline']} (the search took {run['elapsed_s']:.0f} s,"
                f" {len(sr.steps(run))} steps)"
            )
            checks = []
            for share in [1.0] * args.reruns + [1.1]:
                if found is None:
                    checks.append(("-", "-", "no knee"))
                    continue
                rate = round(found * share, 1)
                fixed = run_cell(
                    [*cell_args(cell), "-duration", f"{args.check_s:g}", "-rate", f"{rate:g}"],
                    server.dsn, args.keep, f"{cell}-at-{rate:g}-{len(checks) + 1}",
                )  # fmt: skip
                verdict, why = fixed_verdict(fixed, rate, args.workers, args.slo)
                checks.append(
                    (
                        f"{rate:g}",
                        sr.ms(fixed["latency_ms"]["e2e"]["p99"]),
                        verdict + (f" ({why})" if why else ""),
                    )
                )
                print(
                    f"  {args.check_s:g} s at {rate:g}/s: p99 {checks[-1][1]} ms, {checks[-1][2]}", flush=True
                )
            confirmed = result.get("confirmed") or {}
            reruns, above = checks[:-1], checks[-1]
            held = sum(check[2].startswith("pass") for check in reruns)
            at = (
                reruns[0][0],
                ", ".join(check[1] for check in reruns),
                f"{held} of {len(reruns)} held" if found is not None else "no knee",
            )
            conservative = (
                "held: the knee is conservative" if above[2].startswith("pass") else "failed, as it should"
            )
            rows.append(
                [
                    cell,
                    c.fmt(found, 0) if found is not None else "-",
                    c.fmt(result.get("first_failing_per_s"), 0),
                    c.fmt((result.get("adaptive") or {}).get("resolution_reached"), 3),
                    f"{confirmed.get('seconds', 0):.0f} s, p99 {sr.ms(confirmed.get('e2e_p99_ms'))}:"
                    f" {confirmed.get('verdict', '-')}",
                    f"{run['elapsed_s']:.0f} s / {len(sr.steps(run))}",
                    f"p99 {at[1]} ms: {at[2]}",
                    f"{above[0]}/s: {above[1]} ms, {conservative if found is not None else '-'}",
                    sr.audit_text(run),
                ]
            )
    c.print_table(
        ["cell", "knee/s", "1st fail/s", "resolution", "hold", "search s / steps",
         f"{args.reruns} x {args.check_s:g} s at the knee", f"{args.check_s:g} s at +10%", "audit (search)"],
        rows,
        f"adaptive sweeps checked from outside; -workers {args.workers} -work-ms {args.work_ms},"
        f" wake-up {args.wakeup or 'poll'}{slo_text(args)}",
    )  # fmt: skip


def arguments() -> argparse.ArgumentParser:
    """Its arguments, apart: the tests parse the quick form with them."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claims", default="seed,indexed", help="strategies (default seed,indexed)")
    parser.add_argument("--orders", default="2,100", help="-orders values, comma list (default 2,100)")
    parser.add_argument("--auto", action="store_true", help="the adaptive sweep, checked with fixed runs")
    parser.add_argument(
        "--check-s", type=float, default=30, help="--auto: each fixed run's seconds (default 30)"
    )
    parser.add_argument(
        "--reruns",
        type=int,
        default=1,
        help="--auto: fixed runs at the knee, each --check-s long (default 1)",
    )
    sweep_flags(parser, step=15, settle=10)
    return parser


def main() -> None:
    args = arguments().parse_args()
    if args.auto:
        auto_main(
            args,
            [
                f"{claim}/{orders}"
                for orders in c.comma_list(args.orders)
                for claim in c.comma_list(args.claims)
            ],
        )
        return

    overrides = ladder_overrides(args.ladder)
    cells: list[str] = []
    ladders: dict[str, list[float]] = {}
    label: dict[str, list[str]] = {}
    for orders in (int(o) for o in c.comma_list(args.orders)):
        for claim in c.comma_list(args.claims):
            cell = f"{claim}/{orders}"
            cells.append(cell)
            ladders[cell] = thin(
                rates(overrides.get(cell, LADDERS.get((claim, orders), DEFAULT_LADDER))), args.steps
            )
            label[cell] = [claim, str(orders), str(3 * orders)]
    unknown = set(overrides) - set(cells)
    if unknown:
        raise SystemExit(
            f"--ladder for cells not run: {', '.join(sorted(unknown))} (cells: {', '.join(cells)})"
        )

    def cli(cell: str) -> list[str]:
        claim, orders = cell.split("/")
        return ["-claim", claim, "-orders", orders, *shape_args(args), *sweep_args(args, ladders[cell])]

    runs = sweep_cells(cells, args, cli, run_cell)
    slo = slo_text(args)
    for cell in cells:
        run = runs[cell][-1]
        sr.print_steps(
            run,
            f"{cell}: -claim {label[cell][0]} -orders {label[cell][1]} ({label[cell][2]} groups)"
            f" -workers {args.workers} -work-ms {args.work_ms}; -sweep {run['sweep']['spec']}"
            f" -step {args.step:g} -settle {args.settle:g}{slo}"
            + (f"; round {len(runs[cell])} of {len(runs[cell])}" if len(runs[cell]) > 1 else ""),
        )
    sr.print_knees(
        cells,
        runs,
        label,
        ["claim", "orders", "groups"],
        f"max sustainable rate (knee) per cell, {args.repeat} round(s); -workers {args.workers}"
        f" -work-ms {args.work_ms}, wake-up {args.wakeup or 'poll'}{slo}",
    )


if __name__ == "__main__":
    main()
