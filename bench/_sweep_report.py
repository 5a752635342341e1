"""A sweep's JSON read and printed, for knee.py and skew.py: its steps and knee, the step and knee tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import _common as c


def rows_before(run: Mapping[str, Any], started_s: float) -> int:
    """Messages the producer inserted before a step started, from the run's per-second timeline."""
    return sum(int(s.get("arrived") or 0) for s in run.get("timeline") or [] if s["second"] + 1 <= started_s)


def steps(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("sweep") or {}).get("steps") or [])


def knee(run: Mapping[str, Any]) -> float:
    value = (run.get("sweep") or {}).get("max_sustainable_per_s")
    return float("nan") if value is None else float(value)


def knee_step(run: Mapping[str, Any]) -> dict[str, Any] | None:
    number = (run.get("sweep") or {}).get("knee_step")
    return None if number is None else steps(run)[number - 1]


def first_failure(run: Mapping[str, Any]) -> dict[str, Any] | None:
    return next((s for s in sorted(steps(run), key=lambda s: s["setting"]) if s["verdict"] != "pass"), None)


def max_achieved(run: Mapping[str, Any]) -> float:
    return max((s["achieved_per_s"] for s in steps(run)), default=float("nan"))


def audit_text(run: Mapping[str, Any]) -> str:
    """The audit over the whole ramp: verdict, messages, and any duplicate, missing, out of order or
    left behind."""
    audit = run.get("audit")
    if not audit:
        return "off"
    text = f"{audit['verdict']} {audit['processed']}/{audit['expected']}"
    faults = [
        f"{audit[key]} {label}"
        for key, label in (
            ("duplicates", "dup"),
            ("missing", "missing"),
            ("order_violations", "order"),
            ("left_behind", "left"),
        )
        if audit.get(key)
    ]
    return text + (f" ({', '.join(faults)})" if faults else "")


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return c.fmt(value, 0 if value >= 100 else 1)


def odd_steps(run: Mapping[str, Any]) -> list[str]:
    """What the verdict rules make of this ramp that a reader should know: a step that passed above
    a failed one (the knee stays below the failure), a passing step whose achieved rate is well
    under its offered one, a step that inherited a backlog."""
    notes = []
    ordered = sorted(steps(run), key=lambda s: s["setting"])
    failed = first_failure(run)
    if ordered and failed is None:
        top = ordered[-1]["setting"]
        notes.append(f"every step passed: the knee is the ladder's top ({top:g}/s), a lower bound")
    if ordered and failed is ordered[0]:
        notes.append(f"the lowest step ({failed['setting']:g}/s) failed: no knee; start the ladder lower")
    if failed is not None:
        above = [s for s in ordered if s["setting"] > failed["setting"] and s["verdict"] == "pass"]
        passed = ", ".join(f"{s['setting']:g}/s" for s in above)
        if above:
            notes.append(
                f"step {failed['index'] + 1} ({failed['setting']:g}/s) failed"
                f" ({'; '.join(failed['reasons'])}) but higher steps passed:"
                f" {passed}; the knee stays below the failure"
            )
    for s in ordered:
        if s["verdict"] == "pass" and s["achieved_per_s"] < 0.9 * s["offered_per_s"]:
            notes.append(
                f"step {s['index'] + 1} ({s['setting']:g}/s) passed with achieved {s['achieved_per_s']:.0f}/s"
                f" ({s['achieved_per_s'] / s['offered_per_s']:.0%} of offered), backlog {s['backlog_end']}"
                f" at its end, slope {s['backlog_slope_per_s']:.0f}/s"
            )
    previous: dict[str, Any] | None = None
    for s in steps(run):
        if previous is not None and previous["backlog_left"]:
            notes.append(
                f"step {s['index'] + 1} ({s['setting']:g}/s) started with {previous['backlog_left']} messages"
                f" the previous step's settle ({previous['settle_s']:.1f} s) left"
            )
        previous = s
    return notes


