"""Whether a bystander's latency beside the queue can be compared with its latency alone: only when
the two alone windows (before the workers started and after they stopped) agree, and the queue did
not make the neighbour faster (an idle machine's baseline, each transaction waking a sleeping CPU)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.model.quantities import ms_text
from pgmq_sim.result.costs import BystanderResult

BASELINES_AGREE = 0.3  # alone before and after within 30% (p50): the baseline is the server's own
FASTER_BESIDE = 0.75  # beside below 75% of alone (p50): the alone windows were an idle machine's


@dataclass(frozen=True)
class BystanderVerdict:
    incomparable_because: str | None  # None: beside and alone can be compared

    @property
    def comparable(self) -> bool:
        return self.incomparable_because is None

    def as_json(self) -> dict[str, Any]:
        return {"comparable": self.comparable, "incomparable_because": self.incomparable_because}


def judge_bystander(b: BystanderResult) -> BystanderVerdict:
    return BystanderVerdict(incomparable_because(b))


def incomparable_because(b: BystanderResult) -> str | None:
    """Why beside and alone cannot be compared, or None when they can."""
    before = (b.before_ms or {}).get("p50")
    after = (b.after_ms or {}).get("p50")
    alone, beside = b.alone_ms.get("p50"), b.beside_ms.get("p50")
    if before is None or after is None or alone is None or beside is None:
        return "alone was not measured both before and after the workers"
    if abs(before - after) > BASELINES_AGREE * max(before, after):
        return f"alone before ({ms_text(before)}) and after ({ms_text(after)}) disagree: the server changed"
    if beside < FASTER_BESIDE * alone:
        return (
            f"faster beside the queue ({ms_text(beside)}) than alone ({ms_text(alone)}): on an idle"
            " machine each transaction waits for a sleeping CPU to wake; compare the p99s"
        )
    return None
