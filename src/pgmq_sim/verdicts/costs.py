"""What inflated the run's costs, from its claim account (result/claims): a cause outside the run,
named by what was measured, in the shape of the limit's causes (resource, share, evidence, fix).
A run's limit can be none while its costs are not the queue's: the limit's evidence then says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgmq_sim.result.run import RunResult


@dataclass(frozen=True)
class CostCause:
    resource: str
    share: float  # of the empty claims
    evidence: str
    fix: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "share": round(self.share, 3),
            "evidence": self.evidence,
            "fix": self.fix,
        }


def cost_cause(r: RunResult) -> CostCause | None:
    """A session outside the run whose notifications on the run's channel woke a good share of the
    empty claims (result/claims OUTSIDE_SHARE), or None."""
    claims = r.claims
    evidence = claims.inflation_text() if claims is not None else None
    if claims is None or evidence is None:
        return None
    top = claims.outside[0]
    return CostCause(
        "notifier",
        claims.outside_empty / claims.empty_claims,
        evidence,
        f"stop {top.name()} notifying channel {claims.channel}, or move it to a channel of its own: any"
        " session of the database may notify a channel, and each notification wakes a worker to claim",
    )
