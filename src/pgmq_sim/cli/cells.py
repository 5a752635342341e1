"""-compare's cells: a queue design each, with its wake-up and transaction mode."""

from __future__ import annotations

from pgmq_sim.designs.design import STRATEGIES, find_design, known_designs
from pgmq_sim.errors import UsageError
from pgmq_sim.model.kinds import TxMode, WakeupMode


def parse_compare(text: str, tx: TxMode | None = None) -> list[tuple[str, WakeupMode, TxMode | None]]:
    """'all' or a comma list of DESIGN[/WAKEUP][/TX] cells (TX: single or split; none: the design's)."""
    wakeups, modes = [w.value for w in WakeupMode], [t.value for t in TxMode]
    if text.strip() == "all":
        return [(s, w, tx) for s in known_designs() if s in STRATEGIES for w in WakeupMode]
    cells = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, *dimensions = split_cell(item)
        find_design(name, "-compare")  # an unknown name or folder is refused before anything runs
        wakeup, mode = WakeupMode.POLL, tx
        for value in dimensions:
            if value in wakeups:
                wakeup = WakeupMode(value)
            elif value in modes:
                mode = TxMode(value)
            else:
                raise UsageError(
                    f"unknown wake-up or -tx '{value}' in -compare; use {', '.join(wakeups + modes)}"
                )
        cells.append((name, wakeup, mode))
    if not cells:
        raise UsageError("-compare needs 'all' or DESIGN[/WAKEUP][/TX],... e.g. seed,indexed/notify/split")
    return cells


def split_cell(item: str) -> list[str]:
    """A -compare cell: the design (a name, or a folder such as examples/jobs), then its wake-up
    and transaction mode, the trailing parts that name one."""
    parts = item.split("/")
    dimensions: list[str] = []
    while len(parts) > 1 and parts[-1] in {*WakeupMode, *TxMode}:
        dimensions.insert(0, parts.pop())
    return ["/".join(parts), *dimensions]