def print_steps(run: Mapping[str, Any], title: str) -> None:
    """The step table of one sweep: what the tool's summary shows, plus the inherited backlog and
    the rows in the table."""
    rows = []
    previous_left = 0
    for s in steps(run):
        rows.append(
            [
                str(s["index"] + 1),
                c.fmt(s["offered_per_s"], 0),
                c.fmt(s["achieved_per_s"], 0),
                c.fmt(s["achieved_per_s"] / s["offered_per_s"], 2) if s["offered_per_s"] else "-",
                ms(s["e2e_ms"]["p50"]),
                ms(s["e2e_ms"]["p99"]),
                ms(s["claim_ms"]["p50"]),
                str(previous_left),
                str(s["backlog_end"]),
                c.fmt(s["backlog_slope_per_s"], 0),
                c.fmt(s["settle_s"], 1),
                str(s["backlog_left"]),
                f"{rows_before(run, s['started_s']):,}",
                s["verdict"].upper() if s["verdict"] != "pass" else "pass",
                "; ".join(s["reasons"]),
            ]
        )
        previous_left = s["backlog_left"]
    c.print_table(
        ["step", "offered/s", "achieved/s", "ach/off", "e2e p50 ms", "e2e p99 ms", "claim p50 ms",
         "start backlog", "end backlog", "slope/s", "settle s", "left", "rows", "verdict", "why"],
        rows,
        title,
    )  # fmt: skip
    for note in odd_steps(run):
        print(f"  note: {note}")


def print_knees(
    cells: Sequence[str],
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    label: Mapping[str, Sequence[str]],
    label_headers: Sequence[str],
    title: str,
) -> None:
    """One row per cell: the knee (median over rounds) with its step's figures, the bounds the JSON
    reports, the first failing step, the largest achieved rate, the audit over the ramp."""
    rows = []
    for cell in cells:
        r = runs[cell]
        knees = [knee(run) for run in r]
        median_knee = c.median([k for k in knees if not math.isnan(k)])
        last = r[-1]
        at = knee_step(last)
        failed = first_failure(last)
        bound = c.median_at(r, "ordering_bound_per_s")
        worker_bound = c.median_at(r, "worker_bound_per_s")
        tight = min(bound, worker_bound) if not math.isnan(worker_bound) else bound
        rows.append(
            [
                *label[cell],
                f"{len(steps(last))} x {last['sweep']['step_s']:g} s",
                c.fmt(median_knee, 0),
                "-" if at is None else c.fmt(at["achieved_per_s"], 0),
                "-" if at is None else ms(at["e2e_ms"]["p99"]),
                "-" if failed is None else f"{failed['setting']:g} ({failed['achieved_per_s']:.0f})",
                c.fmt(c.median([max_achieved(run) for run in r]), 0),
                c.fmt(c.median_at(r, "work_mean_ms"), 2),
                c.fmt(bound, 0),
                c.fmt(worker_bound, 0),
                c.fmt(median_knee / tight, 2) if tight == tight and tight else "-",
                "; ".join(audit_text(run) for run in r),
                ", ".join(c.fmt(k, 0) for k in knees),
            ]
        )
    c.print_table(
        [*label_headers, "steps", "knee/s", "ach/s at knee", "p99 ms at knee", "1st fail (ach)", "max ach/s",
         "work ms", "order bound/s", "worker bound/s", "knee/bound", "audit (whole ramp)", "all runs' knees"],
        rows,
        title,
    )  # fmt: skip
    print(
        "knee = max_sustainable_per_s: the highest rate that passed with every lower rate passing (median of"
        " the rounds; the step figures are the last round's).\n1st fail = the lowest failing rate (its"
        " achieved/s); max ach/s = the largest achieved rate of any step (a capacity figure that does not"
        " depend on the verdict rules).\norder bound = groups (or the hottest group's cap) / a group's cycle"
        " (work, claim and completion, p50);"
        " worker bound = the same with each type's groups limited to its workers; knee/bound against the"
        " lower of the two."
    )
