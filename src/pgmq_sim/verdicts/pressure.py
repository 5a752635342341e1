"""-suite pressure's scorecard read from its cells' runs: per design and pressure, the audit, the
figures under the pressure and the recovery after it; a pressure the server, the role or the path
could not take is a skipped row with the reason, and one never applied a row `not injected` with
its reason: neither is ever a pass. And whether, and when, a run recovered after a pressure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pgmq_sim.model.pressure import RECOVERY_HOLD_S, RECOVERY_P99_FACTOR, SUITE_PRESSURES
from pgmq_sim.result.phased import SuiteCell
from pgmq_sim.result.run import RunResult
from pgmq_sim.result.timeline import SecondSample

NOT_INJECTED = "not injected: "


def recovery(
    samples: Sequence[SecondSample], start_s: float, end_s: float, backlog: int, p99_ms: float | None
) -> float | None:
    """Seconds from `start_s` until the backlog is back to `backlog` and each second's end-to-end
    p99 within RECOVERY_P99_FACTOR of `p99_ms`, for RECOVERY_HOLD_S whole seconds in a row (or up to
    the phase's end); None: not within [start_s, end_s)."""
    bound = None if p99_ms is None else p99_ms * RECOVERY_P99_FACTOR
    seconds = [s for s in samples if s.second >= int(start_s) and s.second + 1 <= end_s + 1e-9]
    run = 0
    for index, s in enumerate(seconds):
        fine = s.backlog <= backlog and (
            bound is None or (s.e2e_p99_ms is not None and s.e2e_p99_ms <= bound)
        )
        run = run + 1 if fine else 0
        if run >= RECOVERY_HOLD_S or (fine and index == len(seconds) - 1):
            first = seconds[index - run + 1]
            return max(0.0, first.second - start_s)
    return None


def suite_cell(result: RunResult) -> SuiteCell | None:
    """The cell a run in phases scores (None: not a run with a pressure phase)."""
    index = next((i for i, p in enumerate(result.phases) if p.pressure is not None), None)
    if index is None:
        return None
    pressed = result.phases[index]
    assert pressed.pressure is not None
    after = result.phases[index + 1] if index + 1 < len(result.phases) else None
    audit = result.audit
    refused = [f.partition(NOT_INJECTED)[2] for f in pressed.faults if NOT_INJECTED in f]
    audited = SuiteCell(
        result.strategy,
        pressed.pressure,
        audit=audit.verdict if audit is not None else None,
        lost=audit.missing if audit is not None else None,
        duplicated=audit.duplicates if audit is not None else None,
        out_of_order=audit.order_violations if audit is not None else None,
    )
    if len(refused) == len(pressed.faults):  # it never acted on the queue: nothing to score
        return replace(audited, not_injected=refused[0] if refused else "no fault was made in its phase")
    return replace(
        audited,
        throughput_per_s=pressed.throughput_per_s,
        p99_ms=pressed.p99_ms,
        recovery_s=after.recovery_s if after is not None else None,
        recovered=after.recovered if after is not None else None,
        dead_tuples_peak=max(
            (p.dead_tuples_peak for p in result.phases if p.dead_tuples_peak is not None), default=None
        ),
        limit=pressed.limit,
        limit_evidence=pressed.limit_evidence,
    )


def scorecard(
    results: Sequence[RunResult], failed: Sequence[dict[str, str]], skipped: Sequence[dict[str, str]] = ()
) -> list[SuiteCell]:
    """Every cell, by design as they ran and pressure as the suite orders them; a cell that could
    not start is skipped with its error, or with the reason the path cannot take its pressure."""
    cells = [cell for cell in map(suite_cell, results) if cell is not None]
    cells += [SuiteCell(f["strategy"], f["pressure"], skipped=f["error"]) for f in failed if "pressure" in f]
    cells += [SuiteCell(f["strategy"], f["pressure"], skipped=f["skipped"]) for f in skipped]
    designs = list(dict.fromkeys(c.design for c in cells))
    names = [p.partition(":")[0] for p in SUITE_PRESSURES]

    def place(cell: SuiteCell) -> tuple[int, int]:
        name = cell.pressure.partition(":")[0]
        return designs.index(cell.design), names.index(name) if name in names else len(names)

    return sorted(cells, key=place)


def suite_json(cells: Sequence[SuiteCell], phase_s: float) -> dict[str, Any]:
    return {"kind": "pressure", "phase_s": phase_s, "cells": [c.as_json() for c in cells]}
